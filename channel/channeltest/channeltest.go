package channeltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
)

// Wallet is the far end of a channel: the user's wallet, driven by a test. Methods may block
// until the channel has accepted what the wallet sent; they never wait for the bot to react.
type Wallet interface {
	// Conn is the id the channel gives this wallet's connection in its events.
	Conn() string
	// SendText sends a text (replyTo: the id of a received message it answers, or "").
	SendText(ctx context.Context, content, replyTo string) error
	RequestMenu(ctx context.Context) error
	SelectMenu(ctx context.Context, optionID string) error
	// Answer answers the question received with id questionID (see Received.ID).
	Answer(ctx context.Context, questionID, response string) error
	SendProfile(ctx context.Context, displayName, language string) error
	// Present answers the proof request received with id requestID with the wallet's credential.
	Present(ctx context.Context, requestID string) error
	// Decline refuses the proof request.
	Decline(ctx context.Context, requestID string) error
	// Next returns the next message the wallet received, waiting until ctx is done.
	Next(ctx context.Context) (Received, error)
}

// Received is one message as the wallet got it: exactly one of the pointers is set.
type Received struct {
	// ID is the message's id on the wire: what a reply, an answer or a presentation refers to.
	ID           string
	Text         *channel.Text
	Menu         *channel.Menu
	Question     *channel.Question
	ProofRequest *channel.ProofRequest
	Profile      *channel.Profile
	Invitation   *channel.Invitation
	Receipts     *channel.Receipts
	// Credential is a credential offered to the wallet to keep (a receipt).
	Credential *channel.CredentialOffer
}

// wireID is the id the bot gave the message ("" when none).
func (r Received) wireID() string {
	return channel.Outbound{Text: r.Text, Menu: r.Menu, Question: r.Question, ProofRequest: r.ProofRequest,
		Profile: r.Profile, Invitation: r.Invitation, Receipts: r.Receipts, Credential: r.Credential}.ID()
}

func (r Received) String() string {
	switch {
	case r.Text != nil:
		return fmt.Sprintf("text %q", r.Text.Content)
	case r.Menu != nil:
		return fmt.Sprintf("menu %q", r.Menu.Title)
	case r.Question != nil:
		return fmt.Sprintf("question %q", r.Question.Text)
	case r.ProofRequest != nil:
		return "proof request"
	case r.Profile != nil:
		return fmt.Sprintf("profile %q", r.Profile.DisplayName)
	case r.Invitation != nil:
		return "invitation"
	case r.Receipts != nil:
		return "receipts"
	case r.Credential != nil:
		return "credential offer"
	}
	return "nothing"
}

// Holder is a wallet whose credential can be replaced, as when its issuer re-issues it with
// other claims: its next presentations present claims (with the same holder). Harnesses whose
// wallets are Holders can replay transcripts that re-issue credentials.
type Holder interface {
	Hold(ctx context.Context, claims map[string]string) error
}

// Harness is a channel under test and the way to connect wallets to it.
type Harness struct {
	Channel channel.Channel
	// Connect connects a new wallet that holds a credential with claims; it returns once the
	// wallet is connected (the channel reports ConnectionReady to its handler by then or soon
	// after).
	Connect func(ctx context.Context, claims map[string]string) (Wallet, error)
	// ProofRequest is a request the wallets' credentials satisfy.
	ProofRequest channel.ProofRequest
}

// Events records the events a channel delivers, by connection, for a test to wait on.
type Events struct {
	mu     sync.Mutex
	byConn map[string][]channel.Event
	ids    map[string][]string // the channel's id of each event, by connection
	ready  []string            // connections that became ready, not yet taken by Ready
	wake   chan struct{}
	refuse error // while set, HandleEvent refuses every event with it
}

// NewEvents returns an empty recorder.
func NewEvents() *Events {
	return &Events{byConn: make(map[string][]channel.Event), ids: make(map[string][]string), wake: make(chan struct{})}
}

// Refuse makes HandleEvent refuse every event with err (nil: accept again), as a bot whose
// store is down does.
func (r *Events) Refuse(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refuse = err
}

// HandleEvent records e and its id, or refuses it (see Refuse); it never blocks.
func (r *Events) HandleEvent(_ context.Context, id string, e channel.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse != nil {
		return r.refuse
	}
	r.byConn[e.Connection()] = append(r.byConn[e.Connection()], e)
	r.ids[e.Connection()] = append(r.ids[e.Connection()], id)
	if _, ok := e.(channel.ConnectionReady); ok {
		r.ready = append(r.ready, e.Connection())
	}
	close(r.wake)
	r.wake = make(chan struct{})
	return nil
}

// IDs returns the ids the channel gave the events of conn so far, in order (taken or not).
func (r *Events) IDs(conn string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids[conn]...)
}

// Next returns the oldest unread event of conn, waiting until ctx is done.
func (r *Events) Next(ctx context.Context, conn string) (channel.Event, error) {
	for {
		r.mu.Lock()
		if q := r.byConn[conn]; len(q) > 0 {
			r.byConn[conn] = q[1:]
			r.mu.Unlock()
			return q[0], nil
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no event for connection %s: %w", conn, ctx.Err())
		case <-wake:
		}
	}
}

// Ready returns the next connection that became ready (for a test that did not start it and
// does not know its id), waiting until ctx is done. Its ConnectionReady event stays queued.
func (r *Events) Ready(ctx context.Context) (string, error) {
	for {
		r.mu.Lock()
		if len(r.ready) > 0 {
			c := r.ready[0]
			r.ready = r.ready[1:]
			r.mu.Unlock()
			return c, nil
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no connection became ready: %w", ctx.Err())
		case <-wake:
		}
	}
}

// Expect returns the next event of conn, failing the test unless it is of type E.
func Expect[E channel.Event](ctx context.Context, t testing.TB, r *Events, conn string) E {
	t.Helper()
	for {
		e, err := r.Next(ctx, conn)
		if err != nil {
			t.Fatalf("waiting for %T: %v", *new(E), err)
		}
		if _, ok := e.(channel.ConnectionReady); ok {
			if _, want := any(*new(E)).(channel.ConnectionReady); !want {
				continue // a channel may report readiness again (reconnection); not what we wait for
			}
		}
		got, ok := e.(E)
		if !ok {
			t.Fatalf("got %T %+v, want %T", e, e, *new(E))
		}
		return got
	}
}

// ExpectReceivedErr returns the next text the wallet got, skipping receipts, without a testing.TB
// (for benchmarks and goroutines).
func ExpectReceivedErr(ctx context.Context, w Wallet) (Received, error) {
	for {
		r, err := w.Next(ctx)
		if err != nil || r.Text != nil {
			return r, err
		}
	}
}

// ExpectReceived returns the next message the wallet got, failing the test when it does not
// satisfy is (e.g. func(r Received) bool { return r.Menu != nil }). Receipts are skipped unless
// asked for: channels may send them at any time.
func ExpectReceived(ctx context.Context, t testing.TB, w Wallet, what string, is func(Received) bool) Received {
	t.Helper()
	for {
		r, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if r.Receipts != nil && !is(r) {
			continue
		}
		if !is(r) {
			t.Fatalf("wallet got %s, want %s", r, what)
		}
		return r
	}
}

// timeout bounds every wait of the suite, so that a broken channel fails rather than hangs; it
// is not a performance assertion.
const timeout = 30 * time.Second

// Run runs the conformance suite against the channel that open returns. open is called once
// per subtest and must return a fresh channel (not yet running) and its harness.
func Run(t *testing.T, open func(t *testing.T) Harness) {
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, t *testing.T, h Harness, ev *Events)
	}{
		{"TextBothWays", testText},
		{"Menu", testMenu},
		{"Question", testQuestion},
		{"Profile", testProfile},
		{"Refused", testRefused},
		{"IDs", testIDs},
		{"Proof", testProof},
		{"InvitationAndReceipts", testInvitationAndReceipts},
		{"OrderAndIsolation", testOrderAndIsolation},
		{"UnknownConnection", testUnknownConnection},
		{"OwnInvitation", testOwnInvitation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			h := open(t)
			ev := NewEvents()
			runCtx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- h.Channel.Run(runCtx, ev) }()
			defer func() {
				stop()
				if err := <-done; err != nil {
					t.Errorf("Run returned %v after its context ended", err)
				}
				for range 2 {
					if err := h.Channel.Close(); err != nil {
						t.Errorf("Close after Run returned (twice: it is idempotent): %v", err)
					}
				}
			}()
			tc.run(ctx, t, h, ev)
		})
	}
}

func connect(ctx context.Context, t *testing.T, h Harness, ev *Events, claims map[string]string) Wallet {
	t.Helper()
	w, err := h.Connect(ctx, claims)
	if err != nil {
		t.Fatalf("connect a wallet: %v", err)
	}
	Expect[channel.ConnectionReady](ctx, t, ev, w.Conn())
	return w
}

var anaClaims = map[string]string{"email": "ana@example.org", "name": "Ana", "roles": "employee,finance"}

func testText(ctx context.Context, t *testing.T, h Harness, ev *Events) {
	w := connect(ctx, t, h, ev, anaClaims)
	if err := w.SendText(ctx, "hola, ¿qué tal? 👋", ""); err != nil {
		t.Fatal(err)
	}
	in := Expect[channel.TextReceived](ctx, t, ev, w.Conn())
	if in.Content != "hola, ¿qué tal? 👋" || in.MessageID == "" {
		t.Fatalf("text received %+v", in)
	}
	id, err := h.Channel.SendText(ctx, w.Conn(), channel.Text{Content: "hello\nsecond line"})
	if err != nil {
		t.Fatal(err)
	}
	got := ExpectReceived(ctx, t, w, "text", func(r Received) bool { return r.Text != nil })
	if got.Text.Content != "hello\nsecond line" || got.ID != id {
		t.Fatalf("wallet got %+v (id %s), want id %s", got.Text, got.ID, id)
	}
	if err := w.SendText(ctx, "an answer", got.ID); err != nil {
		t.Fatal(err)
	}
	if in := Expect[channel.TextReceived](ctx, t, ev, w.Conn()); in.ReplyTo != id || in.Content != "an answer" {
		t.Fatalf("reply %+v, want ReplyTo %s", in, id)
	}
}

func testMenu(ctx context.Context, t *testing.T, h Harness, ev *Events) {
	ms, ok := h.Channel.(channel.MenuSender)
	if !ok {
		t.Fatalf("%s does not send menus", h.Channel.Name())
	}
	w := connect(ctx, t, h, ev, anaClaims)
	menu := channel.Menu{Title: "Menu", Description: "Authenticated as Ana", Options: []channel.MenuOption{
		{ID: "logout", Title: "Log out"}, {ID: "pending-approvals", Title: "(2) Pending approvals"}}}
	if err := ms.SendMenu(ctx, w.Conn(), menu); err != nil {
		t.Fatal(err)
	}
	got := ExpectReceived(ctx, t, w, "menu", func(r Received) bool { return r.Menu != nil })
	if got.Menu.Title != menu.Title || got.Menu.Description != menu.Description || len(got.Menu.Options) != 2 ||
		got.Menu.Options[1].ID != "pending-approvals" || got.Menu.Options[1].Title != "(2) Pending approvals" {
		t.Fatalf("wallet got menu %+v", got.Menu)
	}
	if err := w.SelectMenu(ctx, "pending-approvals"); err != nil {
		t.Fatal(err)
	}
	if sel := Expect[channel.MenuSelected](ctx, t, ev, w.Conn()); sel.OptionID != "pending-approvals" {
		t.Fatalf("selected %+v", sel)
	}
	if err := w.RequestMenu(ctx); err != nil {
		t.Fatal(err)
	}
	Expect[channel.MenuRequested](ctx, t, ev, w.Conn())
}

func testQuestion(ctx context.Context, t *testing.T, h Harness, ev *Events) {
	qa, ok := h.Channel.(channel.QuestionAsker)
	if !ok {
		t.Fatalf("%s does not ask questions", h.Channel.Name())
	}
	w := connect(ctx, t, h, ev, anaClaims)
	q := channel.Question{Text: "send_money on bank needs approval. Submit a request?", Detail: "amount: 100 EUR", Options: []string{"Yes", "No"}}
	qid, err := qa.AskQuestion(ctx, w.Conn(), q)
	if err != nil {
		t.Fatal(err)
	}
	got := ExpectReceived(ctx, t, w, "question", func(r Received) bool { return r.Question != nil })
	if got.Question.Text != q.Text || got.Question.Detail != q.Detail || len(got.Question.Options) != 2 || got.Question.Options[1] != "No" {
		t.Fatalf("wallet got question %+v", got.Question)
	}
	if err := w.Answer(ctx, got.ID, "Yes"); err != nil {
		t.Fatal(err)
	}
	if a := Expect[channel.QuestionAnswered](ctx, t, ev, w.Conn()); a.QuestionID != qid || a.Response != "Yes" {
		t.Fatalf("answer %+v, want question %s", a, qid)
	}
}

// testReadyFirst: a wallet that speaks the moment it is connected still has its ConnectionReady
// delivered first.
// testRefused: an event the handler does not accept is not acknowledged to the wallet (its send
// fails, so that it may send again), and the channel goes on delivering afterwards.
func testRefused(ctx context.Context, t *testing.T, h Harness, ev *Events) {
	w := connect(ctx, t, h, ev, anaClaims)
	ev.Refuse(errors.New("inbox unavailable"))
	if err := w.SendText(ctx, "refused", ""); err == nil {
		t.Fatal("the wallet's send succeeded although the handler refused the event")
	}
	ev.Refuse(nil)
	if err := w.SendText(ctx, "accepted", ""); err != nil {
		t.Fatal(err)
	}
	if in := Expect[channel.TextReceived](ctx, t, ev, w.Conn()); in.Content != "accepted" {
		t.Fatalf("text received %+v, want the one sent after the refusal", in)
	}
}

// testIDs: outbound messages travel with the ids the bot gave them, and the handler gets the
// wire id of inbound messages.
func testIDs(ctx context.Context, t *testing.T, h Harness, ev *Events) {
	w := connect(ctx, t, h, ev, anaClaims)
	const textID, menuID, questionID = "7d3f1c9e-1b2a-4c5d-8e6f-0a1b2c3d4e5f", "0c1d2e3f-4a5b-4c6d-9e7f-8a9b0c1d2e3f", "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"
	if _, err := h.Channel.SendText(ctx, w.Conn(), channel.Text{ID: textID, Content: "with an id"}); err != nil {
		t.Fatal(err)
	}
	if got := ExpectReceived(ctx, t, w, "text", func(r Received) bool { return r.Text != nil }); got.ID != textID {
		t.Fatalf("text arrived with id %q, want %q", got.ID, textID)
	}
	if ms, ok := h.Channel.(channel.MenuSender); ok {
		if err := ms.SendMenu(ctx, w.Conn(), channel.Menu{ID: menuID, Title: "Menu", Options: []channel.MenuOption{{ID: "a", Title: "A"}}}); err != nil {
			t.Fatal(err)
		}
		if got := ExpectReceived(ctx, t, w, "menu", func(r Received) bool { return r.Menu != nil }); got.ID != menuID {
			t.Fatalf("menu arrived with id %q, want %q", got.ID, menuID)
		}
	}
	if qa, ok := h.Channel.(channel.QuestionAsker); ok {
		qid, err := qa.AskQuestion(ctx, w.Conn(), channel.Question{ID: questionID, Text: "Submit?", Options: []string{"Yes", "No"}})
		if err != nil {
			t.Fatal(err)
		}
		got := ExpectReceived(ctx, t, w, "question", func(r Received) bool { return r.Question != nil })
		if qid != questionID {
			t.Fatalf("AskQuestion returned %q, want the id given %q", qid, questionID)
		}
		if err := w.Answer(ctx, got.ID, "No"); err != nil {
			t.Fatal(err)
		}
		if a := Expect[channel.QuestionAnswered](ctx, t, ev, w.Conn()); a.QuestionID != questionID {
			t.Fatalf("answer names question %q, want %q", a.QuestionID, questionID)
		}
	}
	if err := w.SendText(ctx, "inbound", ""); err != nil {
		t.Fatal(err)
	}
	in := Expect[channel.TextReceived](ctx, t, ev, w.Conn())
	ids := ev.IDs(w.Conn())
	if in.MessageID == "" || ids[len(ids)-1] != in.MessageID {
		t.Fatalf("handler got id %q for a text whose message id is %q", ids[len(ids)-1], in.MessageID)
	}
}

func testProfile(ctx context.Context, t *testing.T, h Harness, ev *Events) {
	w := connect(ctx, t, h, ev, anaClaims)
	if err := w.SendProfile(ctx, "Ana", "es"); err != nil {
		t.Fatal(err)
	}
	if p := Expect[channel.ProfileReceived](ctx, t, ev, w.Conn()); p.PreferredLanguage != "es" || p.DisplayName != "Ana" {
		t.Fatalf("profile %+v", p)
	}
	ps, ok := h.Channel.(channel.ProfileSender)
	if !ok {
		return // the VS Agent sends the bot's profile itself
	}
	if err := ps.SendProfile(ctx, w.Conn(), channel.Profile{DisplayName: "packbot demo bank", Description: "demo"}); err != nil {
		t.Fatal(err)
	}
	got := ExpectReceived(ctx, t, w, "profile", func(r Received) bool { return r.Profile != nil })
	if got.Profile.DisplayName != "packbot demo bank" {
		t.Fatalf("wallet got profile %+v", got.Profile)
	}
}

func testProof(ctx context.Context, t *testing.T, h Harness, ev *Events) {
	pr, ok := h.Channel.(channel.ProofRequester)
	if !ok {
		t.Fatalf("%s does not request proofs", h.Channel.Name())
	}
	w := connect(ctx, t, h, ev, anaClaims)
	rid, err := pr.RequestProof(ctx, w.Conn(), h.ProofRequest)
	if err != nil {
		t.Fatal(err)
	}
	got := ExpectReceived(ctx, t, w, "proof request", func(r Received) bool { return r.ProofRequest != nil })
	if err := w.Present(ctx, got.ID); err != nil {
		t.Fatal(err)
	}
	res := Expect[channel.PresentationResult](ctx, t, ev, w.Conn())
	if (res.RequestID != rid && res.RequestID != "") || res.Outcome != channel.Verified {
		t.Fatalf("result %+v, want verified for request %s", res, rid)
	}
	for k, v := range anaClaims {
		if fmt.Sprint(res.Claims[k]) != v {
			t.Fatalf("claim %s = %v, want %q (claims %v)", k, res.Claims[k], v, res.Claims)
		}
	}

	rid, err = pr.RequestProof(ctx, w.Conn(), h.ProofRequest)
	if err != nil {
		t.Fatal(err)
	}
	got = ExpectReceived(ctx, t, w, "proof request", func(r Received) bool { return r.ProofRequest != nil })
	if err := w.Decline(ctx, got.ID); err != nil {
		t.Fatal(err)
	}
	if res := Expect[channel.PresentationResult](ctx, t, ev, w.Conn()); (res.RequestID != rid && res.RequestID != "") || res.Outcome != channel.Declined || len(res.Claims) != 0 {
		t.Fatalf("declined: %+v", res)
	}
}

func testInvitationAndReceipts(ctx context.Context, t *testing.T, h Harness, ev *Events) {
	w := connect(ctx, t, h, ev, anaClaims)
	if is, ok := h.Channel.(channel.InvitationSender); ok {
		inv := channel.Invitation{DID: "did:web:issuer.example", Label: "Acme issuer"}
		if err := is.SendInvitation(ctx, w.Conn(), inv); err != nil {
			t.Fatal(err)
		}
		got := ExpectReceived(ctx, t, w, "invitation", func(r Received) bool { return r.Invitation != nil })
		if got.Invitation.DID != inv.DID && got.Invitation.URL == "" {
			t.Fatalf("wallet got invitation %+v", got.Invitation)
		}
	}
	rs, ok := h.Channel.(channel.ReceiptSender)
	if !ok {
		return
	}
	if err := w.SendText(ctx, "read me", ""); err != nil {
		t.Fatal(err)
	}
	in := Expect[channel.TextReceived](ctx, t, ev, w.Conn())
	if err := rs.SendReceipts(ctx, w.Conn(), channel.Receipts{MessageIDs: []string{in.MessageID}, State: channel.ReceiptViewed}); err != nil {
		t.Fatal(err)
	}
	got := ExpectReceived(ctx, t, w, "receipts", func(r Received) bool { return r.Receipts != nil })
	if len(got.Receipts.MessageIDs) != 1 || got.Receipts.MessageIDs[0] != in.MessageID || got.Receipts.State != channel.ReceiptViewed {
		t.Fatalf("wallet got receipts %+v", got.Receipts)
	}
}

// testOrderAndIsolation: two wallets talk at once; each one's messages arrive in order, on its
// own connection, and the bot's replies reach only the wallet they are for.
func testOrderAndIsolation(ctx context.Context, t *testing.T, h Harness, ev *Events) {
	a := connect(ctx, t, h, ev, anaClaims)
	b := connect(ctx, t, h, ev, map[string]string{"email": "bob@example.org", "name": "Bob", "roles": "guest"})
	if a.Conn() == b.Conn() {
		t.Fatal("two wallets share a connection id")
	}
	const n = 10
	errc := make(chan error, 2)
	for _, w := range []Wallet{a, b} {
		go func() {
			for i := range n {
				if err := w.SendText(ctx, fmt.Sprintf("%s #%d", w.Conn(), i), ""); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []Wallet{a, b} {
		for i := range n {
			in := Expect[channel.TextReceived](ctx, t, ev, w.Conn())
			if want := fmt.Sprintf("%s #%d", w.Conn(), i); in.Content != want {
				t.Fatalf("got %q, want %q", in.Content, want)
			}
		}
	}
	for _, w := range []Wallet{a, b} {
		if _, err := h.Channel.SendText(ctx, w.Conn(), channel.Text{Content: "for " + w.Conn()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []Wallet{a, b} {
		got := ExpectReceived(ctx, t, w, "text", func(r Received) bool { return r.Text != nil })
		if got.Text.Content != "for "+w.Conn() {
			t.Fatalf("%s got %q", w.Conn(), got.Text.Content)
		}
	}
}

func testUnknownConnection(ctx context.Context, t *testing.T, h Harness, _ *Events) {
	_, err := h.Channel.SendText(ctx, "no-such-connection", channel.Text{Content: "x"})
	if !errors.Is(err, channel.ErrUnknownConnection) {
		t.Fatalf("SendText to an unknown connection: %v, want ErrUnknownConnection", err)
	}
}

// testOwnInvitation: a channel that has an invitation of its own ([channel.Inviter]) gives a
// URL, and the same one each time (wallets keep scanning the one printed at start).
func testOwnInvitation(ctx context.Context, t *testing.T, h Harness, _ *Events) {
	inv, ok := h.Channel.(channel.Inviter)
	if !ok {
		t.Skip("the channel has no invitation of its own")
	}
	first, err := inv.ConnectionInvitation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.URL == "" {
		t.Fatalf("invitation without a URL: %+v", first)
	}
	again, err := inv.ConnectionInvitation(ctx)
	if err != nil || again != first {
		t.Errorf("second invitation %+v, %v; want the first one, %+v", again, err, first)
	}
}

package didcomm

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/interop/credo"
)

// eventChan is a channel.Handler that hands every event to the test in order.
type eventChan chan channel.Event

func (c eventChan) HandleEvent(_ context.Context, _ string, e channel.Event) error {
	c <- e
	return nil
}

// runWithEvents runs the bot's channel until the test ends, handing its events to the test.
func runWithEvents(t *testing.T, bot *botServer) eventChan {
	events := make(eventChan, 64)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = bot.ch.Run(runCtx, events) }()
	t.Cleanup(func() { stop(); <-done })
	return events
}

func expectEvent[E channel.Event](ctx context.Context, t *testing.T, c eventChan) E {
	t.Helper()
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %T: %v", *new(E), ctx.Err())
		case e := <-c:
			if got, ok := e.(E); ok {
				return got
			}
			t.Logf("skipping %T", e)
		}
	}
}

// TestCredoInterop: a Credo-ts 0.6 wallet (the framework of the Hologram app) accepts packbot's
// invitation with each of its peer DID methods, completes DID exchange, and chats: texts both
// ways, profile, menu and question with their answers (Credo's action-menu and question-answer
// modules).
func TestCredoInterop(t *testing.T) {
	for _, peer := range []int{4, 2, 1} {
		t.Run(fmt.Sprintf("did:peer:%d", peer), func(t *testing.T) {
			credoChat(t, &credo.Options{Peer: peer}, false)
		})
	}
	// The QR code serve prints holds the short URL <public URL>/invitation (RFC 0434): the
	// wallet fetches the invitation from it.
	t.Run("short URL", func(t *testing.T) { credoChat(t, nil, true) })
}

// TestCredoMediated: a wallet as phones run it — no inbound endpoint, registered with a Credo
// mediator (pickup v2, live mode) — connects and chats: the bot's DID exchange response and
// every message after it are wrapped in forward messages for the mediator's routing key and
// sent to its WebSocket (or HTTP) endpoint.
func TestCredoMediated(t *testing.T) {
	for _, scheme := range []string{"ws", "http"} {
		t.Run(scheme, func(t *testing.T) {
			med := credo.StartMediator(t, &credo.MediatorOptions{Endpoint: scheme})
			inv, err := med.CreateInvitation(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			credoChat(t, &credo.Options{Mediator: inv}, false)
		})
	}
}

// credoChat connects a Credo wallet started with opts to a new bot (with the invitation's short
// URL when short) and holds the conversation of TestCredoInterop.
func credoChat(t *testing.T, opts *credo.Options, short bool) {
	ctx := testContext(t)
	st := testStores(t)["SQLite"](t)
	bot := startBot(t, st, nil, "")
	events := runWithEvents(t, bot)

	w := credo.Start(t, opts)
	inv, err := bot.ch.Invitation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if short {
		inv, _, _ = strings.Cut(inv, "?")
	}
	cconn, err := w.ReceiveInvitation(ctx, inv)
	if err != nil {
		t.Fatal(err)
	}
	ready := expectEvent[channel.ConnectionReady](ctx, t, events)
	if ready.Label != "Credo wallet" {
		t.Fatalf("label %q", ready.Label)
	}
	conn := ready.Conn

	id, err := w.SendText(ctx, cconn, "hola desde Credo")
	if err != nil {
		t.Fatal(err)
	}
	if in := expectEvent[channel.TextReceived](ctx, t, events); in.Conn != conn || in.Content != "hola desde Credo" || in.MessageID != id {
		t.Fatalf("bot got %+v", in)
	}
	if _, err := bot.ch.SendText(ctx, conn, channel.Text{Content: "hello Credo", ReplyTo: id}); err != nil {
		t.Fatal(err)
	}
	if e, err := w.Expect(ctx, "text"); err != nil || e.Content != "hello Credo" || e.ParentThreadID != id {
		t.Fatalf("Credo got %s, %v", e, err)
	}

	if _, err := w.SendProfile(ctx, cconn, "Ana", "es"); err != nil {
		t.Fatal(err)
	}
	if p := expectEvent[channel.ProfileReceived](ctx, t, events); p.PreferredLanguage != "es" || p.DisplayName != "Ana" {
		t.Fatalf("profile %+v", p)
	}

	menu := channel.Menu{Title: "Menu", Description: "Not authenticated", Options: []channel.MenuOption{{ID: "authenticate", Title: "Log in"}}}
	if err := bot.ch.SendMenu(ctx, conn, menu); err != nil {
		t.Fatal(err)
	}
	if e, err := w.Expect(ctx, "menu"); err != nil || e.Title != "Menu" || len(e.Options) != 1 || e.Options[0].Name != "authenticate" {
		t.Fatalf("Credo got %s, %v", e, err)
	}
	if _, err := w.Perform(ctx, cconn, "authenticate"); err != nil {
		t.Fatal(err)
	}
	if sel := expectEvent[channel.MenuSelected](ctx, t, events); sel.OptionID != "authenticate" {
		t.Fatalf("selected %+v", sel)
	}
	if _, err := w.RequestMenu(ctx, cconn); err != nil {
		t.Fatal(err)
	}
	expectEvent[channel.MenuRequested](ctx, t, events)

	qid, err := bot.ch.AskQuestion(ctx, conn, channel.Question{Text: "Submit the request?", Detail: "send_money 10 EUR", Options: []string{"Yes", "No"}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := w.Expect(ctx, "question")
	if err != nil || q.QuestionText != "Submit the request?" || len(q.ValidResponses) != 2 {
		t.Fatalf("Credo got %s, %v", q, err)
	}
	if _, err := w.Answer(ctx, cconn, q.ThreadID, "No"); err != nil {
		t.Fatal(err)
	}
	if a := expectEvent[channel.QuestionAnswered](ctx, t, events); a.QuestionID != qid || a.Response != "No" {
		t.Fatalf("answer %+v, want question %s", a, qid)
	}
}

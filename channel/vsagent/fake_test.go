package vsagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/channel/vsagent/vsagenttest"
)

// fakeAgent is the fake VS Agent (vsagenttest) with the wallets of its connections behind it:
// every message the bot posts to a wallet's connection reaches that wallet; one for a connection
// it does not know gets the VS Agent's 500 "Connection with id … not found".
type fakeAgent struct {
	*vsagenttest.Agent

	mu      sync.Mutex
	wallets map[string]*fakeWallet
}

// wireMsg is any message the bot posts.
type wireMsg struct {
	Type         string `json:"type"`
	ID           string `json:"id"`
	ConnectionID string `json:"connectionId"`
	ThreadID     string `json:"threadId"`
	Timestamp    string `json:"timestamp"`
	Content      string `json:"content"`
	Title        string `json:"title"`
	Description  string `json:"description"`
	Options      []struct {
		ID          string `json:"id"`
		Title       string `json:"title"`
		Description string `json:"description"`
	} `json:"options"`
	Prompt    string `json:"prompt"`
	MenuItems []struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	} `json:"menuItems"`
	RequestedProofItems []struct {
		ID                     string   `json:"id"`
		Type                   string   `json:"type"`
		CredentialDefinitionID string   `json:"credentialDefinitionId"`
		Attributes             []string `json:"attributes"`
		Description            string   `json:"description"`
	} `json:"requestedProofItems"`
	DID      string `json:"did"`
	Label    string `json:"label"`
	Receipts []struct {
		MessageID string `json:"messageId"`
		State     string `json:"state"`
		Timestamp string `json:"timestamp"`
	} `json:"receipts"`
}

func newFakeAgent(t testing.TB) *fakeAgent {
	a := &fakeAgent{wallets: map[string]*fakeWallet{}}
	a.Agent = vsagenttest.New(t, &vsagenttest.Options{Strict: true, OnMessage: a.route})
	return a
}

// route hands a posted message to the wallet of its connection.
func (a *fakeAgent) route(m vsagenttest.Message) {
	a.mu.Lock()
	w := a.wallets[m.Conn]
	a.mu.Unlock()
	var wm wireMsg
	if w != nil && json.Unmarshal(m.Body, &wm) == nil {
		w.push(received(wm))
	}
}

// hold registers w's connection with the agent.
func (a *fakeAgent) hold(w *fakeWallet) {
	a.mu.Lock()
	a.wallets[w.conn] = w
	a.mu.Unlock()
	a.Connect(w.conn)
}

// lastSent returns the last body posted, failing the test when there is none.
func (a *fakeAgent) lastSent(t testing.TB) []byte {
	t.Helper()
	all := a.All()
	if len(all) == 0 {
		t.Fatal("nothing posted to the admin API")
	}
	return all[len(all)-1].Body
}

func (a *fakeAgent) count() int { return len(a.All()) }

// message returns the message the bot posted with id, and the DIDComm thread the VS Agent
// opened for it.
func (a *fakeAgent) message(id string) (wireMsg, string, bool) {
	m, ok := a.Message(id)
	var wm wireMsg
	if !ok || json.Unmarshal(m.Body, &wm) != nil {
		return wireMsg{}, "", false
	}
	return wm, m.Thread, true
}

// received turns a posted message into what the wallet sees.
func received(m wireMsg) channeltest.Received {
	r := channeltest.Received{ID: m.ID}
	switch m.Type {
	case "text":
		r.Text = &channel.Text{Content: m.Content, ReplyTo: m.ThreadID}
	case "contextual-menu-update":
		menu := channel.Menu{Title: m.Title, Description: m.Description}
		for _, o := range m.Options {
			menu.Options = append(menu.Options, channel.MenuOption{ID: o.ID, Title: o.Title, Description: o.Description})
		}
		r.Menu = &menu
	case "menu-display":
		// The wallet shows the prompt; the channel puts the detail after a blank line.
		text, detail, _ := strings.Cut(m.Prompt, detailSeparator)
		q := channel.Question{Text: text, Detail: detail}
		for _, it := range m.MenuItems {
			q.Options = append(q.Options, it.Text)
		}
		r.Question = &q
	case "identity-proof-request":
		var p channel.ProofRequest
		if len(m.RequestedProofItems) > 0 {
			it := m.RequestedProofItems[0]
			p = channel.ProofRequest{AnonCreds: &channel.AnonCredsRequest{CredentialDefinitionID: it.CredentialDefinitionID, Attributes: it.Attributes},
				Purpose: it.Description}
		}
		r.ProofRequest = &p
	case "invitation":
		r.Invitation = &channel.Invitation{DID: m.DID, Label: m.Label}
	case "receipts":
		rs := channel.Receipts{}
		for _, x := range m.Receipts {
			rs.MessageIDs = append(rs.MessageIDs, x.MessageID)
			rs.State = x.State
		}
		r.Receipts = &rs
	}
	return r
}

// fakeWallet is a user's wallet behind the fake VS Agent: it posts the VS Agent's webhooks to
// the bot and reads what the bot sent through the admin API.
type fakeWallet struct {
	agent  *fakeAgent
	ch     *Channel
	botURL string
	conn   string
	claims map[string]string
	inbox  channeltest.Queue[channeltest.Received]
}

// connect connects a wallet: the VS Agent reports the connection "completed".
func (a *fakeAgent) connect(ctx context.Context, ch *Channel, botURL string, claims map[string]string) (*fakeWallet, error) {
	w := &fakeWallet{agent: a, ch: ch, botURL: botURL, conn: newUUID(), claims: claims}
	a.hold(w)
	return w, w.post(ctx, routeConnectionState, vsagenttest.Completed(w.conn))
}

func (w *fakeWallet) push(r channeltest.Received) { w.inbox.Push(r) }

// post posts a webhook and requires a 200. The VS Agent does not wait for the bot to run; the
// test does (webhooks before Run are answered 503 and lost, which webhook_test.go checks).
func (w *fakeWallet) post(ctx context.Context, route string, body []byte) error {
	select {
	case <-w.ch.running:
	case <-ctx.Done():
		return ctx.Err()
	}
	code, err := postWebhook(ctx, w.botURL, route, body)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("webhook %s answered %d", route, code)
	}
	return nil
}

func postWebhook(ctx context.Context, botURL, route string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, botURL+"/"+route, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// message posts a message-received webhook of a message of typ with the members m.
func (w *fakeWallet) message(ctx context.Context, typ string, m map[string]any) error {
	_, body := vsagenttest.Received(w.conn, typ, m)
	return w.post(ctx, routeMessageReceived, body)
}

func (w *fakeWallet) Conn() string { return w.conn }

func (w *fakeWallet) SendText(ctx context.Context, content, replyTo string) error {
	m := map[string]any{"content": content}
	if replyTo != "" {
		m["threadId"] = replyTo
	}
	return w.message(ctx, "text", m)
}

func (w *fakeWallet) RequestMenu(ctx context.Context) error {
	return w.message(ctx, "contextual-menu-request", map[string]any{"id": w.conn})
}

func (w *fakeWallet) SelectMenu(ctx context.Context, optionID string) error {
	return w.message(ctx, "contextual-menu-select", map[string]any{"selectionId": optionID})
}

// Answer answers like VS Agent v1.x: the item id comes from its text → id table, and threadId
// is the question's DIDComm thread, not the id the bot gave the message.
func (w *fakeWallet) Answer(ctx context.Context, questionID, response string) error {
	q, thread, ok := w.agent.message(questionID)
	if !ok || q.Type != "menu-display" {
		return fmt.Errorf("no question %s", questionID)
	}
	selection := response // the VS Agent's fallback without a table entry
	for _, it := range q.MenuItems {
		if it.Text == response {
			selection = it.ID
		}
	}
	return w.message(ctx, "menu-select", map[string]any{"threadId": thread, "menuItems": []map[string]string{{"id": selection}}})
}

func (w *fakeWallet) SendProfile(ctx context.Context, displayName, language string) error {
	return w.message(ctx, "profile", map[string]any{"displayName": displayName, "preferredLanguage": language})
}

// Present submits the wallet's credential, revealing the requested attributes, verified.
func (w *fakeWallet) Present(ctx context.Context, requestID string) error {
	req, thread, ok := w.agent.message(requestID)
	if !ok || req.Type != "identity-proof-request" || len(req.RequestedProofItems) == 0 {
		return fmt.Errorf("no proof request %s", requestID)
	}
	names := req.RequestedProofItems[0].Attributes
	if len(names) == 0 {
		for k := range w.claims {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var claims []map[string]string
	for _, n := range names {
		claims = append(claims, map[string]string{"name": n, "value": w.claims[n]})
	}
	return w.message(ctx, "identity-proof-submit", map[string]any{"threadId": requestID, "submittedProofItems": []map[string]any{{
		"id": thread, "type": "verifiable-credential", "proofExchangeId": newUUID(), "verified": true, "claims": claims,
	}}})
}

// Decline refuses, as the VS Agent reports a problem report.
func (w *fakeWallet) Decline(ctx context.Context, requestID string) error {
	_, thread, ok := w.agent.message(requestID)
	if !ok {
		return fmt.Errorf("no proof request %s", requestID)
	}
	return w.message(ctx, "identity-proof-submit", map[string]any{"threadId": requestID, "submittedProofItems": []map[string]any{{
		"id": thread, "proofExchangeId": newUUID(), "errorCode": "Request declined",
	}}})
}

func (w *fakeWallet) Next(ctx context.Context) (channeltest.Received, error) {
	return w.inbox.Next(ctx)
}

// Hold re-issues the wallet's credential with claims (the others stay): its next submissions
// reveal them. Like Present, it is called by the test's goroutine only.
func (w *fakeWallet) Hold(_ context.Context, claims map[string]string) error {
	held := maps.Clone(w.claims)
	maps.Copy(held, claims)
	w.claims = held
	return nil
}

var (
	_ channeltest.Wallet = (*fakeWallet)(nil)
	_ channeltest.Holder = (*fakeWallet)(nil)
)

// logBuffer collects a channel's logs, at debug level, for a test to search.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fixture is a channel wired to a fake VS Agent, with the bot's webhook server.
type fixture struct {
	agent *fakeAgent
	ch    *Channel
	bot   *httptest.Server
	logs  *logBuffer
}

func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	f := &fixture{agent: newFakeAgent(t), logs: &logBuffer{}}
	if cfg.AdminURL == "" {
		cfg.AdminURL = f.agent.URL
	}
	cfg.Logger = f.logs.logger()
	ch, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.ch = ch
	mux := http.NewServeMux()
	ch.Mount(mux)
	f.bot = httptest.NewServer(mux)
	t.Cleanup(f.bot.Close)
	return f
}

// run runs the channel until the test ends, recording its events.
func (f *fixture) run(t testing.TB) *channeltest.Events {
	t.Helper()
	ev := channeltest.NewEvents()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.ch.Run(ctx, ev) }()
	<-f.ch.running
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return ev
}

// wallet registers a connection with the fake VS Agent without announcing it.
func (f *fixture) wallet(conn string) *fakeWallet {
	w := &fakeWallet{agent: f.agent, ch: f.ch, botURL: f.bot.URL, conn: conn}
	f.agent.hold(w)
	return w
}

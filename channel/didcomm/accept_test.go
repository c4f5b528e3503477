package didcomm

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hyperledger/aries-framework-go/pkg/didcomm/transport"

	"github.com/packbot/packbot/channel"
)

// TestWalletAnswersOnReceipt: the wallet answers an envelope 202 as soon as it has read it and
// handles it afterwards, in the order envelopes arrived. The bot's send of a message returns
// while the wallet is still busy with it, and the next message waits behind it: a bot killed
// after the wallet took a message sends it again only if the 202's way back was cut, not
// whenever the wallet was still at work (TestCrashDIDComm counts what that leaves).
func TestWalletAnswersOnReceipt(t *testing.T) {
	ctx := testContext(t)
	st := testStores(t)["SQLite"](t)
	bot := startBot(t, st, nil, "")
	runWithEvents(t, bot)
	tw, err := newTestWallet(t, ctx, bot.ch, st, map[string]string{"name": "Ana"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	hold := func(e WalletEvent) {
		if e.Text != nil && e.Text.Content == "first" {
			close(held)
			<-release
		}
	}
	tw.hold.Store(&hold)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	sent := make(chan error, 1)
	go func() {
		_, err := bot.ch.SendText(ctx, tw.botCon, channel.Text{Content: "first"})
		sent <- err
	}()
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the wallet never got the first message")
	}
	// The wallet holds "first" in its handler: the send has its 202 all the same.
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("send first: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the bot's send waits for the wallet to handle the message")
	}
	if _, err := bot.ch.SendText(ctx, tw.botCon, channel.Text{Content: "second"}); err != nil {
		t.Fatalf("send second while the wallet is busy: %v", err)
	}
	close(release)
	for _, want := range []string{"first", "second"} {
		for {
			e, err := tw.next(ctx)
			if err != nil {
				t.Fatalf("waiting for %q: %v", want, err)
			}
			if e.Text == nil {
				continue
			}
			if e.Text.Content != want {
				t.Fatalf("got %q, want %q (in the order sent)", e.Text.Content, want)
			}
			break
		}
	}
}

// TestReceiverRefusals: a receiver that answers on receipt still refuses what is not an envelope
// (400, nothing queued), answers 503 when its queue is full (the envelope is not taken: the
// sender sends it again), and drops with a WARN line, without handling, what it took while its
// agent was stopped.
func TestReceiverRefusals(t *testing.T) {
	logs := &signalLog{want: "didcomm inbound dropped", logged: make(chan struct{})}
	tr := &inboundTransport{maxBody: DefaultMaxBodyBytes, log: slog.New(slog.NewTextHandler(logs, nil)), received: make(chan []byte, 1)}
	var prov transport.Provider // never used on this path: the envelopes are only queued
	tr.prov.Store(&prov)
	post := func(body string) int {
		w := httptest.NewRecorder()
		tr.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
		return w.Code
	}
	for _, bad := range []string{"", "\"", "[1]", "{not json"} {
		if got := post(bad); got != http.StatusBadRequest {
			t.Errorf("body %q: %d, want 400", bad, got)
		}
	}
	if len(tr.received) != 0 {
		t.Fatalf("%d refused bodies queued", len(tr.received))
	}
	if got := post(`{"protected":"a"}`); got != http.StatusAccepted {
		t.Fatalf("first envelope: %d, want 202", got)
	}
	if got := post(`{"protected":"b"}`); got != http.StatusServiceUnavailable {
		t.Fatalf("envelope beyond the queue: %d, want 503", got)
	}
	if len(tr.received) != 1 || string(<-tr.received) != `{"protected":"a"}` {
		t.Fatal("the queue does not hold exactly the envelope answered 202")
	}

	// Taken, then the agent stops before handling it: dropped, said, nothing handled.
	tr.received <- []byte(`{"protected":"c"}`)
	tr.prov.Store(nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); tr.receive(ctx) }()
	select {
	case <-logs.logged:
	case <-testContext(t).Done():
		t.Fatal("no WARN line for the envelope dropped")
	}
	cancel()
	<-done
	if out := logs.String(); !strings.Contains(out, "agent stopped") {
		t.Errorf("the WARN line does not say why: %s", logs.String())
	}
}

// signalLog is a logBuffer that closes logged at the first line containing want.
type signalLog struct {
	logBuffer
	want   string
	once   sync.Once
	logged chan struct{}
}

func (l *signalLog) Write(p []byte) (int, error) {
	n, err := l.logBuffer.Write(p)
	if strings.Contains(string(p), l.want) {
		l.once.Do(func() { close(l.logged) })
	}
	return n, err
}

package didcomm

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperledger/aries-framework-go/pkg/common/model"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/common/service"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/interop/credo"
)

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestOutboundReasons: each way an endpoint can fail has its reason, over HTTP and WebSocket.
func TestOutboundReasons(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer refusing.Close()
	down := closedAddr(t)
	out := newOutboundTransport(t.Context(), &http.Client{}, slog.New(slog.DiscardHandler))
	for endpoint, want := range map[string]string{
		refusing.URL: ReasonHTTPStatus,
		"ws" + strings.TrimPrefix(refusing.URL, "http"): ReasonHTTPStatus,
		"http://" + down:          ReasonRefused,
		"ws://" + down:            ReasonRefused,
		"didcomm:transport/queue": ReasonNoRoute,
	} {
		_, err := out.Send([]byte(`{}`), &service.Destination{ServiceEndpoint: model.NewDIDCommV1Endpoint(endpoint)})
		if reason, ep := undeliveredReason(err); reason != want || ep != endpoint {
			t.Errorf("%s: reason %q endpoint %q (%v), want %q", endpoint, reason, ep, err, want)
		}
		// afgo's DID exchange reports the failure only as text: the reason survives.
		if reason, ep, ok := parseUndelivered("abandoned: send: " + err.Error()); !ok || reason != want || ep != endpoint {
			t.Errorf("%s: parsed %q %q %v from %v", endpoint, reason, ep, ok, err)
		}
	}
}

// lines returns the lines holding every part.
func (l *logBuffer) lines(parts ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all && line != "" {
			out = append(out, line)
		}
	}
	return out
}

// reasons counts the Undelivered hook's calls by reason.
type reasons struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *reasons) add(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[reason]++
}

func (r *reasons) get(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[reason]
}

// TestMediatorDown: a phone-like Credo wallet chats through its mediator; the mediator goes
// down. The bot's next message fails with ErrUndelivered, one WARN line names the connection,
// the message type and the reason, and the Undelivered hook counts it. A wallet whose mediator
// is down when it connects gets no connection: the bot's DID exchange response cannot be
// delivered, the exchange is abandoned (never ready), with the same WARN line and count.
func TestMediatorDown(t *testing.T) {
	ctx := testContext(t)
	logs := &logBuffer{}
	counts := &reasons{}
	bot := startBotWith(t, testStores(t)["SQLite"](t), nil, "", func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c.Undelivered = counts.add
	})
	events := runWithEvents(t, bot)
	inv, err := bot.ch.Invitation(ctx)
	if err != nil {
		t.Fatal(err)
	}

	med := credo.StartMediator(t, nil)
	medInv, err := med.CreateInvitation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := credo.Start(t, &credo.Options{Mediator: medInv})
	if _, err := w.ReceiveInvitation(ctx, inv); err != nil {
		t.Fatal(err)
	}
	conn := expectEvent[channel.ConnectionReady](ctx, t, events).Conn
	if _, err := bot.ch.SendText(ctx, conn, channel.Text{Content: "through the mediator"}); err != nil {
		t.Fatal(err)
	}
	if e, err := w.Expect(ctx, "text"); err != nil || e.Content != "through the mediator" {
		t.Fatalf("wallet got %s, %v", e, err)
	}

	med.Stop()
	_, err = bot.ch.SendText(ctx, conn, channel.Text{Content: "nobody forwards this"})
	if !errors.Is(err, ErrUndelivered) {
		t.Fatalf("send with the mediator down: %v, want ErrUndelivered", err)
	}
	if got := logs.lines("level=WARN", `msg="didcomm message not delivered"`, "connection="+logid.Conn(conn), "type="+typeBasicMessage, "reason="+ReasonRefused, "endpoint=ws://127.0.0.1:"); len(got) != 1 {
		t.Fatalf("WARN lines for the undelivered text: %q", got)
	}
	if n := counts.get(ReasonRefused); n != 1 {
		t.Fatalf("counted %d refused, want 1", n)
	}

	// A wallet whose endpoint is down when the bot answers its DID exchange request (a Credo
	// wallet cannot get there with its mediator down: it first registers its new key with the
	// mediator, and gives up).
	holder, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	w2, err := OpenWallet(WalletConfig{Records: testStores(t)["SQLite"](t), Endpoint: "http://" + closedAddr(t), Label: "offline",
		MasterKey: randomKey(t), Holder: holder, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wstop := context.WithCancel(context.Background())
	wdone := make(chan struct{})
	go func() { defer close(wdone); _ = w2.Run(wctx, func(context.Context, WalletEvent) {}) }()
	t.Cleanup(func() { wstop(); <-wdone; _ = w2.Close() })
	if _, err := w2.Connect(ctx, inv); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the abandoned exchange's WARN line", func() bool {
		return len(logs.lines("level=WARN", `msg="didcomm message not delivered"`, "type="+didexchange10+"response",
			"reason="+ReasonRefused, "state=abandoned", "endpoint=http://127.0.0.1:")) == 1
	})
	if n := counts.get(ReasonRefused); n != 2 {
		t.Fatalf("counted %d refused, want 2", n)
	}
	for len(events) > 0 {
		if r, ok := (<-events).(channel.ConnectionReady); ok {
			t.Fatalf("a connection became ready: %+v", r)
		}
	}
}

// waitFor polls cond until it holds, failing the test when ctx ends first.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

package vsagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
)

// post posts body to route on the bot's server and returns the status.
func (f *fixture) post(t *testing.T, route, body string) int {
	t.Helper()
	code, err := postWebhook(t.Context(), f.bot.URL, route, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// recorder is a handler that remembers every event, for tests that check there were none.
type recorder struct {
	mu     sync.Mutex
	events []channel.Event
}

func (r *recorder) HandleEvent(_ context.Context, _ string, e channel.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	return nil
}

func (r *recorder) take() []channel.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

func (f *fixture) runWith(t *testing.T, h channel.Handler) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.ch.Run(ctx, h) }()
	<-f.ch.running
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestWebhookEvents drives every documented webhook through HTTP and checks the event the
// handler got, synchronously: the webhook is answered after the handler returned.
// The channel keeps no per-connection state: each webhook makes exactly its own event.
func TestWebhookEvents(t *testing.T) {
	for _, tc := range inboundCases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{})
			rec := &recorder{}
			f.runWith(t, rec)
			if code := f.post(t, tc.route, tc.body); code != http.StatusOK {
				t.Errorf("status %d", code)
			}
			got := rec.take()
			for i := range got {
				got[i] = withoutDigest(t, got[i])
			}
			var want []channel.Event
			if tc.want != nil {
				want = append(want, tc.want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("events %#v, want %#v", got, want)
			}
		})
	}
}

// TestWebhookNotAccepted: a webhook whose event the handler does not accept (the bot's store is
// down) is answered 503, never 200; the next one is delivered.
func TestWebhookNotAccepted(t *testing.T) {
	f := newFixture(t, Config{})
	var refuse atomic.Bool
	refuse.Store(true)
	var got []string
	var mu sync.Mutex
	f.runWith(t, channel.HandlerFunc(func(_ context.Context, id string, e channel.Event) error {
		if refuse.Load() {
			return errors.New("inbox unavailable")
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, id)
		return nil
	}))
	body := msg(`{"type":"text","id":"m1","connectionId":"c1","content":"hi"}`)
	if code := f.post(t, routeMessageReceived, body); code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", code)
	}
	refuse.Store(false)
	if code := f.post(t, routeMessageReceived, body); code != http.StatusOK {
		t.Fatalf("status %d, want 200", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(got, []string{"m1"}) {
		t.Fatalf("handler got ids %v, want [m1]", got)
	}
}

// TestWebhookBadInput: bad input gets a 4xx with a fixed message, its reason is logged, and it
// makes no event. (The clock steps past the log's rate limit at every rejection.)
func TestWebhookBadInput(t *testing.T) {
	f := newFixture(t, Config{MaxBodyBytes: 512, Now: steppingClock()})
	rec := &recorder{}
	f.runWith(t, rec)
	for _, tc := range badCases {
		if tc.route == "other" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(f.bot.URL+"/"+tc.route, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || string(b) != badBody+"\n" {
				t.Errorf("answered %d %q, want 400 %q", resp.StatusCode, b, badBody)
			}
			if !strings.Contains(f.logs.String(), tc.reason) {
				t.Errorf("reason %q not logged", tc.reason)
			}
		})
	}

	t.Run("wrong method", func(t *testing.T) {
		for _, route := range fuzzRoutes {
			for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
				req, _ := http.NewRequest(method, f.bot.URL+"/"+route, strings.NewReader(`{}`))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
					t.Errorf("%s /%s: %d, Allow %q", method, route, resp.StatusCode, resp.Header.Get("Allow"))
				}
			}
		}
		if !strings.Contains(f.logs.String(), "method not allowed") {
			t.Error("not logged")
		}
	})

	t.Run("body too large", func(t *testing.T) {
		big := msg(`{"type":"text","connectionId":"c1","content":"` + strings.Repeat("x", 600) + `"}`)
		if code := f.post(t, routeMessageReceived, big); code != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d with Content-Length", code)
		}
		// Without Content-Length (chunked): the limit applies while reading.
		req, _ := http.NewRequest(http.MethodPost, f.bot.URL+"/"+routeMessageReceived, io.MultiReader(strings.NewReader(big)))
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d chunked", resp.StatusCode)
		}
		// At the limit exactly: accepted.
		fits := msg(`{"type":"text","connectionId":"c1","content":"`)
		fits += strings.Repeat("x", 512-len(fits)-3) + `"}}`
		if len(fits) != 512 {
			t.Fatalf("len %d", len(fits))
		}
		if code := f.post(t, routeMessageReceived, fits); code != http.StatusOK {
			t.Errorf("status %d at the limit", code)
		}
		rec.take()
	})

	if e := rec.take(); len(e) != 0 {
		t.Errorf("bad input made events %#v", e)
	}
}

// TestWebhookUnknownType: a message type the channel does not support is answered 200 (the
// VS Agent does not retry) and logged, at most once a second, and makes no event.
func TestWebhookUnknownType(t *testing.T) {
	clk := &testClock{}
	f := newFixture(t, Config{Now: clk.now})
	rec := &recorder{}
	f.runWith(t, rec)
	for _, typ := range []string{"media", "mrz-data-submit", "credential-reception", "call-offer", "something-new"} {
		if code := f.post(t, routeMessageReceived, msg(`{"type":"`+typ+`","id":"m1","connectionId":"c1"}`)); code != http.StatusOK {
			t.Errorf("%s: status %d", typ, code)
		}
		if !strings.Contains(f.logs.String(), "type="+typ) {
			t.Errorf("%s not logged", typ)
		}
		clk.add(time.Second)
	}
	for range 20 { // a flood within one second: one line
		f.post(t, routeMessageReceived, msg(`{"type":"flood","id":"m2","connectionId":"c1"}`))
	}
	if n := strings.Count(f.logs.String(), "type=flood"); n != 1 {
		t.Errorf("%d lines for 20 ignored webhooks within a second, want 1", n)
	}
	if e := rec.take(); len(e) != 0 {
		t.Errorf("events %#v", e)
	}
}

// TestWebhookNotRunning: a webhook that arrives before Run waits for it and is delivered (the VS
// Agent never retries); one whose request ends first, and any after Run returns, is answered
// 503 and makes no event.
func TestWebhookNotRunning(t *testing.T) {
	f := newFixture(t, Config{})
	ready := `{"type":"connection-state-updated","connectionId":"c1","state":"completed"}`
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if code, err := postWebhook(gone, f.bot.URL, routeConnectionState, []byte(ready)); err == nil && code != http.StatusServiceUnavailable {
		t.Errorf("before Run, request ended: %d", code)
	}
	early := make(chan int, 1)
	go func() {
		code, _ := postWebhook(t.Context(), f.bot.URL, routeConnectionState, []byte(ready))
		early <- code
	}()
	rec := &recorder{}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.ch.Run(ctx, rec) }()
	<-f.ch.running
	if code := <-early; code != http.StatusOK {
		t.Errorf("before Run, then Run: %d", code)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code := f.post(t, routeConnectionState, ready); code != http.StatusServiceUnavailable {
		t.Errorf("after Run: %d", code)
	}
	if e := rec.take(); !reflect.DeepEqual(e, []channel.Event{channel.ConnectionReady{Conn: "c1"}}) {
		t.Errorf("events %#v", e)
	}
	if err := f.ch.Run(t.Context(), rec); err == nil {
		t.Error("second Run accepted")
	}
}

func TestRunArguments(t *testing.T) {
	f := newFixture(t, Config{})
	if err := f.ch.Run(t.Context(), nil); err == nil {
		t.Error("Run without a handler accepted")
	}
}

// serialChecker fails when the handler is entered twice at once for one connection, or when
// a connection's events arrive out of order.
type serialChecker struct {
	t      *testing.T
	mu     sync.Mutex
	inside map[string]*atomic.Int32
	next   map[string]int
	total  atomic.Int32
}

func (s *serialChecker) HandleEvent(_ context.Context, _ string, e channel.Event) error {
	if _, ok := e.(channel.ConnectionReady); ok {
		return nil
	}
	s.mu.Lock()
	n := s.inside[e.Connection()]
	s.mu.Unlock()
	if n.Add(1) != 1 {
		s.t.Errorf("handler entered twice at once for %s", e.Connection())
	}
	s.mu.Lock()
	want := fmt.Sprintf("#%d", s.next[e.Connection()])
	if got := e.(channel.TextReceived).Content; got != want {
		s.t.Errorf("%s: got %s, want %s", e.Connection(), got, want)
	}
	s.next[e.Connection()]++
	s.mu.Unlock()
	s.total.Add(1)
	n.Add(-1)
	return nil
}

// TestWebhookOrderPerConnection: many connections post at once, each sequentially (as the VS
// Agent posts one connection's webhooks); each connection's events arrive in order and one at
// a time, and the per-connection locks are released.
func TestWebhookOrderPerConnection(t *testing.T) {
	f := newFixture(t, Config{})
	const conns, per = 8, 25
	s := &serialChecker{t: t, inside: map[string]*atomic.Int32{}, next: map[string]int{}}
	for i := range conns {
		s.inside[fmt.Sprint("c", i)] = &atomic.Int32{}
	}
	f.runWith(t, s)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			for j := range per {
				body := msg(fmt.Sprintf(`{"type":"text","connectionId":"c%d","content":"#%d"}`, i, j))
				code, err := postWebhook(context.Background(), f.bot.URL, routeMessageReceived, []byte(body))
				if err != nil || code != http.StatusOK {
					t.Errorf("post: %d %v", code, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := s.total.Load(); n != conns*per {
		t.Errorf("%d events, want %d", n, conns*per)
	}
	f.ch.locks.mu.Lock()
	defer f.ch.locks.mu.Unlock()
	if len(f.ch.locks.m) != 0 {
		t.Errorf("%d connection locks left", len(f.ch.locks.m))
	}
}

// TestConnLocksSerialise: two deliveries for one connection never overlap, whatever their
// arrival; different connections do not wait for each other.
func TestConnLocksSerialise(t *testing.T) {
	var l connLocks
	l.m = map[string]*connLock{}
	unlockA := l.lock("a")
	unlockB := l.lock("b") // another connection: does not wait for a
	entered := make(chan struct{})
	go func() {
		unlock := l.lock("a")
		close(entered)
		unlock()
	}()
	select {
	case <-entered:
		t.Fatal("second delivery for a entered while the first held the lock")
	default:
	}
	unlockA()
	<-entered
	unlockB()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) != 0 {
		t.Errorf("locks left: %v", l.m)
	}
}

// TestNoContentInLogs: with debug logging on, neither inbound nor outbound contents reach the
// logs, and bad input is logged with its reason only.
func TestNoContentInLogs(t *testing.T) {
	const secret = "hunter2-s3cret"
	f := newFixture(t, Config{Now: steppingClock()})
	ev := f.run(t)
	w, err := f.agent.connect(t.Context(), f.ch, f.bot.URL, map[string]string{"name": secret})
	if err != nil {
		t.Fatal(err)
	}
	channeltest.Expect[channel.ConnectionReady](t.Context(), t, ev, w.conn)
	if err := w.SendText(t.Context(), "my token is "+secret, ""); err != nil {
		t.Fatal(err)
	}
	channeltest.Expect[channel.TextReceived](t.Context(), t, ev, w.conn)
	if _, err := f.ch.SendText(t.Context(), w.conn, channel.Text{Content: "you said " + secret}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ch.AskQuestion(t.Context(), w.conn, channel.Question{Text: secret, Options: []string{secret}}); err != nil {
		t.Fatal(err)
	}
	if code := f.post(t, routeMessageReceived, msg(`{"type":"text","content":"`+secret+`"}`)); code != http.StatusBadRequest {
		t.Errorf("status %d", code)
	}
	if code := f.post(t, routeMessageReceived, `{"message":{"type":"text","connectionId":"c1","content":"`+secret+`"`); code != http.StatusBadRequest {
		t.Errorf("status %d", code)
	}
	logs := f.logs.String()
	if strings.Contains(logs, "hunter2") {
		t.Errorf("content in logs:\n%s", logs)
	}
	for _, want := range []string{"level=DEBUG msg=webhook", "type=text", "bytes=", "no connectionId", "malformed JSON"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

// TestHandlerMaySend: a handler that sends synchronously (an echo) works.
func TestHandlerMaySend(t *testing.T) {
	f := newFixture(t, Config{})
	f.wallet("c1")
	echo := channel.HandlerFunc(func(ctx context.Context, _ string, e channel.Event) error {
		if in, ok := e.(channel.TextReceived); ok {
			if _, err := f.ch.SendText(ctx, in.Conn, channel.Text{Content: in.Content, ReplyTo: in.MessageID}); err != nil {
				t.Errorf("echo: %v", err)
			}
		}
		return nil
	})
	f.runWith(t, echo)
	if code := f.post(t, routeMessageReceived, msg(`{"type":"text","id":"m1","connectionId":"c1","content":"ping"}`)); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if f.agent.count() != 1 {
		t.Fatalf("%d messages sent", f.agent.count())
	}
}

// BenchmarkWebhook measures one text webhook, from request to handler, without the network.
func BenchmarkWebhook(b *testing.B) {
	ch, err := New(Config{AdminURL: "http://bot.invalid"})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	ch.Mount(mux)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ch.Run(ctx, channel.HandlerFunc(func(context.Context, string, channel.Event) error { return nil }))
	}()
	<-ch.running
	body := msg(`{"type":"text","id":"6d1f7d0c-8b1e-4f4e-9f59-2b1b8c1d2e3f","connectionId":"0b9d3a9e-1c2f-4f7e-8a6b-5c4d3e2f1a0b","timestamp":"2026-03-01T10:20:30.123Z","content":"Hello, can you tell me something about your services?"}`)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/message-received", strings.NewReader(body)))
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// TestConnectionExists: without a webhook secret the VS Agent's admin API says whether a
// connection exists (its record, completed; 404 for one it does not hold; another answer is an
// error); with a secret the sender is the VS Agent, and nothing is asked.
func TestConnectionExists(t *testing.T) {
	f := newFixture(t, Config{})
	f.run(t)
	w, err := f.agent.connect(t.Context(), f.ch, f.bot.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for conn, want := range map[string]bool{w.conn: true, newUUID(): false} {
		if got, err := f.ch.ConnectionExists(t.Context(), conn); err != nil || got != want {
			t.Errorf("ConnectionExists(%s) = %v, %v; want %v", conn, got, err, want)
		}
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	t.Cleanup(down.Close)
	g := newFixture(t, Config{AdminURL: down.URL})
	g.run(t)
	if got, err := g.ch.ConnectionExists(t.Context(), w.conn); err == nil || got {
		t.Errorf("ConnectionExists through a 502: %v, %v; want an error", got, err)
	}

	s := newFixture(t, Config{WebhookSecret: strings.Repeat("s", MinSecretLen)})
	s.run(t)
	if got, err := s.ch.ConnectionExists(t.Context(), newUUID()); err != nil || !got {
		t.Errorf("ConnectionExists with a webhook secret = %v, %v; want true", got, err)
	}
	if n := s.agent.Lookups(); n != 0 {
		t.Errorf("with a webhook secret the admin API was asked %d times", n)
	}
}

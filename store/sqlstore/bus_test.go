package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/storetest"
)

// patience bounds every wait for a notification: a deadline for a condition, never a sleep.
const patience = 10 * time.Second

func TestBusOnlyOnPostgres(t *testing.T) {
	db := open(t, sqliteDatabase(t))
	if _, ok := db.Bus(); ok {
		t.Fatal("SQLite store has a bus")
	}
	if _, ok := any(db).(store.Bus); ok {
		t.Fatal("*DB satisfies store.Bus")
	}
}

// listener runs Bus.Listen for holder on db until the test ends, and hands out what it hears.
type listener struct {
	got  chan store.Notification
	done chan error
}

func listen(t *testing.T, db *DB, holder string) *listener {
	t.Helper()
	bus, ok := db.Bus()
	if !ok {
		t.Fatal("no bus")
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{got: make(chan store.Notification, 100), done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() { l.done <- bus.Listen(ctx, holder, ready, func(n store.Notification) { l.got <- n }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-l.done; err != nil {
			t.Errorf("listener of %s: %v", holder, err)
		}
	})
	select {
	case <-ready:
	case err := <-l.done:
		t.Fatalf("listener of %s: %v", holder, err)
	case <-time.After(patience):
		t.Fatalf("listener of %s not ready", holder)
	}
	return l
}

func (l *listener) next(t *testing.T, what string) store.Notification {
	t.Helper()
	select {
	case n := <-l.got:
		return n
	case <-time.After(patience):
		t.Fatalf("%s: no notification", what)
		return store.Notification{}
	}
}

// TestBusWakeAndPublish: an accept on one replica wakes the live holder listening on another,
// after its commit; a publish reaches its holder only, a broadcast every listener.
func TestBusWakeAndPublish(t *testing.T) {
	opener := postgresDatabase(t)
	a, b := open(t, opener), open(t, opener)
	h1, h2 := listen(t, a, "replica-1"), listen(t, a, "replica-2")
	ctx := t.Context()
	now := time.Now()

	taken, err := b.AcceptEvent(ctx, store.Accept{Event: store.InboxEvent{ConnectionID: "c1", Key: "k1"}, Holder: "replica-1", TTL: time.Minute, Now: now})
	if err != nil || !taken.Taken {
		t.Fatalf("accept: %+v, %v", taken, err)
	}
	second, err := b.AcceptEvent(ctx, store.Accept{Event: store.InboxEvent{ConnectionID: "c1", Key: "k2"}, Holder: "replica-2", TTL: time.Minute, Now: now})
	if err != nil || second.Taken {
		t.Fatalf("second accept: %+v, %v", second, err)
	}
	n := h1.next(t, "wake of replica-1")
	wantNotification(t, n, store.Notification{To: "replica-1", Topic: store.TopicWake, Payload: "c1"})
	// Delivered after the commit: the event is there for the woken holder.
	es, err := a.PendingEvents(ctx, "c1", taken.ID, 0)
	if err != nil || len(es) != 1 || es[0].ID != second.ID {
		t.Fatalf("pending when woken: %+v, %v", es, err)
	}

	// A duplicate and an accept without a holder wake nobody; a broadcast reaches everyone, in
	// order after anything sent before it.
	if _, err := b.AcceptEvent(ctx, store.Accept{Event: store.InboxEvent{ConnectionID: "c1", Key: "k2"}, Holder: "replica-2", TTL: time.Minute, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcceptEvent(ctx, store.Accept{Event: store.InboxEvent{ConnectionID: "c1", Key: "k3"}, Now: now}); err != nil {
		t.Fatal(err)
	}
	busB, _ := b.Bus()
	if err := busB.Publish(ctx, store.Notification{To: "replica-2", Topic: "ping", Payload: "only for 2"}); err != nil {
		t.Fatal(err)
	}
	marker := store.Notification{Topic: store.TopicInvalidate, Payload: `["ana@acme.corp"]`}
	if err := busB.Publish(ctx, marker); err != nil {
		t.Fatal(err)
	}
	wantNotification(t, h1.next(t, "broadcast at replica-1"), marker)
	wantNotification(t, h2.next(t, "ping of replica-2"), store.Notification{To: "replica-2", Topic: "ping", Payload: "only for 2"})
	wantNotification(t, h2.next(t, "broadcast at replica-2"), marker)

	for _, bad := range []store.Notification{{Topic: "a:b"}, {Topic: ""}, {Topic: "big", Payload: string(make([]byte, 7001))}} {
		if err := busB.Publish(ctx, bad); err == nil {
			t.Errorf("publish of %q accepted", bad.Topic)
		}
	}
}

func wantNotification(t *testing.T, got, want store.Notification) {
	t.Helper()
	if got != want {
		t.Fatalf("notification %+v, want %+v", got, want)
	}
}

// TestBusListenerConnectionLost: a listener whose backend is terminated (57P01) returns an
// error wrapping ErrUnavailable, so that its caller listens again.
func TestBusListenerConnectionLost(t *testing.T) {
	app := "packbot_bus_" + randomHex(6)
	dsn := withParam(t, storetest.PostgresDSN(t), "application_name", app)
	db, err := OpenPostgres(t.Context(), dsn, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	bus, _ := db.Bus()
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- bus.Listen(context.Background(), "h1", ready, func(store.Notification) {}) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	admin, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	var killed int
	err = admin.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`, app).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminated %d listeners: %v", killed, err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("listener ended with %v, want %v", err, store.ErrUnavailable)
		}
	case <-time.After(patience):
		t.Fatal("listener did not notice its connection was terminated")
	}
}

// TestUnavailableWhenServerGone: a store whose database disappears mid-run (a proxy in front of
// PostgreSQL is shut, its connections cut) answers ErrUnavailable, on pgx batches and on
// database/sql alike.
func TestUnavailableWhenServerGone(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	p := newProxy(t, dsn)
	db, err := OpenPostgres(t.Context(), p.dsn, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := t.Context()
	accept := func() error {
		_, err := db.AcceptEvent(ctx, store.Accept{Event: store.InboxEvent{ConnectionID: "c1"}, Holder: "h1", TTL: time.Minute})
		return err
	}
	if err := accept(); err != nil {
		t.Fatal(err)
	}
	p.stop()
	if err := accept(); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("accept with the server gone: %v, want %v", err, store.ErrUnavailable)
	}
	if _, err := db.GetSession(ctx, "c1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("get session with the server gone: %v, want %v", err, store.ErrUnavailable)
	}
}

// proxy forwards TCP connections to the PostgreSQL server of a DSN until stopped.
type proxy struct {
	dsn     string
	ln      net.Listener
	mu      sync.Mutex
	open    []net.Conn
	stopped bool
	wg      sync.WaitGroup
}

func newProxy(t *testing.T, dsn string) *proxy {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.Host = ln.Addr().String()
	p := &proxy{dsn: u.String(), ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			if p.stopped {
				_, _ = c.Close(), s.Close()
			}
			p.open = append(p.open, c, s)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, s); _ = c.Close() })
		}
	})
	t.Cleanup(p.stop)
	return p
}

// stop closes the listener and every forwarded connection, and waits for the copiers.
func (p *proxy) stop() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.stopped = true
	for _, c := range p.open {
		_ = c.Close()
	}
	p.open = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func withParam(t *testing.T, dsn, key, value string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

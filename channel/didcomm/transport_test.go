package didcomm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
)

// recorder keeps the bodies posted to the bot's DIDComm endpoint.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
	next   http.Handler
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, body)
	r.mu.Unlock()
	req.Body = io.NopCloser(bytes.NewReader(body))
	r.next.ServeHTTP(w, req)
}

func (r *recorder) last() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[len(r.bodies)-1]
}

// logBuffer collects log lines to check what was logged.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestInboundRefusals: bad input at the DIDComm endpoint is answered with a 4xx and a logged
// reason, reaches no protocol code, and the channel keeps working.
func TestInboundRefusals(t *testing.T) {
	ctx := testContext(t)
	st := testStores(t)["SQLite"](t)
	logs := &logBuffer{}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	const limit = 64 << 10
	ch, err := Open(ctx, Config{Records: st, PublicURL: srv.URL, Label: "bot", MasterKey: randomKey(t), MaxBodyBytes: limit,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	inner := http.NewServeMux()
	ch.Mount(inner)
	rec := &recorder{next: inner}
	mux.Handle("/", rec)
	bot := &botServer{ch: ch, srv: srv}
	ev := running(t, bot)

	tw, err := newTestWallet(t, ctx, ch, st, map[string]string{"name": "Ana"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	channeltest.Expect[channel.ConnectionReady](ctx, t, ev, tw.Conn())
	if err := tw.SendText(ctx, "a valid message", ""); err != nil {
		t.Fatal(err)
	}
	channeltest.Expect[channel.TextReceived](ctx, t, ev, tw.Conn())
	valid := rec.last()

	tampered := func(field string) []byte {
		var env map[string]string
		if err := json.Unmarshal(valid, &env); err != nil {
			t.Fatal(err)
		}
		b := []byte(env[field])
		b[len(b)/2] ^= 0x01
		if b[len(b)/2] == '=' || b[len(b)/2] == '-' {
			b[len(b)/2] = 'A'
		}
		env[field] = string(b)
		out, _ := json.Marshal(env)
		return out
	}
	post := func(method, ctype string, body []byte) int {
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+EndpointPath, bytes.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	const envType = "application/didcomm-envelope-enc"
	tests := []struct {
		name   string
		method string
		ctype  string
		body   []byte
		status int
		logged string
	}{
		{"GET", http.MethodGet, "", nil, http.StatusMethodNotAllowed, ""},
		{"wrong content type", http.MethodPost, "text/plain", valid, http.StatusUnsupportedMediaType, "content type"},
		{"empty body", http.MethodPost, envType, nil, http.StatusBadRequest, ""},
		{"not JSON", http.MethodPost, envType, []byte("hello"), http.StatusBadRequest, "not a JSON envelope"},
		{"a lone quote (panicked afgo)", http.MethodPost, envType, []byte(`"`), http.StatusBadRequest, "not a JSON envelope"},
		{"empty object", http.MethodPost, envType, []byte("{}"), http.StatusBadRequest, "reason=unpack"},
		{"garbage header", http.MethodPost, envType, []byte(`{"protected":"!!!","iv":"a","ciphertext":"b","tag":"c"}`), http.StatusBadRequest, "reason=unpack"},
		{"tampered ciphertext", http.MethodPost, envType, tampered("ciphertext"), http.StatusBadRequest, "reason=unpack"},
		{"tampered tag", http.MethodPost, envType, tampered("tag"), http.StatusBadRequest, "reason=unpack"},
		{"tampered protected header", http.MethodPost, envType, tampered("protected"), http.StatusBadRequest, "reason=unpack"},
		{"over the limit", http.MethodPost, envType, bytes.Repeat([]byte("x"), limit+1), http.StatusRequestEntityTooLarge, "reason=\"too large\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := post(tt.method, tt.ctype, tt.body); got != tt.status {
				t.Fatalf("status %d, want %d", got, tt.status)
			}
			if tt.logged != "" && !strings.Contains(logs.String(), tt.logged) {
				t.Fatalf("log lacks %q:\n%s", tt.logged, logs.String())
			}
		})
	}
	t.Run("a replayed valid envelope is refused by the messaging layer or delivered once more, never a crash", func(t *testing.T) {
		if got := post(http.MethodPost, envType, valid); got != http.StatusAccepted && got != http.StatusBadRequest {
			t.Fatalf("status %d", got)
		}
	})
	t.Run("unknown message type", func(t *testing.T) {
		err := tw.w.a.send(t.Context(), tw.conn, header{Type: "https://example.org/unknown/1.0/thing", ID: uuid.NewString()})
		if err == nil || !strings.Contains(err.Error(), "400") {
			t.Fatalf("send of an unknown type: %v", err)
		}
		if !strings.Contains(logs.String(), "no message handlers found") {
			t.Fatalf("the refusal is not logged:\n%s", logs.String())
		}
	})
	t.Run("malformed known message", func(t *testing.T) {
		if err := tw.w.a.send(t.Context(), tw.conn, map[string]any{"@type": typePerform, "@id": uuid.NewString(), "name": 42}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "reason=malformed") {
			t.Fatalf("not logged:\n%s", logs.String())
		}
	})
	// After all that, the channel still works.
	if err := tw.SendText(ctx, "still fine", ""); err != nil {
		t.Fatal(err)
	}
	for {
		e, err := ev.Next(ctx, tw.Conn())
		if err != nil {
			t.Fatal(err)
		}
		if in, ok := e.(channel.TextReceived); ok && in.Content == "still fine" {
			break
		}
	}
	if strings.Contains(logs.String(), "a valid message") || strings.Contains(logs.String(), "still fine") {
		t.Fatal("message content was logged")
	}
}

// FuzzInbound posts arbitrary bytes to the DIDComm endpoint: never a panic, always a 4xx
// (random bytes cannot be an envelope encrypted for this agent).
func FuzzInbound(f *testing.F) {
	f.Add([]byte(`{"protected":"eyJ0eXAiOiJKV00vMS4wIn0","iv":"AAAA","ciphertext":"AAAA","tag":"AAAA"}`))
	f.Add([]byte(`"ZXlKMGVYQWlPaUpLVjAwdk1TNHdJbjA"`))
	f.Add([]byte(`{"protected":"eyJlbmMiOiJ4Y2hhY2hhMjBwb2x5MTMwNV9pZXRmIiwidHlwIjoiSldNLzEuMCIsImFsZyI6IkF1dGhjcnlwdCIsInJlY2lwaWVudHMiOlt7ImVuY3J5cHRlZF9rZXkiOiJBIiwiaGVhZGVyIjp7ImtpZCI6IjExMSIsInNlbmRlciI6IkEiLCJpdiI6IkEifX1dfQ","iv":"A","ciphertext":"A","tag":"A"}`))
	f.Add([]byte("a.b.c"))
	ctx := context.Background()
	srv := httptest.NewServer(nil)
	defer srv.Close()
	records := openFuzzStore(f)
	ch, err := Open(ctx, Config{Records: records, PublicURL: srv.URL, MasterKey: make([]byte, 32)})
	if err != nil {
		f.Fatal(err)
	}
	defer func() { _ = ch.Close() }()
	mux := http.NewServeMux()
	ch.Mount(mux)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = ch.Run(runCtx, channel.HandlerFunc(func(context.Context, string, channel.Event) error { return nil }))
	}()
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, EndpointPath, bytes.NewReader(body))
		mux.ServeHTTP(w, req)
		if w.Code < 400 || w.Code >= 500 {
			t.Fatalf("status %d for %q", w.Code, body)
		}
	})
}

func openFuzzStore(f *testing.F) store.Records {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(f.TempDir(), "fuzz.db"), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.Close() })
	return st
}

package vsagent

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/logid"
)

// testClock is a clock a test moves on; with a step, every reading moves it on by that much
// first (two seconds: every rejection is then past the log's rate limit).
type testClock struct {
	step time.Duration
	off  atomic.Int64 // nanoseconds after the epoch of the test
}

func (c *testClock) now() time.Time {
	return time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(c.off.Add(int64(c.step))))
}

func (c *testClock) add(d time.Duration) { c.off.Add(int64(d)) }

func steppingClock() func() time.Time { return (&testClock{step: 2 * time.Second}).now }

const hookSecret = "Zq8-Tw3_kP0.vN5~xR7mL2"

// send posts body to rawURL with the headers given (key, value pairs) and returns the status and
// the answer.
func send(t *testing.T, method, rawURL, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, rawURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// withUser is u with basic-authentication user info, as a VS Agent's EVENTS_BASE_URL may have it.
func withUser(t *testing.T, u, user, password string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p.User = url.UserPassword(user, password)
	return p.String()
}

// TestWebhookSecret: with a secret, a webhook without it — a forged proof submission that says
// "verified": true included — is answered 401 and reaches no handler, whatever its method or
// body; the secret as the path segment after /hooks/, as a bearer token or as the basic password
// lets it through; the secret never reaches the logs.
func TestWebhookSecret(t *testing.T) {
	f := newFixture(t, Config{WebhookSecret: hookSecret, Now: steppingClock()})
	rec := &recorder{}
	f.runWith(t, rec)
	forged := msg(`{"type":"identity-proof-submit","id":"m1","connectionId":"c1","threadId":"t1","submittedProofItems":[{"id":"p1","type":"verifiable-credential","verified":true,"claims":[{"name":"roles","value":"admin"}]}]}`)
	text := msg(`{"type":"text","id":"m2","connectionId":"c1","content":"hola"}`)
	wrong := "Zq8-Tw3_kP0.vN5~xR7mL3"
	rejected := 0 // answered 401 (a -run filter may leave subtests out)
	for _, c := range []struct {
		name, method, url, body string
		header                  []string
	}{
		{"forged proof, no secret", http.MethodPost, f.bot.URL + "/message-received", forged, nil},
		{"forged proof, wrong path secret", http.MethodPost, f.bot.URL + "/hooks/" + wrong + "/message-received", forged, nil},
		{"forged proof, wrong bearer", http.MethodPost, f.bot.URL + "/message-received", forged, []string{"Authorization", "Bearer " + wrong}},
		{"forged proof, wrong basic password", http.MethodPost, withUser(t, f.bot.URL, "vs", wrong) + "/message-received", forged, nil},
		{"secret as user name", http.MethodPost, withUser(t, f.bot.URL, hookSecret, "x") + "/message-received", forged, nil},
		{"secret in another scheme", http.MethodPost, f.bot.URL + "/message-received", forged, []string{"Authorization", "Token " + hookSecret}},
		{"connection state", http.MethodPost, f.bot.URL + "/connection-state-updated", `{"connectionId":"c1","state":"completed"}`, nil},
		{"message state", http.MethodPost, f.bot.URL + "/message-state-updated", `{"connectionId":"c1","messageId":"o1","state":"viewed"}`, nil},
		{"bad body", http.MethodPost, f.bot.URL + "/message-received", `[]`, nil},
		{"other method", http.MethodGet, f.bot.URL + "/message-received", ``, nil},
		{"empty path secret", http.MethodPost, f.bot.URL + "/hooks//message-received", text, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := send(t, c.method, c.url, c.body, c.header...)
			if code != http.StatusUnauthorized && !(c.name == "empty path secret" && code == http.StatusNotFound) {
				t.Errorf("answered %d %q, want 401", code, body)
			}
			if code == http.StatusUnauthorized {
				rejected++
				if body != "unauthorized\n" {
					t.Errorf("answer %q", body)
				}
			}
		})
	}
	if e := rec.take(); len(e) != 0 {
		t.Fatalf("unauthenticated webhooks made events %#v", e)
	}

	for _, c := range []struct {
		name, url string
		header    []string
	}{
		{"path segment", f.bot.URL + "/hooks/" + hookSecret + "/message-received", nil},
		{"bearer", f.bot.URL + "/message-received", []string{"Authorization", "Bearer " + hookSecret}},
		{"basic password", withUser(t, f.bot.URL, "vs-agent", hookSecret) + "/message-received", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if code, body := send(t, http.MethodPost, c.url, text, c.header...); code != http.StatusOK {
				t.Fatalf("answered %d %q", code, body)
			}
			e := rec.take()
			if len(e) != 1 {
				t.Fatalf("events %#v", e)
			}
			if in, ok := e[0].(channel.TextReceived); !ok || in.Content != "hola" {
				t.Fatalf("event %#v", e[0])
			}
		})
	}
	code, body := send(t, http.MethodPost, f.bot.URL+"/hooks/"+hookSecret+"/connection-state-updated", `{"connectionId":"c1","state":"completed"}`)
	if code != http.StatusOK {
		t.Fatalf("connection state with the secret: %d %q", code, body)
	}
	if e := rec.take(); len(e) != 1 {
		t.Fatalf("events %#v", e)
	}
	logs := f.logs.String()
	if strings.Contains(logs, hookSecret) || strings.Contains(logs, wrong) || strings.Contains(logs, "/hooks/") {
		t.Errorf("a secret or a path reached the logs:\n%s", logs)
	}
	if rejected > 0 && !strings.Contains(logs, "reason=unauthorized") {
		t.Errorf("rejections not logged:\n%s", logs)
	}
}

// TestWebhookWithoutSecret: without a secret, the /hooks/ form does not exist and the plain
// routes take webhooks as before.
func TestWebhookWithoutSecret(t *testing.T) {
	f := newFixture(t, Config{})
	rec := &recorder{}
	f.runWith(t, rec)
	text := msg(`{"type":"text","id":"m2","connectionId":"c1","content":"hola"}`)
	if code, _ := send(t, http.MethodPost, f.bot.URL+"/hooks/"+hookSecret+"/message-received", text); code != http.StatusNotFound {
		t.Errorf("/hooks/ form without a secret: %d", code)
	}
	if code, _ := send(t, http.MethodPost, f.bot.URL+"/message-received", text); code != http.StatusOK {
		t.Errorf("plain route: %d", code)
	}
	if e := rec.take(); len(e) != 1 {
		t.Fatalf("events %#v", e)
	}
}

func TestNewRefusesWeakSecret(t *testing.T) {
	for _, s := range []string{"short", "fifteen-chars-x", "has space in it here", "slash/in/the/secret/x", "colon:in:the:secret:x", "ñandú-ñandú-ñandú-ñ"} {
		if _, err := New(Config{AdminURL: "http://vs.invalid", WebhookSecret: s}); err == nil {
			t.Errorf("secret %q accepted", s)
		}
	}
	if _, err := New(Config{AdminURL: "http://vs.invalid", WebhookSecret: hookSecret}); err != nil {
		t.Errorf("good secret refused: %v", err)
	}
}

// TestRejectLogRateLimited: a flood of rejected webhooks writes at most one line per route and
// second; the next line says how many were suppressed.
func TestRejectLogRateLimited(t *testing.T) {
	clk := &testClock{}
	f := newFixture(t, Config{Now: clk.now})
	f.runWith(t, &recorder{})
	rejected := func(route string, n int) {
		t.Helper()
		for range n {
			if code := f.post(t, route, `[1,2]`); code != http.StatusBadRequest {
				t.Fatalf("status %d", code)
			}
		}
	}
	lines := func() []string {
		var out []string
		for l := range strings.Lines(f.logs.String()) {
			if strings.Contains(l, "webhook rejected") {
				out = append(out, l)
			}
		}
		return out
	}
	rejected(routeMessageReceived, 50)
	rejected(routeConnectionState, 5)
	if l := lines(); len(l) != 2 {
		t.Fatalf("%d lines, want one per route:\n%s", len(l), strings.Join(l, ""))
	}
	clk.add(999 * time.Millisecond)
	rejected(routeMessageReceived, 3)
	if l := lines(); len(l) != 2 {
		t.Fatalf("%d lines within the second:\n%s", len(l), strings.Join(l, ""))
	}
	clk.add(time.Millisecond)
	rejected(routeMessageReceived, 1)
	l := lines()
	if len(l) != 3 || !strings.Contains(l[2], "suppressed=52") || !strings.Contains(l[2], "route=message-received") {
		t.Fatalf("after a second:\n%s", strings.Join(l, ""))
	}
	if strings.Contains(l[0], "suppressed") {
		t.Errorf("first line counts suppressed ones: %s", l[0])
	}
	if strings.Contains(f.logs.String(), "struct") {
		t.Errorf("Go internals in the logs:\n%s", f.logs.String())
	}
}

// TestBadBodyAnswerFixed: whatever is wrong with a body, the answer is the same short message:
// no Go type, no field, no byte offset.
func TestBadBodyAnswerFixed(t *testing.T) {
	f := newFixture(t, Config{})
	f.runWith(t, &recorder{})
	for _, body := range []string{`[]`, `[{"type":"text"}]`, `{"message":[]}`, `"x"`, `{`, `{"message":{"type":"text","connectionId":42}}`} {
		for _, route := range fuzzRoutes {
			code, answer := send(t, http.MethodPost, f.bot.URL+"/"+route, body)
			if code != http.StatusBadRequest || answer != badBody+"\n" {
				t.Errorf("%s %s: %d %q", route, body, code, answer)
			}
		}
	}
}

// TestConnHashedAtInfo: a line at INFO or above names a connection by its short hash; DEBUG may
// name it.
func TestConnHashedAtInfo(t *testing.T) {
	const conn = "7c0a5f2e-wallet-conn-id"
	f := newFixture(t, Config{})
	f.runWith(t, &recorder{})
	if code := f.post(t, routeMessageReceived, msg(`{"type":"media","id":"m1","connectionId":"`+conn+`"}`)); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if code := f.post(t, routeMessageReceived, msg(`{"type":"text","id":"m2","connectionId":"`+conn+`","content":"x"}`)); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	infoSeen := false
	for l := range strings.Lines(f.logs.String()) {
		if strings.Contains(l, "level=DEBUG") {
			continue
		}
		if strings.Contains(l, conn) {
			t.Errorf("connection id at INFO or above: %s", l)
		}
		if strings.Contains(l, "conn="+logid.Conn(conn)) {
			infoSeen = true
		}
	}
	if !infoSeen {
		t.Errorf("no INFO line names the connection by its hash:\n%s", f.logs.String())
	}
}

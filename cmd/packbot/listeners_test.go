package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/packbot/packbot/channel/vsagent/vsagenttest"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/packs"
)

// hooksSecret is the PACKBOT_WEBHOOK_SECRET of these tests.
const hooksSecret = "q7-Rv2_Lk9.Tx4~Wm8Zp3"

// vsAdmin is the fake VS Agent (vsagenttest), as the listener tests read it.
type vsAdmin struct{ *vsagenttest.Agent }

func newVSAdmin(t *testing.T) *vsAdmin { return &vsAdmin{vsagenttest.New(t, nil)} }

// count is the number of messages packbot posted to conn.
func (v *vsAdmin) count(conn string) int { return v.Count(conn) }

// waitFor waits until ok holds, failing after a minute.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// request sends body to url, with "Authorization: Bearer <bearer>" unless bearer is empty; it
// returns the status and the answer.
func request(t *testing.T, method, url, body string, bearer ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err == nil && len(bearer) > 0 {
		req.Header.Set("Authorization", "Bearer "+bearer[0])
	}
	var resp *http.Response
	if err == nil {
		resp, err = http.DefaultClient.Do(req)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	answer, err := io.ReadAll(resp.Body)
	if err := errors.Join(err, resp.Body.Close()); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(answer)
}

// listenerAddr finds the address of listener name ("webhooks", "admin") in the "packbot serving"
// line.
func listenerAddr(t *testing.T, p *packbotProcess, name string) string {
	t.Helper()
	m := regexp.MustCompile(`packbot serving.* ` + name + `=http://([0-9.]+:[0-9]+)`).FindStringSubmatch(p.output())
	if m == nil {
		t.Fatalf("no %s listener in the logs:\n%s", name, p.output())
	}
	return m[1]
}

func hookState(conn string) string {
	return fmt.Sprintf(`{"type":"connection-state-updated","timestamp":"2026-03-01T10:00:00Z","connectionId":%q,"invitationId":"i1","state":"completed"}`, conn)
}

func hookMessage(conn, msg string) string {
	return fmt.Sprintf(`{"type":"message-received","timestamp":"2026-03-01T10:00:00Z","message":{"id":%q,"connectionId":%q,"timestamp":"2026-03-01T10:00:00Z",%s}}`,
		uuid.NewString(), conn, msg)
}

// TestServeListenersAndSecret: with PACKBOT_WEBHOOK_ADDR, PACKBOT_ADMIN_ADDR and a webhook
// secret, serve has three listeners, each with only its routes. On the webhooks listener, a
// webhook without the secret — a forged proof submission with "verified": true included — is
// answered 401 and changes nothing; with the secret (path segment, bearer or basic password) it
// is served, and so is a message of a connection never announced (its announcement was lost;
// the sender is the VS Agent). Neither the secret nor a connection id reaches the logs at INFO.
func TestServeListenersAndSecret(t *testing.T) {
	admin := newVSAdmin(t)
	p := startPackbot(t, t.TempDir(), []string{"PACKBOT_HTTP_ADDR=127.0.0.1:0", "PACKBOT_WEBHOOK_ADDR=127.0.0.1:0",
		"PACKBOT_ADMIN_ADDR=127.0.0.1:0", "PACKBOT_WEBHOOK_SECRET=" + hooksSecret, "VS_AGENT_ADMIN_URL=" + admin.URL}, "serve")
	public := p.waitServing(t)
	hooks, adm := listenerAddr(t, p, "webhooks"), listenerAddr(t, p, "admin")
	if public == hooks || public == adm || hooks == adm {
		t.Fatalf("listeners public %s, webhooks %s, admin %s: want three", public, hooks, adm)
	}

	// Each listener has only its routes.
	for _, c := range []struct {
		method, url string
		want        int
	}{
		{"GET", "http://" + adm + "/healthz", 200}, {"GET", "http://" + adm + "/readyz", 200}, {"GET", "http://" + adm + "/metrics", 200},
		{"GET", "http://" + public + "/healthz", 404}, {"GET", "http://" + public + "/metrics", 404}, {"GET", "http://" + hooks + "/metrics", 404},
		{"POST", "http://" + public + "/connection-state-updated", 404}, {"POST", "http://" + adm + "/connection-state-updated", 404},
		{"POST", "http://" + public + "/hooks/" + hooksSecret + "/connection-state-updated", 404},
	} {
		if code, _ := request(t, c.method, c.url, hookState("c0")); code != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.url, code, c.want)
		}
	}

	// Without the secret: 401, nothing created, nothing sent.
	const victim, stranger, user = "3e1d9b62-victim", "8a4f0c17-stranger", "5c2b7e40-user"
	base := "http://" + hooks
	forged := hookMessage(victim, `"type":"identity-proof-submit","threadId":"t1","submittedProofItems":[{"id":"p1","type":"verifiable-credential","verified":true,"claims":[{"name":"email","value":"root@acme.corp"},{"name":"roles","value":"admin"}]}]`)
	for _, c := range []struct {
		route, body string
		bearer      []string
	}{
		{"/connection-state-updated", hookState(victim), nil},
		{"/message-received", forged, nil},
		{"/message-received", forged, []string{"not-the-secret-at-all"}},
		{"/hooks/not-the-secret-at-all/message-received", forged, nil},
		{"/message-received", hookMessage(victim, `"type":"text","content":"/help"`), nil},
	} {
		if code, body := request(t, "POST", base+c.route, c.body, c.bearer...); code != 401 || body != "unauthorized\n" {
			t.Errorf("%s without the secret: %d %q", c.route, code, body)
		}
	}

	// With the secret, in each form: an announced connection is served.
	if code, _ := request(t, "POST", base+"/hooks/"+hooksSecret+"/connection-state-updated", hookState(user)); code != 200 {
		t.Fatalf("announcement with the secret: %d", code)
	}
	waitFor(t, "the greeting", func() bool { return admin.count(user) > 0 })
	before := admin.count(user)
	if code, _ := request(t, "POST", base+"/message-received", hookMessage(user, `"type":"text","content":"/help"`), hooksSecret); code != 200 {
		t.Fatalf("bearer: %d", code)
	}
	waitFor(t, "the answer to /help", func() bool { return admin.count(user) > before })
	hooksURL := "http://vs-agent:" + hooksSecret + "@" + hooks
	before = admin.count(user)
	if code, _ := request(t, "POST", hooksURL+"/message-received", hookMessage(user, `"type":"text","content":"/help"`)); code != 200 {
		t.Fatalf("basic password: %d", code)
	}
	waitFor(t, "the answer to the second /help", func() bool { return admin.count(user) > before })

	// With the secret, a connection never announced (its announcement was lost: the VS Agent
	// does not retry): the sender is the VS Agent, so its first event stands for the
	// announcement, and it is answered.
	if code, _ := request(t, "POST", base+"/hooks/"+hooksSecret+"/message-received", hookMessage(stranger, `"type":"text","content":"/help"`)); code != 200 {
		t.Fatalf("unannounced: %d", code)
	}
	waitFor(t, "the answer to the connection announced late", func() bool { return admin.count(stranger) > 0 })
	if _, body := request(t, "GET", "http://"+adm+"/metrics", ""); !strings.Contains(body, "packbot_events_unannounced_total 0") {
		t.Errorf("events dropped as unannounced with the secret:\n%s", body)
	}
	if n := admin.count(victim); n != 0 {
		t.Fatalf("sent %d messages to the victim", n)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-p.done; err != nil {
		t.Fatalf("exit: %v\n%s", err, p.output())
	}
	logs := p.output()
	if strings.Contains(logs, hooksSecret) || strings.Contains(logs, "not-the-secret") || strings.Contains(logs, "/hooks/") {
		t.Errorf("a secret or a webhook path in the logs:\n%s", logs)
	}
	for l := range strings.Lines(logs) {
		for _, conn := range []string{victim, stranger, user} {
			if strings.Contains(l, conn) && !strings.Contains(l, "level=DEBUG") {
				t.Errorf("connection id at INFO or above: %s", l)
			}
		}
	}
	for _, want := range []string{"reason=unauthorized", "connection=" + logid.Conn(stranger), "announced late"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "without a secret") {
		t.Errorf("warned of open webhooks with a secret on loopback:\n%s", logs)
	}
}

// TestServeRefusesOpenWebhooks: on the vsagent channel, serve refuses to start when the VS
// Agent's webhooks would listen beyond loopback without a secret (on a listener of their own,
// or on the public one they share), naming the listener's setting and each fix; a secret, or
// PACKBOT_WEBHOOK_ALLOW_UNAUTHENTICATED=true, lets it start (the latter with a warning); a
// value of that setting that is not a boolean stops serve.
func TestServeRefusesOpenWebhooks(t *testing.T) {
	serve := func(env map[string]string) (int, string) {
		t.Helper()
		env["VS_AGENT_ADMIN_URL"], env["PACKBOT_DATA_DIR"] = "http://vs-agent.invalid", t.TempDir()
		code, _, errOut := cli(t, env, "serve")
		return code, errOut
	}
	for _, c := range []struct {
		name  string
		env   map[string]string
		setBy string
	}{
		{"own listener", map[string]string{envHTTPAddr: "127.0.0.1:0", envWebhookAddr: "0.0.0.0:0"}, envWebhookAddr},
		{"public listener", map[string]string{envHTTPAddr: "0.0.0.0:0"}, "--http or " + envHTTPAddr},
		{"allowed: false", map[string]string{envHTTPAddr: "0.0.0.0:0", envWebhookOpen: "false"}, "--http or " + envHTTPAddr},
	} {
		code, errOut := serve(c.env)
		if code != 1 || !strings.Contains(errOut, "beyond loopback, without "+envWebhookSecret) {
			t.Errorf("%s: exit %d: %s", c.name, code, errOut)
		}
		for _, fix := range []string{"set " + envWebhookSecret, "EVENTS_BASE_URL=http://<packbot>/hooks/<secret>", "set " + c.setBy + " to a loopback address",
			"set " + envWebhookOpen + "=true"} {
			if !strings.Contains(errOut, fix) {
				t.Errorf("%s: the refusal does not say %q: %s", c.name, fix, errOut)
			}
		}
	}
	if code, errOut := serve(map[string]string{envHTTPAddr: "0.0.0.0:0", envWebhookOpen: "maybe"}); code != 1 ||
		!strings.Contains(errOut, envWebhookOpen+`="maybe": want true or false`) {
		t.Errorf("a setting that is not a boolean: exit %d: %s", code, errOut)
	}

	// Allowed: serve runs, and warns.
	admin := newVSAdmin(t)
	p := startPackbot(t, t.TempDir(), []string{"PACKBOT_HTTP_ADDR=127.0.0.1:0", "PACKBOT_WEBHOOK_ADDR=0.0.0.0:0",
		envWebhookOpen + "=true", "VS_AGENT_ADMIN_URL=" + admin.URL}, "serve")
	p.waitServing(t)
	p.waitLog(t, "VS Agent webhooks listen on a non-loopback address without a secret ("+envWebhookOpen+")")
	if !strings.Contains(p.output(), "fix=\"set PACKBOT_WEBHOOK_SECRET") {
		t.Fatalf("the warning gives no fix:\n%s", p.output())
	}
	// With a secret: no refusal, no warning.
	p = startPackbot(t, t.TempDir(), []string{"PACKBOT_HTTP_ADDR=127.0.0.1:0", "PACKBOT_WEBHOOK_ADDR=0.0.0.0:0",
		envWebhookSecret + "=" + hooksSecret, "VS_AGENT_ADMIN_URL=" + admin.URL}, "serve")
	p.waitServing(t)
	if strings.Contains(p.output(), "without a secret") {
		t.Errorf("warned of open webhooks with a secret:\n%s", p.output())
	}
}

// TestWarnOpenWebhooks: the warning is for a non-loopback address without a secret only.
func TestWarnOpenWebhooks(t *testing.T) {
	for _, c := range []struct {
		addr, secret string
		warn         bool
	}{
		{"127.0.0.1:0", "", false},
		{"0.0.0.0:0", "", true},
		{"0.0.0.0:0", hooksSecret, false},
	} {
		ln, err := net.Listen("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		warnOpenWebhooks(t.Context(), slog.New(slog.NewTextHandler(&buf, nil)), &endpoint{ln: ln}, c.secret)
		_ = ln.Close()
		if got := strings.Contains(buf.String(), "level=WARN"); got != c.warn {
			t.Errorf("%s, secret %v: warned %v:\n%s", c.addr, c.secret != "", got, buf.String())
		}
	}
}

// TestPlanEndpoints: unset addresses share the public listener; a webhook address is for the
// vsagent channel only.
func TestPlanEndpoints(t *testing.T) {
	for _, c := range []struct {
		name, kind string
		env        map[string]string
		want       []string // the listeners
		warn       bool
	}{
		{"default", "vsagent", nil, []string{"public"}, false},
		// Planned, not bound: addresses of their own on other loopback hosts, any port.
		{"all three", "vsagent", map[string]string{envWebhookAddr: "127.0.0.2:0", envAdminAddr: "127.0.0.3:0"}, []string{"public", "webhooks", "admin"}, false},
		{"admin only", "didcomm", map[string]string{envAdminAddr: "127.0.0.3:0"}, []string{"public", "admin"}, false},
		{"webhooks on didcomm", "didcomm", map[string]string{envWebhookAddr: "127.0.0.2:0"}, []string{"public"}, true},
		{"same address as public", "vsagent", map[string]string{envWebhookAddr: defaultHTTPAddr}, []string{"public"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			a := &app{env: packs.MapEnv(c.env), logger: slog.New(slog.NewTextHandler(&buf, nil))}
			eps, err := planEndpoints(t.Context(), a, "", c.kind)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range eps.all {
				got = append(got, e.name)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("listeners %v, want %v", got, c.want)
			}
			if eps.public.addr != defaultHTTPAddr {
				t.Errorf("public on %s", eps.public.addr)
			}
			if w := strings.Contains(buf.String(), "level=WARN"); w != c.warn {
				t.Errorf("warned %v:\n%s", w, buf.String())
			}
		})
	}
}

// TestServeBusyWebhookAndAdminPorts: a listener of its own that cannot listen stops serve with
// its variable; the parts started before it are stopped.
func TestServeBusyWebhookAndAdminPorts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	for _, env := range []string{envWebhookAddr, envAdminAddr} {
		code, _, errOut := cli(t, map[string]string{env: ln.Addr().String(), "VS_AGENT_ADMIN_URL": "http://vs-agent.invalid",
			"PACKBOT_DATA_DIR": t.TempDir()}, "serve", "--http", "127.0.0.1:0")
		if code != 1 || !strings.Contains(errOut, "listen on "+ln.Addr().String()+" (set "+env+")") {
			t.Errorf("%s busy: exit %d: %s", env, code, errOut)
		}
	}
}

// TestEndpointLimits: the public listener has the limits of publicHTTPLimits (a shorter header
// timeout, a cap per client: PACKBOT_PUBLIC_CONNS_PER_CLIENT, 0 for none), the others those of
// defaultHTTPLimits (the timeouts that close stalled and idle connections, the header size,
// the connection cap); a cap that is not a number stops serve.
func TestEndpointLimits(t *testing.T) {
	for _, c := range []struct {
		perClient string
		want      httpLimits
	}{
		{"", publicHTTPLimits(defaultConnsPerClient)},
		{"0", publicHTTPLimits(0)},
		{"7", publicHTTPLimits(7)},
	} {
		a := &app{env: packs.MapEnv(map[string]string{envConnsPerClient: c.perClient, envWebhookAddr: "127.0.0.1:0"}),
			logger: slog.New(slog.DiscardHandler)}
		eps, err := planEndpoints(t.Context(), a, "127.0.0.1:0", "vsagent")
		if err != nil {
			t.Fatal(err)
		}
		if eps.webhooks == eps.public {
			t.Fatal("no webhooks listener of its own")
		}
		for _, e := range []*endpoint{eps.public, eps.webhooks} {
			want := defaultHTTPLimits()
			if e == eps.public {
				want = c.want
			}
			if e.limits != want {
				t.Errorf("%s listener (cap per client %q): limits %+v, want %+v", e.name, c.perClient, e.limits, want)
			}
			checkEndpointLimits(t, e)
		}
	}
	if pub := publicHTTPLimits(1); pub.ReadHeader >= defaultHTTPLimits().ReadHeader || pub.MaxConnsPerClient != 1 {
		t.Errorf("public limits %+v: want a shorter header timeout than %v", pub, defaultHTTPLimits().ReadHeader)
	}
	a := &app{env: packs.MapEnv(map[string]string{envConnsPerClient: "lots"}), logger: slog.New(slog.DiscardHandler)}
	if _, err := planEndpoints(t.Context(), a, "", "didcomm"); err == nil || !strings.Contains(err.Error(), envConnsPerClient+`="lots"`) {
		t.Errorf("a cap that is not a number: %v", err)
	}
}

// checkEndpointLimits listens and builds the server of e, and checks that they have e's limits.
func checkEndpointLimits(t *testing.T, e *endpoint) {
	t.Helper()
	e.mux = http.NewServeMux()
	if err := e.listen(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.close(t.Context()) }()
	if err := e.newServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := e.limits
	if s := e.srv; s.ReadHeaderTimeout != l.ReadHeader || s.ReadTimeout != l.Read || s.WriteTimeout != l.Write || s.IdleTimeout != l.Idle ||
		s.MaxHeaderBytes != l.MaxHeaderBytes {
		t.Errorf("%s server limits %v %v %v %v %d, want %+v", e.name, s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes, l)
	}
	if ll, ok := e.ln.(*limitedListener); !ok || cap(ll.slots) != l.MaxConns || ll.perClient != l.MaxConnsPerClient {
		t.Errorf("%s listener %T without the cap of %d connections, %d per client", e.name, e.ln, l.MaxConns, l.MaxConnsPerClient)
	}
}

// TestPublicListenerFlood: one client holding 1,100 sockets that stall in their headers does
// not keep another client out of the public listener of a real serve: the other's request is
// answered at once (the bar is 1 s; the bound asserted is looser, for a loaded
// machine), and the flooding client's connections over its limit are closed.
func TestPublicListenerFlood(t *testing.T) {
	p := startPackbot(t, t.TempDir(), []string{"PACKBOT_HTTP_ADDR=127.0.0.1:0"}, "serve")
	addr := p.waitServing(t)
	const flood = 1100
	conns := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range flood {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("flood connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "GET /invitation HTTP/1.1\r\nHost: bot\r\n"); err != nil && !errors.Is(err, syscall.ECONNRESET) &&
			!errors.Is(err, syscall.EPIPE) {
			t.Fatalf("flood connection %d: %v", len(conns), err)
		}
	}
	// Another client (another loopback address) asks for the invitation.
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), "GET", "http://"+addr+"/invitation", nil)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	resp, err := client.Do(req)
	took := time.Since(began)
	if err != nil {
		t.Fatalf("probe during the flood: %v", err)
	}
	_ = resp.Body.Close()
	t.Logf("probe during a flood of %d header-stalled sockets: %d after %v", flood, resp.StatusCode, took.Round(time.Millisecond))
	if resp.StatusCode != http.StatusOK || took > 3*time.Second {
		t.Fatalf("probe during the flood: %d after %v, want 200 well within a second", resp.StatusCode, took)
	}
	// The flooder's connections over its limit were closed by the server (its first ones are
	// held until the header timeout).
	closedByServer(t, conns[flood-1], 10*time.Second)
	p.waitLog(t, "a client holds as many connections as it may")
}

package mcp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/store/sqlstore"
)

func openStore(t *testing.T) *sqlstore.DB {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "packbot.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newKeyring(t *testing.T) *secret.Keyring {
	t.Helper()
	k, err := secret.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secret.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// userServerDef is a user-controlled server whose users give a token.
func userServerDef(name, url string) packs.Server {
	d := httpServerDef(name, packs.TransportStreamableHTTP, url)
	d.AccessMode = packs.UserControlled
	d.UserConfig = &packs.UserConfig{Fields: []packs.UserField{
		{Name: "token", Type: packs.FieldSecret, Label: packs.Text{Plain: "Token"}, HeaderTemplate: "Bearer {value}"},
	}}
	return d
}

// tokens is the set of tokens a test server accepts, with a count of the requests it saw.
type tokens struct {
	mu       sync.Mutex
	accepted map[string]bool
	requests atomic.Int64
}

func newTokens(ts ...string) *tokens {
	t := &tokens{accepted: make(map[string]bool)}
	for _, s := range ts {
		t.accepted[s] = true
	}
	return t
}

func (t *tokens) check(tok string) bool {
	t.requests.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.accepted[tok]
}

func (t *tokens) set(tok string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.accepted[tok] = ok
}

func values(kv ...string) map[string]secret.Value {
	m := make(map[string]secret.Value)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = secret.NewValue(kv[i+1])
	}
	return m
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func status(t *testing.T, p *mcp.Pool, identity, server string) mcp.Status {
	t.Helper()
	s, err := p.Status(context.Background(), identity, server)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestUserCredentials(t *testing.T) {
	ctx := context.Background()
	toks := newTokens("tok-alice", "tok-bob")
	hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, toks.check)
	st := openStore(t)
	var rejected []string
	var rejectedMu sync.Mutex
	p := newPool(t, mcp.Config{
		Servers:     []packs.Server{userServerDef("bank", hs.url("/mcp"))},
		Credentials: st, Keyring: newKeyring(t),
		OnRejected: func(identity, server string) {
			rejectedMu.Lock()
			defer rejectedMu.Unlock()
			rejected = append(rejected, identity+"/"+server)
		},
	})
	run(t, p)
	whoami := func(identity string) (mcp.Result, error) {
		return p.Call(ctx, mcp.Call{Identity: identity, Server: "bank", Tool: "whoami"})
	}

	// Lazy discovery: nobody configured anything, so the server was never contacted.
	if cat, _ := p.Catalog(); len(cat.Server("bank")) != 0 || toks.requests.Load() != 0 {
		t.Fatalf("before any user: catalog %v, %d requests", names(cat), toks.requests.Load())
	}
	if s := status(t, p, "alice", "bank"); s != mcp.StatusNeedsAuthentication {
		t.Fatalf("alice before configuring: %s", s)
	}
	if _, err := whoami("alice"); !errors.Is(err, mcp.ErrNeedsAuthentication) {
		t.Fatalf("call before configuring: %v", err)
	}
	if toks.requests.Load() != 0 {
		t.Fatal("an unconfigured user's call reached the server")
	}

	// A wrong token is refused, and nothing is saved.
	if _, err := p.Configure(ctx, "alice", "bank", values("token", "wrong")); !errors.Is(err, mcp.ErrAuth) {
		t.Fatalf("configure with a wrong token: %v", err)
	}
	if s := status(t, p, "alice", "bank"); s != mcp.StatusNeedsAuthentication {
		t.Fatalf("after a refused configuration: %s", s)
	}
	if _, err := p.Configure(ctx, "alice", "bank", values("other", "x")); err == nil || !strings.Contains(err.Error(), `field "token" is missing`) {
		t.Fatalf("configure without the field: %v", err)
	}

	// The first good connection, a test that saves nothing, discovers the tools for everyone.
	tools, err := p.TestCredentials(ctx, "alice", "bank", values("token", "tok-alice"))
	if err != nil || len(tools) != 6 {
		t.Fatalf("test alice's token: %d tools, %v", len(tools), err)
	}
	waitCatalog(t, p, func(c mcp.Catalog) bool { return len(c.Server("bank")) == 6 })
	if s := status(t, p, "alice", "bank"); s != mcp.StatusNeedsAuthentication {
		t.Fatalf("alice after a test: %s", s)
	}
	if err := p.SaveCredentials(ctx, "alice", "bank", values("token", "tok-alice")); err != nil {
		t.Fatal(err)
	}
	if s := status(t, p, "alice", "bank"); s != mcp.StatusSuccess {
		t.Fatalf("alice after configuring: %s", s)
	}
	row, err := st.GetCredential(ctx, store.CredentialKey{Identity: "alice", Server: "bank", Kind: store.KindConfig})
	if err != nil || bytes.Contains(row.Secret.Ciphertext, []byte("tok-alice")) || row.Status != store.CredentialOK {
		t.Fatalf("stored row: %+v, %v", row, err)
	}
	if _, err := p.Configure(ctx, "bob", "bank", values("token", "tok-bob")); err != nil {
		t.Fatal(err)
	}

	// Each user's calls carry their own token, even interleaved.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		who := []string{"alice", "bob"}[i%2]
		wg.Go(func() {
			res, err := whoami(who)
			if err != nil || res.Text != "Bearer tok-"+who {
				errs <- fmt.Errorf("%s got %q, %v", who, res.Text, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := p.UserSessions(); n != 2 {
		t.Fatalf("%d user sessions, want 2", n)
	}

	// The server stops accepting alice's token: the row is marked failed, she is told once,
	// and her next calls do not bother the server. Bob is unaffected.
	toks.set("tok-alice", false)
	if _, err := whoami("alice"); !errors.Is(err, mcp.ErrAuth) {
		t.Fatalf("revoked token: %v", err)
	}
	if s := status(t, p, "alice", "bank"); s != mcp.StatusFailure {
		t.Fatalf("alice after rejection: %s", s)
	}
	before := toks.requests.Load()
	if _, err := whoami("alice"); !errors.Is(err, mcp.ErrAuth) || toks.requests.Load() != before {
		t.Fatalf("call with a failed credential: %v (server saw %d more requests)", err, toks.requests.Load()-before)
	}
	rejectedMu.Lock()
	if len(rejected) != 1 || rejected[0] != "alice/bank" {
		t.Fatalf("OnRejected calls: %v", rejected)
	}
	rejectedMu.Unlock()
	if res, err := whoami("bob"); err != nil || res.Text != "Bearer tok-bob" {
		t.Fatalf("bob: %+v %v", res, err)
	}

	// Alice configures a new token and is back at once.
	toks.set("tok-alice-2", true)
	if _, err := p.Configure(ctx, "alice", "bank", values("token", "tok-alice-2")); err != nil {
		t.Fatal(err)
	}
	if res, err := whoami("alice"); err != nil || res.Text != "Bearer tok-alice-2" {
		t.Fatalf("alice with the new token: %+v %v", res, err)
	}

	// Bob forgets his credentials.
	if err := p.Forget(ctx, "bob", "bank"); err != nil {
		t.Fatal(err)
	}
	if _, err := whoami("bob"); !errors.Is(err, mcp.ErrNeedsAuthentication) {
		t.Fatalf("bob after forgetting: %v", err)
	}
	if s := status(t, p, "bob", "bank"); s != mcp.StatusNeedsAuthentication {
		t.Fatalf("bob's status after forgetting: %s", s)
	}
}

func TestUserSessionsCloseWhenIdle(t *testing.T) {
	ctx := context.Background()
	toks := newTokens("a", "b", "c")
	hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, toks.check)
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	def := userServerDef("bank", hs.url("/mcp"))
	def.MaxSessionIdleSeconds = 600
	p := newPool(t, mcp.Config{Servers: []packs.Server{def}, Credentials: openStore(t), Keyring: newKeyring(t), Now: clk.Now})
	for _, u := range []string{"a", "b"} {
		if _, err := p.Configure(ctx, u, "bank", values("token", u)); err != nil {
			t.Fatal(err)
		}
		call(t, p, mcp.Call{Identity: u, Server: "bank", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	}
	open := func() int { return countSessions(hs.server().Sessions()) }
	if n := p.UserSessions(); n != 2 || open() != 2 {
		t.Fatalf("%d pool sessions, %d server sessions", n, open())
	}

	clk.advance(599 * time.Second)
	call(t, p, mcp.Call{Identity: "b", Server: "bank", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	if n := p.Sweep(clk.Now()); n != 0 {
		t.Fatalf("swept %d sessions before the idle time", n)
	}
	clk.advance(2 * time.Second) // a: 601 s idle; b: 2 s
	if n := p.Sweep(clk.Now()); n != 1 || p.UserSessions() != 1 {
		t.Fatalf("swept %d, %d left", n, p.UserSessions())
	}
	// The server saw a's session end.
	if n := open(); n != 1 {
		t.Fatalf("server still has %d sessions", n)
	}
	// a's next call opens a new session.
	if res := call(t, p, mcp.Call{Identity: "a", Server: "bank", Tool: "whoami"}); res.Text != "Bearer a" {
		t.Fatalf("a after the sweep: %+v", res)
	}
}

func countSessions[T any](seq func(func(T) bool)) int {
	n := 0
	for range seq {
		n++
	}
	return n
}

func TestUserSessionsAreBounded(t *testing.T) {
	ctx := context.Background()
	toks := newTokens("a", "b", "c")
	hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, toks.check)
	p := newPool(t, mcp.Config{Servers: []packs.Server{userServerDef("bank", hs.url("/mcp"))},
		Credentials: openStore(t), Keyring: newKeyring(t), MaxUserSessions: 2})
	for _, u := range []string{"a", "b", "c"} {
		if _, err := p.Configure(ctx, u, "bank", values("token", u)); err != nil {
			t.Fatal(err)
		}
		call(t, p, mcp.Call{Identity: u, Server: "bank", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	}
	if n := p.UserSessions(); n != 2 {
		t.Fatalf("%d user sessions, want the bound of 2", n)
	}
	// The evicted user (a, least recently used) still works: the session reopens.
	if res := call(t, p, mcp.Call{Identity: "a", Server: "bank", Tool: "whoami"}); res.Text != "Bearer a" {
		t.Fatalf("a: %+v", res)
	}
}

func TestUserControlledStdioServer(t *testing.T) {
	// A user-controlled stdio server gets each user's field values as environment variables,
	// one process per user.
	ctx := context.Background()
	def := stdioServerDef(t, "local")
	def.AccessMode = packs.UserControlled
	def.UserConfig = &packs.UserConfig{Fields: []packs.UserField{{Name: "USER_TOKEN", Type: packs.FieldSecret}}}
	p := newPool(t, mcp.Config{Servers: []packs.Server{def}, Credentials: openStore(t), Keyring: newKeyring(t)})
	for _, u := range []string{"alice", "bob"} {
		if _, err := p.Configure(ctx, u, "local", values("USER_TOKEN", "env-"+u)); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"alice", "bob", "alice"} {
		if res := call(t, p, mcp.Call{Identity: u, Server: "local", Tool: "whoami"}); res.Text != "env-"+u {
			t.Fatalf("%s: %+v", u, res)
		}
	}
}

func TestUserConfigWithoutKey(t *testing.T) {
	hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, nil)
	p := newPool(t, mcp.Config{Servers: []packs.Server{
		userServerDef("bank", hs.url("/mcp")),
		httpServerDef("shared", packs.TransportStreamableHTTP, hs.url("/mcp")),
	}})
	if p.UserConfigAvailable() {
		t.Fatal("user config available without a keyring")
	}
	if _, err := p.Configure(context.Background(), "alice", "bank", values("token", "x")); !errors.Is(err, mcp.ErrConfigUnavailable) {
		t.Fatalf("configure: %v", err)
	}
	if _, err := p.Call(context.Background(), mcp.Call{Identity: "alice", Server: "bank", Tool: "echo"}); !errors.Is(err, mcp.ErrNeedsAuthentication) {
		t.Fatalf("call: %v", err)
	}
	// Admin-controlled servers still work.
	call(t, p, mcp.Call{Server: "shared", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
}

package oauth_test

import (
	"crypto/elliptic"
	"net/url"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth/oauthtest"
	"github.com/packbot/packbot/packs"
)

// checkProofs fails when a server refused a proof, or accepted fewer than min.
func checkProofs(t *testing.T, who string, p *oauthtest.DPoPProofs, min int) {
	t.Helper()
	accepted, refused := p.DPoPStats()
	if len(refused) > 0 || accepted < min {
		t.Errorf("%s accepted %d DPoP proofs (want at least %d) and refused %q", who, accepted, min, refused)
	}
}

// TestDPoPUserTokens: with an authorization server that advertises DPoP, a user's tokens are
// bound to a key of packbot's (the link names its thumbprint, the code exchange and every
// refresh carry a proof), and the pool presents them to the MCP server with the DPoP scheme and
// a fresh proof per request; a nonce either server asks for is sent on the next try. The MCP
// server refuses a bound token presented as a bearer token, so every call below went through a
// proof.
func TestDPoPUserTokens(t *testing.T) {
	e := newEnvWith(t, backends()[0], oauthtest.MCPOptions{DPoP: true})
	e.as.Set(func(as *testAS) { as.DPoP = true })
	link, _ := e.authorize(e.m)
	if u, err := url.Parse(link); err != nil || len(u.Query().Get("dpop_jkt")) != 43 {
		t.Fatalf("the link names no DPoP key thumbprint: %s", link)
	}
	srv := e.cfg.Servers[0]
	srv.TimeoutMs, srv.MaxSessionIdleSeconds = 10_000, packs.DefaultMaxSessionIdle
	pool, err := mcp.New(mcp.Config{Servers: []packs.Server{srv}, Credentials: e.st, Authorizer: e.m, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	call := func(when string) {
		t.Helper()
		res, err := pool.Call(e.ctx, mcp.Call{Identity: alice, Server: serverName, Tool: "whoami"})
		if err != nil || res.Text != "you are alice" {
			t.Fatalf("%s: %+v, %v", when, res, err)
		}
	}
	call("first call")
	e.clock.Advance(5 * time.Minute) // expired: refreshed with a proof of the same key
	call("after a refresh")
	e.as.Proofs.SetDPoPNonce("as-nonce")
	e.mcp.Proofs.SetDPoPNonce("rs-nonce")
	e.clock.Advance(5 * time.Minute)
	call("with nonces")
	checkProofs(t, "the authorization server", &e.as.Proofs, 3)
	checkProofs(t, "the MCP server", &e.mcp.Proofs, 3)
	if e.mcp.DPoPRequests.Load() < 3 {
		t.Errorf("%d requests presented a DPoP token, want every one", e.mcp.DPoPRequests.Load())
	}
	e.checkLogsClean()
}

// TestDPoPMachineTokens: packbot's own tokens are bound the same way; with private_key_jwt a
// token request sent again for the authorization server's nonce carries a new client assertion
// (the first one's jti must not be replayed).
func TestDPoPMachineTokens(t *testing.T) {
	e := newMachineEnv(t, oauthtest.MCPOptions{DPoP: true}, withJWT(ecKey(t, elliptic.P256()), ""), func(e *machineEnv) {
		e.as.Set(func(as *testAS) { as.DPoP = true })
		e.as.Proofs.SetDPoPNonce("as-nonce")
		e.mcp.Proofs.SetDPoPNonce("rs-nonce")
	})
	e.mustCall("first call")
	e.mustCall("second call")
	if n := e.grants(); n != 1 {
		t.Errorf("grants = %d, want 1", n)
	}
	checkProofs(t, "the authorization server", &e.as.Proofs, 1)
	checkProofs(t, "the MCP server", &e.mcp.Proofs, 2)
	e.checkLogsClean()
}

package oauth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// TestThroughThePool runs the sign-in end to end with the MCP pool as the client: discovery from
// the server's 401, dynamic registration, PKCE, the callback, then tool calls whose token the
// pool gets from the Manager, refreshed silently on expiry and after a 401, until the grant is
// revoked and the user must sign in again.
func TestThroughThePool(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		srv := e.cfg.Servers[0]
		srv.TimeoutMs, srv.MaxSessionIdleSeconds = 10_000, packs.DefaultMaxSessionIdle
		pool, err := mcp.New(mcp.Config{Servers: []packs.Server{srv}, Credentials: e.st, Authorizer: e.m, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		whoami := mcp.Call{Identity: alice, Server: serverName, Tool: "whoami"}
		status := func() mcp.Status {
			t.Helper()
			s, err := pool.Status(e.ctx, alice, serverName)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}

		if _, err := pool.Call(e.ctx, whoami); !errors.Is(err, mcp.ErrNeedsAuthentication) {
			t.Fatalf("before signing in: %v", err)
		}
		if s := status(); s != mcp.StatusNeedsAuthentication {
			t.Fatalf("status before signing in: %s", s)
		}

		e.authorize(e.m)
		if s := status(); s != mcp.StatusSuccess {
			t.Fatalf("status after signing in: %s", s)
		}
		call := func(when string) {
			t.Helper()
			res, err := pool.Call(e.ctx, whoami)
			if err != nil || res.Text != "you are alice" {
				t.Fatalf("%s: %+v, %v", when, res, err)
			}
		}
		call("first call")
		if cat, _ := pool.Catalog(); len(cat.Server(serverName)) != 1 {
			t.Fatalf("the first session did not discover the tools: %+v", cat)
		}

		e.clock.Advance(5 * time.Minute) // the access token expires
		call("after expiry")
		e.as.RevokeAccess() // the server rejects the token before it expires: 401, refresh, retry
		call("after revocation of the access token")
		if _, exchanges, refreshes, _ := e.as.Stats(); exchanges != 1 || refreshes != 2 {
			t.Fatalf("exchanges, refreshes = %d, %d, want 1, 2", exchanges, refreshes)
		}

		e.as.RevokeAll() // the grant is gone: the user must sign in again
		if _, err := pool.Call(e.ctx, whoami); !errors.Is(err, mcp.ErrNeedsAuthentication) {
			t.Fatalf("after the grant was revoked: %v", err)
		}
		if s := status(); s != mcp.StatusNeedsAuthentication {
			t.Fatalf("status after the grant was revoked: %s", s)
		}
		e.checkLogsClean()
	})
}

package oauth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
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

// TestStepUpThroughThePool: the pool hands a 403 insufficient_scope to the Manager instead of
// refreshing: the call fails with a *StepUpError (the user must authorize again, with
// mcp:write); after that authorization the call works; when the authorization server does not
// grant mcp:write, the next 403 ends with ErrStepUpExhausted and no token request at all.
func TestStepUpThroughThePool(t *testing.T) {
	e := stepUpEnv(t, backends()[0])
	srv := e.cfg.Servers[0]
	srv.TimeoutMs, srv.MaxSessionIdleSeconds = 10_000, packs.DefaultMaxSessionIdle
	pool, err := mcp.New(mcp.Config{Servers: []packs.Server{srv}, Credentials: e.st, Authorizer: e.m, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	whoami := mcp.Call{Identity: alice, Server: serverName, Tool: "whoami"}

	e.authorize(e.m)
	_, err = pool.Call(e.ctx, whoami)
	var su *oauth.StepUpError
	if !errors.As(err, &su) || !errors.Is(err, mcp.ErrNeedsAuthentication) {
		t.Fatalf("call without mcp:write: %v, want a *StepUpError", err)
	}
	e.authorize(e.m)
	if res, err := pool.Call(e.ctx, whoami); err != nil || res.Text != "you are alice" {
		t.Fatalf("call after step-up: %+v, %v", res, err)
	}

	e.as.Set(func(as *testAS) { as.Grantable = []string{"mcp:basic", "offline_access"} })
	e.authorize(e.m) // a new sign-in (as after Forget): mcp:basic only
	if _, err := pool.Call(e.ctx, whoami); !errors.As(err, &su) {
		t.Fatalf("call with mcp:basic only: %v, want a *StepUpError", err)
	}
	e.authorize(e.m) // asks for mcp:write, which is not granted
	_, _, refreshes, _ := e.as.Stats()
	_, err = pool.Call(e.ctx, whoami)
	if !errors.Is(err, oauth.ErrStepUpExhausted) || errors.Is(err, mcp.ErrNeedsAuthentication) {
		t.Fatalf("call after a step-up that did not get mcp:write: %v, want ErrStepUpExhausted", err)
	}
	if _, _, re, _ := e.as.Stats(); re != refreshes {
		t.Errorf("a 403 made %d refreshes, want none", re-refreshes)
	}
}

package oauth_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/store"
)

func TestRevokedRefreshToken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		e.authorize(e.m)
		e.as.RevokeAll()
		e.clock.Advance(5 * time.Minute)
		if _, err := e.m.Token(e.ctx, alice, serverName); !errors.Is(err, mcp.ErrNeedsAuthentication) {
			t.Fatalf("Token with a revoked refresh token: %v, want ErrNeedsAuthentication", err)
		}
		if _, err := e.tokenRow(); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("token row after invalid_grant: %v, want it gone", err)
		}
		if ok, err := e.m.Authorized(e.ctx, alice, serverName); ok || err != nil {
			t.Errorf("Authorized = %v, %v, want false", ok, err)
		}
		// Authorizing again works.
		e.authorize(e.m)
		if _, err := e.m.Token(e.ctx, alice, serverName); err != nil {
			t.Fatalf("Token after authorizing again: %v", err)
		}
	})
}

// TestConcurrentRefresh: two replicas (two store handles), several callers each, one expired
// token: the rotating refresh token is spent once, and everyone gets the new token.
func TestConcurrentRefresh(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		e.authorize(e.m)
		replicas := []*oauth.Manager{e.m, e.newManager(e.again())}
		e.clock.Advance(5 * time.Minute)

		run := func(call func(m *oauth.Manager) (string, error)) []string {
			var wg sync.WaitGroup
			var mu sync.Mutex
			var toks []string
			for i := range 6 {
				wg.Go(func() {
					tok, err := call(replicas[i%2])
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("caller %d: %v", i, err)
					}
					toks = append(toks, tok)
				})
			}
			wg.Wait()
			return toks
		}
		toks := run(func(m *oauth.Manager) (string, error) { return m.Token(e.ctx, alice, serverName) })
		for _, tok := range toks {
			if tok != toks[0] {
				t.Fatalf("callers got different tokens after one expiry")
			}
		}
		if _, _, refreshes, _ := e.as.Stats(); refreshes != 1 {
			t.Errorf("refreshes = %d, want 1", refreshes)
		}

		// Forced refreshes (401s everywhere) must never spend a spent refresh token.
		toks = run(func(m *oauth.Manager) (string, error) { return m.Refresh(e.ctx, alice, serverName) })
		final, err := e.m.Token(e.ctx, alice, serverName)
		if err != nil {
			t.Fatalf("Token after concurrent refreshes: %v", err)
		}
		if _, ok := e.as.Verify(final); !ok {
			t.Error("the final token does not verify")
		}
		_, _, refreshes, _ := e.as.Stats()
		if refreshes < 2 || refreshes > 1+len(toks) {
			t.Errorf("refreshes = %d", refreshes)
		}
		e.checkLogsClean()
	})
}

// TestTransientFailure: while the token endpoint is down, a token that has not expired yet is
// still handed out; once it expired, the error is not "authorize again".
func TestTransientFailure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		e.authorize(e.m)
		before, err := e.m.Token(e.ctx, alice, serverName)
		if err != nil {
			t.Fatal(err)
		}
		e.as.Set(func(as *testAS) { as.Down = true })
		e.clock.Advance(5*time.Minute - 30*time.Second) // inside the refresh window
		tok, err := e.m.Token(e.ctx, alice, serverName)
		if err != nil || tok != before {
			t.Fatalf("Token while the AS is down: %v (same token: %v)", err, tok == before)
		}
		e.clock.Advance(time.Minute) // expired
		if _, err := e.m.Token(e.ctx, alice, serverName); err == nil || errors.Is(err, mcp.ErrNeedsAuthentication) {
			t.Fatalf("Token after expiry with the AS down: %v, want a non-authentication error", err)
		}
		e.as.Set(func(as *testAS) { as.Down = false })
		if _, err := e.m.Token(e.ctx, alice, serverName); err != nil {
			t.Fatalf("Token once the AS is back: %v", err)
		}
	})
}

// TestCallerGivesUp: a caller whose context ends while its refresh is in flight must not lose
// the rotated refresh token that the authorization server has already issued.
func TestCallerGivesUp(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		e.authorize(e.m)
		e.clock.Advance(5 * time.Minute)
		e.as.Set(func(as *testAS) { as.Delay = 200 * time.Millisecond })
		ctx, cancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
		_, _ = e.m.Token(ctx, alice, serverName) // may or may not return the token: the caller left
		cancel()
		// Wait until the authorization server has spent the refresh token and issued the next.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, _, refreshes, _ := e.as.Stats(); refreshes == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the authorization server never saw the refresh")
			}
		}
		e.as.Set(func(as *testAS) { as.Delay = 0 })
		tok, err := e.m.Token(e.ctx, alice, serverName)
		if err != nil {
			t.Fatalf("Token after a caller gave up mid-refresh: %v", err)
		}
		if _, ok := e.as.Verify(tok); !ok {
			t.Error("token does not verify")
		}
		if _, _, refreshes, _ := e.as.Stats(); refreshes != 1 {
			t.Errorf("refreshes = %d, want 1", refreshes)
		}
	})
}

func TestForget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		e.authorize(e.m)
		if _, err := e.m.Begin(e.ctx, alice, serverName); err != nil { // a pending one too
			t.Fatal(err)
		}
		if err := e.m.Forget(e.ctx, alice, serverName); err != nil {
			t.Fatalf("Forget: %v", err)
		}
		if _, err := e.m.Token(e.ctx, alice, serverName); !errors.Is(err, mcp.ErrNeedsAuthentication) {
			t.Errorf("Token after Forget: %v", err)
		}
		rows, err := e.st.ListCredentials(e.ctx, store.CredentialQuery{Identity: alice})
		if err != nil || len(rows) != 0 {
			t.Errorf("rows after Forget: %d, %v", len(rows), err)
		}
		if recs, err := e.st.QueryRecords(e.ctx, "mcp-oauth-state"); err != nil || len(recs) != 0 {
			t.Errorf("state records after Forget: %d, %v", len(recs), err)
		}
		if _, _, _, revocations := e.as.Stats(); revocations != 1 {
			t.Errorf("revocations = %d, want 1", revocations)
		}
		if err := e.m.Forget(e.ctx, alice, serverName); err != nil {
			t.Errorf("Forget again: %v", err)
		}
	})
}

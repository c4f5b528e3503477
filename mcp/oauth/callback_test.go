package oauth_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/store"
)

func TestCallbackRefusals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		assertRefused := func(t *testing.T, u, want string) {
			t.Helper()
			status, body, err := get(e.ctx, u)
			if err != nil || status != http.StatusBadRequest || !strings.Contains(body, want) {
				t.Fatalf("GET callback = %d %v, want 400 with %q:\n%s", status, err, want, body)
			}
		}
		noToken := func(t *testing.T) {
			t.Helper()
			if _, err := e.tokenRow(); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("token row after a refused callback: %v", err)
			}
		}

		t.Run("wrong state", func(t *testing.T) {
			if _, err := e.m.Begin(e.ctx, alice, serverName); err != nil {
				t.Fatal(err)
			}
			assertRefused(t, e.cfg.CallbackURL+"?code=abc&state=not-the-state", "unknown or was already used")
			assertRefused(t, e.cfg.CallbackURL+"?code=abc", "no authorization state")
			noToken(t)
		})

		t.Run("issuer mix-up", func(t *testing.T) {
			link, err := e.m.Begin(e.ctx, alice, serverName)
			if err != nil {
				t.Fatal(err)
			}
			q := url.Values{"code": {"abc"}, "state": {stateOf(link)}, "iss": {"https://evil.example"}}
			assertRefused(t, e.cfg.CallbackURL+"?"+q.Encode(), "expected authorization server")
			if _, exchanges, _, _ := e.as.Stats(); exchanges != 0 {
				t.Errorf("code exchanges = %d, want 0", exchanges)
			}
			noToken(t)
		})

		t.Run("replaced link", func(t *testing.T) {
			first, err := e.m.Begin(e.ctx, alice, serverName)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.Begin(e.ctx, alice, serverName); err != nil {
				t.Fatal(err)
			}
			status, body, _, err := followAuthorization(e.ctx, first)
			if err != nil || status != http.StatusBadRequest {
				t.Fatalf("first link after a second Begin: %d %v\n%s", status, err, body)
			}
			noToken(t)
		})

		t.Run("expired", func(t *testing.T) {
			link, err := e.m.Begin(e.ctx, alice, serverName)
			if err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(oauth.DefaultPendingTTL + time.Second)
			status, body, _, err := followAuthorization(e.ctx, link)
			if err != nil || status != http.StatusBadRequest || !strings.Contains(body, "expired") {
				t.Fatalf("expired link: %d %v\n%s", status, err, body)
			}
			noToken(t)
			if fs := e.failuresSoFar(); len(fs) == 0 || !errors.Is(fs[len(fs)-1], oauth.ErrExpired) {
				t.Errorf("OnFailed got %v, want ErrExpired", fs)
			}
			if _, err := e.st.GetCredential(e.ctx, store.CredentialKey{Identity: alice, Server: serverName, Kind: oauth.KindPending}); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("pending row after expiry: %v, want it gone", err)
			}
		})

		t.Run("access denied", func(t *testing.T) {
			e.as.Set(func(as *testAS) { as.Deny = true })
			defer e.as.Set(func(as *testAS) { as.Deny = false })
			link, err := e.m.Begin(e.ctx, alice, serverName)
			if err != nil {
				t.Fatal(err)
			}
			status, body, _, err := followAuthorization(e.ctx, link)
			if err != nil || status != http.StatusBadRequest || !strings.Contains(body, "access_denied") ||
				!strings.Contains(body, "the user said no") {
				t.Fatalf("denied: %d %v\n%s", status, err, body)
			}
			noToken(t)
			var ae *oauth.AuthorizationError
			if fs := e.failuresSoFar(); len(fs) == 0 || !errors.As(fs[len(fs)-1], &ae) || ae.Code != "access_denied" {
				t.Errorf("OnFailed got %v, want access_denied", fs)
			}
		})

		t.Run("reused state", func(t *testing.T) {
			_, callbackURL := e.authorize(e.m)
			row, err := e.tokenRow()
			if err != nil {
				t.Fatal(err)
			}
			assertRefused(t, callbackURL, "already used")
			again, err := e.tokenRow()
			if err != nil || !bytes.Equal(again.Secret.Ciphertext, row.Secret.Ciphertext) {
				t.Errorf("the replay changed the token row: %v", err)
			}
			if _, exchanges, _, _ := e.as.Stats(); exchanges != 1 {
				t.Errorf("code exchanges = %d, want 1", exchanges)
			}
		})
		e.checkLogsClean()
	})
}

// TestConcurrentReplay: the same callback URL arriving several times at once (a replay racing
// the user, on two replicas) goes through once; the code is exchanged once.
func TestConcurrentReplay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		replica := httptest.NewServer(e.newManager(e.again()).CallbackHandler())
		defer replica.Close()
		link, err := e.m.Begin(e.ctx, alice, serverName)
		if err != nil {
			t.Fatal(err)
		}
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, link, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		loc := resp.Header.Get("Location")
		targets := []string{loc, replica.URL + strings.TrimPrefix(loc, e.cfg.CallbackURL)}

		var wg sync.WaitGroup
		var mu sync.Mutex
		statuses := map[int]int{}
		for i := range 4 {
			wg.Go(func() {
				status, _, err := get(e.ctx, targets[i%2])
				if err != nil {
					t.Errorf("GET callback: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				statuses[status]++
			})
		}
		wg.Wait()
		if statuses[http.StatusOK] != 1 || statuses[http.StatusBadRequest] != 3 {
			t.Errorf("statuses = %v, want one 200 and three 400", statuses)
		}
		if _, exchanges, _, _ := e.as.Stats(); exchanges != 1 {
			t.Errorf("code exchanges = %d, want 1", exchanges)
		}
		if _, err := e.m.Token(e.ctx, alice, serverName); err != nil {
			t.Errorf("Token: %v", err)
		}
	})
}

func TestCallbackMethod(t *testing.T) {
	e := newEnv(t, backends()[0])
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.cfg.CallbackURL+"?state=x&code=y", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST callback = %d, want 405", resp.StatusCode)
	}
}

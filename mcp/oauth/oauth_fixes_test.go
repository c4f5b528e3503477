package oauth_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/mcp/oauth/oauthtest"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
)

// TestDCRPublicClientWithReturnedSecret: an authorization server that takes only public
// clients but returns a client_secret at registration. packbot registers as a public client,
// ignores the secret (never sends it: the server would refuse it with invalid_client) and signs
// in; the refresh works the same way. It also serves a client metadata document, which this
// server does not support: dynamic registration is used.
func TestDCRPublicClientWithReturnedSecret(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, func(e *env, _ *packs.Server) {
			e.cfg.ClientMetadataURL = e.cbURL + oauth.DefaultClientMetadataPath
		})
		e.as.Set(func(as *testAS) { as.SecretAtDCR = true })
		e.authorize(e.m)
		e.clock.Advance(5 * time.Minute)
		tok, err := e.m.Token(e.ctx, alice, serverName)
		if err != nil {
			t.Fatalf("Token (refresh as a public client): %v", err)
		}
		if _, ok := e.as.Verify(tok); !ok {
			t.Error("the refreshed token does not verify")
		}
		e.as.Set(func(as *testAS) {
			if !slices.Equal(as.RegisteredMethods, []string{"none"}) {
				t.Errorf("registrations asked for %q, want one public client (none)", as.RegisteredMethods)
			}
			if len(as.AuthMethods) != 2 || slices.ContainsFunc(as.AuthMethods, func(m string) bool { return m != "none" }) {
				t.Errorf("token requests authenticated with %q, want none twice", as.AuthMethods)
			}
			if as.MetadataFetches != 0 {
				t.Errorf("client metadata fetched %d times by a server without CIMD", as.MetadataFetches)
			}
		})
		e.checkLogsClean()
	})
}

// TestClientIDMetadataDocument: an authorization server that advertises
// client_id_metadata_document_supported gets packbot's document URL as client_id, fetches the
// document packbot serves, and nothing is registered.
func TestClientIDMetadataDocument(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, func(e *env, _ *packs.Server) {
			e.cfg.ClientMetadataURL = e.cbURL + oauth.DefaultClientMetadataPath
		})
		e.as.Set(func(as *testAS) { as.CIMD = true })

		status, body, err := get(e.ctx, e.cfg.ClientMetadataURL)
		if err != nil || status != http.StatusOK {
			t.Fatalf("GET client metadata: %d %v", status, err)
		}
		var doc struct {
			ClientID     string   `json:"client_id"`
			RedirectURIs []string `json:"redirect_uris"`
			Method       string   `json:"token_endpoint_auth_method"`
			GrantTypes   []string `json:"grant_types"`
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("client metadata is not JSON: %v\n%s", err, body)
		}
		if doc.ClientID != e.cfg.ClientMetadataURL || !slices.Equal(doc.RedirectURIs, []string{e.cfg.CallbackURL}) ||
			doc.Method != "none" || !slices.Contains(doc.GrantTypes, "authorization_code") {
			t.Errorf("client metadata document = %s", body)
		}

		link, _ := e.authorize(e.m)
		if got := mustQuery(t, link).Get("client_id"); got != e.cfg.ClientMetadataURL {
			t.Errorf("client_id = %q, want the metadata document URL", got)
		}
		cs, err := connect(e.ctx, e.m, alice, serverName, e.mcp.Endpoint)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer func() { _ = cs.Close() }()
		if text, err := whoami(e.ctx, cs); err != nil || text != "you are alice" {
			t.Fatalf("whoami = %q, %v", text, err)
		}
		e.as.Set(func(as *testAS) {
			if as.Registrations != 0 || as.MetadataFetches != 1 {
				t.Errorf("registrations, metadata fetches = %d, %d, want 0, 1", as.Registrations, as.MetadataFetches)
			}
		})
	})
}

// stepUpEnv is an MCP server whose tools/call needs mcp:write, while its metadata offers
// mcp:basic, so that the first authorization asks for mcp:basic only.
func stepUpEnv(t *testing.T, b backend) *env {
	e := newEnvWith(t, b, oauthtest.MCPOptions{Scopes: []string{"mcp:basic"}, RequireScope: "mcp:write"})
	e.as.Set(func(as *testAS) { as.Scopes = []string{"mcp:basic", "mcp:write", "offline_access"} })
	return e
}

// callForbidden calls whoami and returns the 403's challenge; it fails the test if the call
// does not fail with one.
func callForbidden(t *testing.T, e *env) string {
	t.Helper()
	var mu sync.Mutex
	var challenge string
	cs, err := connectObserved(e.ctx, e.m, alice, serverName, e.mcp.Endpoint, func(c string) {
		mu.Lock()
		defer mu.Unlock()
		challenge = c
	})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer func() { _ = cs.Close() }()
	if text, err := whoami(e.ctx, cs); err == nil {
		t.Fatalf("whoami without mcp:write = %q, want a 403", text)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(challenge, "insufficient_scope") {
		t.Fatalf("403 challenge = %q", challenge)
	}
	return challenge
}

// TestStepUp: a 403 insufficient_scope makes the next authorization ask for the union of the
// granted and required scopes (mcp:basic → mcp:basic mcp:write), after which the call works.
func TestStepUp(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := stepUpEnv(t, b)
		link, _ := e.authorize(e.m)
		if got := mustQuery(t, link).Get("scope"); got != "mcp:basic offline_access" {
			t.Fatalf("first authorization asks for scope %q", got)
		}
		challenge := callForbidden(t, e)
		for range 2 { // the same 403 twice before the user comes back: the same answer
			err := e.m.StepUp(e.ctx, alice, serverName, challenge)
			var su *oauth.StepUpError
			if !errors.As(err, &su) || !errors.Is(err, mcp.ErrNeedsAuthentication) {
				t.Fatalf("StepUp: %v, want a *StepUpError that needs authentication", err)
			}
			if !slices.Contains(su.Scopes, "mcp:basic") || !slices.Contains(su.Scopes, "mcp:write") {
				t.Errorf("step-up scopes = %q", su.Scopes)
			}
		}
		if _, err := e.m.Token(e.ctx, alice, serverName); err != nil {
			t.Errorf("the current token is dropped by a step-up: %v", err)
		}
		link, _ = e.authorize(e.m)
		if got := strings.Fields(mustQuery(t, link).Get("scope")); !slices.Contains(got, "mcp:basic") || !slices.Contains(got, "mcp:write") {
			t.Fatalf("step-up authorization asks for scope %q, want mcp:basic and mcp:write", got)
		}
		cs, err := connect(e.ctx, e.m, alice, serverName, e.mcp.Endpoint)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer func() { _ = cs.Close() }()
		if text, err := whoami(e.ctx, cs); err != nil || text != "you are alice" {
			t.Fatalf("whoami after step-up = %q, %v", text, err)
		}
		e.checkLogsClean()
	})
}

// TestStepUpBounded: when the authorization server does not grant mcp:write, the second 403
// asks for nothing the user has not already authorized: StepUp refuses (ErrStepUpExhausted,
// an mcp.ErrAuth) instead of sending the user the same link forever.
func TestStepUpBounded(t *testing.T) {
	e := stepUpEnv(t, backends()[0])
	e.as.Set(func(as *testAS) { as.Grantable = []string{"mcp:basic", "offline_access"} })
	e.authorize(e.m)
	if err := e.m.StepUp(e.ctx, alice, serverName, callForbidden(t, e)); !errors.Is(err, mcp.ErrNeedsAuthentication) {
		t.Fatalf("first StepUp: %v", err)
	}
	e.authorize(e.m) // asks for mcp:write, granted mcp:basic only
	err := e.m.StepUp(e.ctx, alice, serverName, callForbidden(t, e))
	if !errors.Is(err, oauth.ErrStepUpExhausted) || !errors.Is(err, mcp.ErrAuth) || errors.Is(err, mcp.ErrNeedsAuthentication) {
		t.Fatalf("second StepUp: %v, want ErrStepUpExhausted", err)
	}
	if !strings.Contains(err.Error(), "mcp:write") || !strings.Contains(err.Error(), "already authorized") {
		t.Errorf("the error does not say why: %v", err)
	}
	if err := e.m.StepUp(e.ctx, alice, serverName, `Bearer error="invalid_token"`); !errors.Is(err, mcp.ErrAuth) {
		t.Errorf("StepUp on a 403 without insufficient_scope: %v", err)
	}
}

// TestLegacyFallback: an MCP 2025-03-26 server with no protected-resource metadata and no
// authorization server metadata: packbot uses the default endpoints at the server's origin.
func TestLegacyFallback(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := newEnvWith(t, b, oauthtest.MCPOptions{Legacy: true})
		link, _ := e.authorize(e.m)
		if !strings.HasPrefix(link, e.mcp.Origin+"/authorize?") {
			t.Errorf("authorization link %s is not the server origin's /authorize", link)
		}
		cs, err := connect(e.ctx, e.m, alice, serverName, e.mcp.Endpoint)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer func() { _ = cs.Close() }()
		if text, err := whoami(e.ctx, cs); err != nil || text != "you are alice" {
			t.Fatalf("whoami = %q, %v", text, err)
		}
		e.clock.Advance(5 * time.Minute)
		if _, err := e.m.Token(e.ctx, alice, serverName); err != nil {
			t.Fatalf("refresh at the default token endpoint: %v", err)
		}
		if registrations, exchanges, refreshes, _ := e.as.Stats(); registrations != 1 || exchanges != 1 || refreshes != 1 {
			t.Errorf("registrations, exchanges, refreshes = %d, %d, %d, want 1 each", registrations, exchanges, refreshes)
		}
	})
}

// TestResourceMismatch: protected-resource metadata naming another resource fails Begin with
// ErrResourceMismatch; packbot neither tries the server's origin as authorization server nor
// registers anywhere.
func TestResourceMismatch(t *testing.T) {
	e := newEnvWith(t, backends()[0], oauthtest.MCPOptions{Resource: "https://other.example/mcp"})
	_, err := e.m.Begin(e.ctx, alice, serverName)
	if !errors.Is(err, oauth.ErrResourceMismatch) {
		t.Fatalf("Begin: %v, want ErrResourceMismatch", err)
	}
	for _, want := range []string{"https://other.example/mcp", e.mcp.Endpoint, "fix the server's metadata"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
	if registrations, _, _, _ := e.as.Stats(); registrations != 0 {
		t.Errorf("registrations = %d, want 0", registrations)
	}
	if _, err := e.st.GetCredential(e.ctx, store.CredentialKey{Identity: alice, Server: serverName, Kind: oauth.KindPending}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a pending authorization was stored: %v", err)
	}
}

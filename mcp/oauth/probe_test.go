package oauth_test

import (
	"net/url"
	"testing"

	"github.com/packbot/packbot/mcp/oauth/oauthtest"
)

// linkScope begins a sign-in (after challenge, when not empty) and returns the scope the link
// asks for.
func linkScope(t *testing.T, e *env, challenge string) string {
	t.Helper()
	link, err := e.m.BeginAfter(e.ctx, alice, serverName, challenge)
	if err != nil {
		t.Fatalf("BeginAfter: %v", err)
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("scope")
}

// TestProbeMeetsTheChallenge: packbot finds the sign-in challenge the way its MCP client meets
// it at 2026-07-28 — server/discover and tools/list with the MCP-Protocol-Version header and
// _meta — and asks for the scope that challenge names, not the metadata's scopes_supported
// (tools:read). A server that lets the handshake through (initialize, server/discover) and
// refuses only tools/list is seen refusing; the old probe, one bare initialize, saw nothing.
func TestProbeMeetsTheChallenge(t *testing.T) {
	for name, o := range map[string]oauthtest.MCPOptions{
		"first request refused": {ChallengeScope: "notes:read"},
		"handshake let through": {ChallengeScope: "notes:read", Open: []string{"initialize", "server/discover"}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnvWith(t, backends()[0], o)
			if got := linkScope(t, e, ""); got != "notes:read offline_access" {
				t.Errorf("the link asks for scope %q, want the challenge's %q (and offline_access)", got, "notes:read")
			}
		})
	}
}

// TestBeginAfterChallenge: with the challenge of a request the server refused, discovery
// follows that challenge (its scope and resource_metadata) without probing again.
func TestBeginAfterChallenge(t *testing.T) {
	e := newEnvWith(t, backends()[0], oauthtest.MCPOptions{ChallengeScope: "notes:read"})
	challenge := `Bearer error="invalid_token", scope="notes:write", resource_metadata="` +
		e.mcp.Origin + `/.well-known/oauth-protected-resource/mcp"`
	if got := linkScope(t, e, challenge); got != "notes:write offline_access" {
		t.Errorf("the link asks for scope %q, want the refused request's %q", got, "notes:write")
	}
	if n := e.mcp.MetadataHits.Load(); n != 1 {
		t.Errorf("metadata fetched %d times, want 1", n)
	}
}

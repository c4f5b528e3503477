package oauth_test

import (
	"context"
	"net/http"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/mcp/oauth/oauthtest"
)

// The authorization server, the protected MCP server and the browser of these tests live in
// package oauthtest (the bot's tests use them too).
type (
	clock        = oauthtest.Clock
	testAS       = oauthtest.AuthServer
	protectedMCP = oauthtest.ProtectedMCP
)

func newClock() *clock                         { return oauthtest.NewClock() }
func newTestAS(c *clock) *testAS               { return oauthtest.NewAuthServer(c) }
func newProtectedMCP(as *testAS) *protectedMCP { return oauthtest.NewProtectedMCP(as) }
func followAuthorization(ctx context.Context, link string) (int, string, string, error) {
	return oauthtest.FollowAuthorization(ctx, link)
}
func get(ctx context.Context, u string) (int, string, error) { return oauthtest.Get(ctx, u) }

// tokenSource is the part of the Manager the bearer transport uses (what package mcp will do).
type tokenSource interface {
	Token(ctx context.Context, identity, server string) (string, error)
	Refresh(ctx context.Context, identity, server string) (string, error)
}

// bearer adds Authorization: Bearer <Token> to every request and, on a 401, refreshes once and
// retries.
type bearer struct {
	m                tokenSource
	identity, server string
	base             http.RoundTripper
	forbidden        func(challenge string) // called with the WWW-Authenticate of a 403
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := b.m.Token(req.Context(), b.identity, b.server)
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusForbidden && b.forbidden != nil {
		b.forbidden(resp.Header.Get("WWW-Authenticate"))
	}
	if err != nil || resp.StatusCode != http.StatusUnauthorized || (req.Body != nil && req.GetBody == nil) {
		return resp, err
	}
	_ = resp.Body.Close()
	if tok, err = b.m.Refresh(req.Context(), b.identity, b.server); err != nil {
		return nil, err
	}
	r = req.Clone(req.Context())
	if req.GetBody != nil {
		if r.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return b.base.RoundTrip(r)
}

// connect opens a go-sdk client session to the protected server as identity.
func connect(ctx context.Context, m tokenSource, identity, server, endpoint string) (*mcpsdk.ClientSession, error) {
	return connectObserved(ctx, m, identity, server, endpoint, nil)
}

// connectObserved is connect that reports each 403's challenge to forbidden (as package mcp's
// transport observer does).
func connectObserved(ctx context.Context, m tokenSource, identity, server, endpoint string, forbidden func(string)) (*mcpsdk.ClientSession, error) {
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "packbot-test", Version: "1"}, nil)
	return client.Connect(ctx, &mcpsdk.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           &http.Client{Transport: &bearer{m: m, identity: identity, server: server, base: http.DefaultTransport, forbidden: forbidden}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
}

// whoami calls the tool and returns its text.
func whoami(ctx context.Context, cs *mcpsdk.ClientSession) (string, error) {
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "whoami"})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcpsdk.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String(), nil
}

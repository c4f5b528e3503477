package oauthtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// ProtectedMCP is an MCP server (go-sdk, streamable HTTP) behind a bearer check that answers
// 401 with a resource_metadata challenge and serves its protected-resource metadata.
type ProtectedMCP struct {
	srv      *httptest.Server
	Endpoint string // the MCP URL, also the resource identifier
	// Origin is scheme://host:port of the server.
	Origin string
	// MetadataHits counts requests for its protected-resource metadata.
	MetadataHits atomic.Int64
	// Refusals counts the requests to the MCP endpoint that carried a bearer token and were
	// answered 401.
	Refusals atomic.Int64
	// Proofs are the DPoP proofs it checked (with MCPOptions.DPoP); DPoPRequests counts the
	// requests that presented a token with the DPoP scheme.
	Proofs       DPoPProofs
	DPoPRequests atomic.Int64
}

// MCPOptions are the switches of [NewProtectedMCPWith]; the zero value is a well-behaved
// server as [NewProtectedMCP] starts.
type MCPOptions struct {
	// Legacy: an MCP 2025-03-26 server: no protected-resource metadata, its 401 names none,
	// and its origin serves the authorization server's endpoints (/authorize, /token, /register,
	// /revoke) without authorization server metadata.
	Legacy bool
	// Resource is the resource its metadata claims (default: the MCP endpoint). Another value is
	// a mismatched document.
	Resource string
	// NoResourceMetadata: no protected-resource metadata, and a 401 that names none, but not a
	// 2025-03-26 server either (its origin serves no authorization endpoints): a client must be
	// told its authorization server.
	NoResourceMetadata bool
	// ResourceMetadataURL replaces the resource_metadata URL of its 401 (an SSRF attempt).
	ResourceMetadataURL string
	// RedirectMetadata, when set, makes every protected-resource metadata URL on the server's
	// own origin answer 302 to this URL (an SSRF attempt through a redirect).
	RedirectMetadata string
	// AuthorizationServers replaces the authorization servers its metadata names.
	AuthorizationServers []string
	// Scopes is scopes_supported in its metadata (default tools:read).
	Scopes []string
	// RequireScope, when set, makes tools/call need this scope: a token without it gets 403
	// with WWW-Authenticate: Bearer error="insufficient_scope", scope="<granted> <RequireScope>".
	RequireScope string
	// DPoP: a token bound to a DPoP key is taken only with the DPoP scheme and a valid proof for
	// the request (RFC 9449 §7); a bound token presented as a bearer token is refused.
	DPoP bool
	// Open lists JSON-RPC methods the server serves without a token (as servers that let the
	// handshake through and refuse only later requests), e.g. "initialize", "server/discover".
	Open []string
	// ChallengeScope, when set, is the scope parameter of the 401 challenge to a request
	// without a token.
	ChallengeScope string
	// Listener, when set, is where the server listens (e.g. a non-loopback address).
	Listener net.Listener
	// TLS serves HTTPS with httptest's certificate (for 127.0.0.1, ::1 and example.com); see
	// [ProtectedMCP.Client].
	TLS bool
}

// NewProtectedMCP starts a well-behaved protected MCP server on loopback.
func NewProtectedMCP(as *AuthServer) *ProtectedMCP { return NewProtectedMCPWith(as, MCPOptions{}) }

// NewProtectedMCPWith starts a protected MCP server that behaves as o says, and makes as accept
// tokens for it (as.Resource).
func NewProtectedMCPWith(as *AuthServer, o MCPOptions) *ProtectedMCP {
	p := &ProtectedMCP{}
	mux := http.NewServeMux()
	p.srv = httptest.NewUnstartedServer(mux)
	if o.Listener != nil {
		_ = p.srv.Listener.Close()
		p.srv.Listener = o.Listener
	}
	if o.TLS {
		p.srv.StartTLS()
	} else {
		p.srv.Start()
	}
	p.Origin = p.srv.URL
	p.Endpoint = p.srv.URL + "/mcp"
	as.Set(func(as *AuthServer) { as.Resource = p.Endpoint })
	metadataURL := p.srv.URL + "/.well-known/oauth-protected-resource/mcp"
	if o.Legacy {
		metadataURL = ""
		as.Set(func(as *AuthServer) { as.issuer, as.NoMetadata = p.Origin, true })
		as.mountEndpoints(mux)
	} else if o.NoResourceMetadata {
		metadataURL = ""
	} else {
		prm := &oauthex.ProtectedResourceMetadata{
			Resource:             p.Endpoint,
			AuthorizationServers: []string{as.URL()},
			ScopesSupported:      []string{"tools:read"},
		}
		if o.Resource != "" {
			prm.Resource = o.Resource
		}
		if o.AuthorizationServers != nil {
			prm.AuthorizationServers = o.AuthorizationServers
		}
		if o.Scopes != nil {
			prm.ScopesSupported = o.Scopes
		}
		h := auth.ProtectedResourceMetadataHandler(prm)
		mux.Handle("GET /.well-known/oauth-protected-resource/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.MetadataHits.Add(1)
			h.ServeHTTP(w, r)
		}))
	}
	if o.ResourceMetadataURL != "" {
		metadataURL = o.ResourceMetadataURL
	}
	if o.RedirectMetadata != "" {
		redirect := func(w http.ResponseWriter, r *http.Request) {
			p.MetadataHits.Add(1)
			http.Redirect(w, r, o.RedirectMetadata, http.StatusFound)
		}
		mux.HandleFunc("GET /.well-known/oauth-protected-resource", redirect)
		if !o.Legacy && !o.NoResourceMetadata {
			mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp/redirect", redirect)
			metadataURL = p.srv.URL + "/.well-known/oauth-protected-resource/mcp/redirect"
		}
	}
	server := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "protected", Version: "1"}, nil)
	mcpsdk.AddTool(server, &mcpsdk.Tool{Name: "whoami", Description: "Says who the token belongs to."},
		func(_ context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "you are " + req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		user, scopes, ok := as.VerifyScopes(token)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: user, Scopes: scopes, Expiration: time.Now().Add(time.Hour)}, nil
	}
	var handler http.Handler = mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return server }, nil)
	if o.RequireScope != "" {
		handler = requireScopeForCalls(o.RequireScope, metadataURL, handler)
	}
	protected := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metadataURL})(handler)
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.DPoP && !p.dpop(w, r, as, metadataURL) {
			return
		}
		if r.Header.Get("Authorization") == "" {
			if m := jsonRPCMethod(r); slices.Contains(o.Open, m) || strings.HasPrefix(m, "notifications/") && len(o.Open) > 0 {
				handler.ServeHTTP(w, r)
				return
			}
			if o.ChallengeScope != "" {
				w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+metadataURL+`", scope="`+o.ChallengeScope+`"`)
				http.Error(w, "token needed", http.StatusUnauthorized)
				return
			}
			protected.ServeHTTP(w, r)
			return
		}
		protected.ServeHTTP(&refusalCounter{ResponseWriter: w, n: &p.Refusals}, r)
	}))
	return p
}

// dpop checks a request's DPoP presentation: a DPoP-scheme token with a valid proof becomes
// a bearer token for the handlers behind; a bound token presented otherwise is refused. It
// reports whether the request goes on.
func (p *ProtectedMCP) dpop(w http.ResponseWriter, r *http.Request, as *AuthServer, metadataURL string) bool {
	challenge := `DPoP resource_metadata="` + metadataURL + `",`
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	switch {
	case strings.EqualFold(scheme, "dpop"):
		p.DPoPRequests.Add(1)
		jkt, err := p.Proofs.check(r.Header.Get("DPoP"), r.Method, p.Endpoint, tok, as.clock.Now())
		if err == nil && jkt != as.BoundKey(tok) {
			err = fmt.Errorf("the proof's key is not the token's")
		}
		if err != nil {
			dpopRefusal(w, &p.Proofs, err, http.StatusUnauthorized, challenge)
			return false
		}
		r.Header.Set("Authorization", "Bearer "+tok)
	case tok != "" && as.BoundKey(tok) != "":
		w.Header().Set("WWW-Authenticate", challenge+` error="invalid_token"`)
		http.Error(w, "a DPoP-bound token presented as a bearer token", http.StatusUnauthorized)
		return false
	}
	return true
}

// jsonRPCMethod reads the method of a POSTed JSON-RPC message, leaving the body readable.
func jsonRPCMethod(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &msg)
	return msg.Method
}

// refusalCounter counts 401 answers.
type refusalCounter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *refusalCounter) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		c.n.Add(1)
	}
	c.ResponseWriter.WriteHeader(code)
}

// Flush and Unwrap let the SDK stream through the counter.
func (c *refusalCounter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *refusalCounter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// requireScopeForCalls answers a tools/call whose token lacks scope with 403 insufficient_scope
// naming the token's scopes plus scope (MCP 2025-11-25 "Scope Challenge Handling").
func requireScopeForCalls(scope, metadataURL string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &msg)
			ti := auth.TokenInfoFromContext(r.Context())
			if msg.Method == "tools/call" && ti != nil && !slices.Contains(ti.Scopes, scope) {
				need := strings.Join(append(slices.DeleteFunc(slices.Clone(ti.Scopes), func(s string) bool { return s == "offline_access" }), scope), " ")
				ch := `Bearer error="insufficient_scope", scope="` + need + `"`
				if metadataURL != "" {
					ch += `, resource_metadata="` + metadataURL + `"`
				}
				w.Header().Set("WWW-Authenticate", ch)
				http.Error(w, "insufficient scope", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Client returns an HTTP client that trusts the server's certificate (with TLS) under the name
// example.com, whatever address it listens on.
func (p *ProtectedMCP) Client() *http.Client {
	c := p.srv.Client()
	if t, ok := c.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
		t.TLSClientConfig.ServerName = "example.com"
	}
	return c
}

// Close stops the server.
func (p *ProtectedMCP) Close() { p.srv.Close() }

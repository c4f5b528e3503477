package demoserver

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTP endpoints of [Server.Handler].
const (
	// PathStreamable serves the streamable HTTP transport (POST, GET and DELETE).
	PathStreamable = "/mcp"
	// PathSSE serves the 2024-11-05 HTTP+SSE transport: GET opens the event stream, whose
	// first "endpoint" event names PathSSE?sessionid=… for the client's POSTs.
	PathSSE = "/sse"
	// PathResourceMetadata serves the RFC 9728 protected-resource metadata of the origin; the
	// documents of each endpoint are at PathResourceMetadata + PathStreamable and + PathSSE.
	// They exist only when a token is configured.
	PathResourceMetadata = "/.well-known/oauth-protected-resource"
	// PathHealth answers 200 "ok" without authentication.
	PathHealth = "/healthz"
)

// realm names the protection space in the WWW-Authenticate challenge.
const realm = "packbot-demo"

// Handler returns the HTTP face of the server: streamable HTTP at [PathStreamable], SSE at
// [PathSSE], and, with a token configured, the protected-resource metadata at
// [PathResourceMetadata]. Every session of every transport uses the same ledger and tools.
// With a token configured, a request to /mcp or /sse without "Authorization: Bearer <token>"
// gets 401 and a challenge: WWW-Authenticate: Bearer realm="packbot-demo",
// resource_metadata="<origin>/.well-known/oauth-protected-resource/mcp" (plus
// error="invalid_token" when a wrong token was sent).
func (s *Server) Handler() http.Handler {
	s.handlerOnce.Do(func() {
		getServer := func(*http.Request) *mcp.Server { return s.mcp }
		streamable := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			Stateless: s.opts.Stateless,
			Logger:    sdkLogger(s.logger),
		})
		sse := mcp.NewSSEHandler(getServer, nil)

		mux := http.NewServeMux()
		mux.Handle(PathStreamable, s.requireToken(streamable, PathStreamable))
		mux.Handle(PathSSE, s.requireToken(sse, PathSSE))
		mux.HandleFunc("GET "+PathHealth, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintln(w, "ok")
		})
		if s.opts.Token != "" {
			mux.Handle("GET "+PathResourceMetadata, s.resourceMetadata(""))
			mux.Handle("GET "+PathResourceMetadata+PathStreamable, s.resourceMetadata(PathStreamable))
			mux.Handle("GET "+PathResourceMetadata+PathSSE, s.resourceMetadata(PathSSE))
		}
		s.handler = mux
	})
	return s.handler
}

// requireToken lets a request through when no token is configured or when it carries the
// token as a bearer credential (compared in constant time), and otherwise answers 401 with the
// RFC 6750 challenge pointing at the endpoint's RFC 9728 metadata.
func (s *Server) requireToken(next http.Handler, path string) http.Handler {
	if s.opts.Token == "" {
		return next
	}
	want := []byte(s.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r)
		if ok && subtle.ConstantTimeCompare([]byte(got), want) == 1 {
			next.ServeHTTP(w, r)
			return
		}
		challenge := fmt.Sprintf(`Bearer realm=%q, resource_metadata=%q`, realm, origin(r)+PathResourceMetadata+path)
		msg := "missing bearer token"
		if ok {
			challenge += `, error="invalid_token", error_description="the bearer token is not valid"`
			msg = "invalid bearer token"
		}
		s.logger.DebugContext(r.Context(), "request refused", "path", r.URL.Path, "reason", msg)
		w.Header().Set("WWW-Authenticate", challenge)
		http.Error(w, msg, http.StatusUnauthorized)
	})
}

// bearer returns the credentials of an "Authorization: Bearer …" header.
func bearer(r *http.Request) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !found || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// resourceMetadata serves the RFC 9728 document of the resource at path (the origin itself
// when path is empty). It names no authorization server: the token is configured, not issued.
func (s *Server) resourceMetadata(path string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc := struct {
			Resource               string   `json:"resource"`
			BearerMethodsSupported []string `json:"bearer_methods_supported"`
			ResourceName           string   `json:"resource_name"`
		}{origin(r) + path, []string{"header"}, "packbot demo bank"}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if err := json.NewEncoder(w).Encode(doc); err != nil {
			s.logger.DebugContext(r.Context(), "write resource metadata", "err", err)
		}
	})
}

// origin is the scheme and host the request was addressed to.
func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

package oauth

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/packbot/packbot/packs"
)

// DefaultClientMetadataPath is the path packbot serves [Manager.ClientMetadataHandler] on, unless
// cmd chooses another (Config.ClientMetadataURL must end with the path actually served).
const DefaultClientMetadataPath = "/oauth/client-metadata.json"

// clientMetadata is packbot's Client ID Metadata Document (MCP 2025-11-25 authorization,
// draft-ietf-oauth-client-id-metadata-document): the client metadata of RFC 7591 §2, published at
// the URL that is also the client_id. packbot is a public client: it has no secret and relies on
// PKCE, so token_endpoint_auth_method is none.
func (m *Manager) clientMetadata() map[string]any {
	return map[string]any{
		"client_id":                  m.metadataURL,
		"client_name":                m.clientName,
		"redirect_uris":              []string{m.callbackURL},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": authNone,
		"application_type":           "web",
	}
}

// ClientMetadataHandler serves packbot's Client ID Metadata Document as JSON on GET. cmd mounts
// it at Config.ClientMetadataURL's path (DefaultClientMetadataPath) on packbot's public HTTP
// server; authorization servers that support Client ID Metadata Documents fetch it when a user
// signs in. It holds nothing secret. Without Config.ClientMetadataURL it answers 404.
func (m *Manager) ClientMetadataHandler() http.Handler {
	if m.metadataURL == "" {
		return http.NotFoundHandler()
	}
	return metadataHandler(m.clientMetadata)
}

// metadataHandler serves the document doc returns as JSON on GET and HEAD.
func metadataHandler(doc func() map[string]any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		b, err := json.Marshal(doc())
		if err != nil {
			http.Error(w, "encode client metadata", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(b)
	})
}

// DefaultNativeClientMetadataPath is where packbot serve publishes the Client ID Metadata
// Document of its command-line client ([NativeClientMetadataHandler]), which packbot mcp smoke
// uses as client_id when PACKBOT_PUBLIC_URL serves it.
const DefaultNativeClientMetadataPath = "/oauth/cli-client-metadata.json"

// NativeClientMetadataHandler serves the Client ID Metadata Document of packbot's command-line
// client (packbot mcp smoke, a [Loopback]) at docURL, which is also its client_id: a native public
// client whose redirect URI is the loopback callback, on any port (RFC 8252 §7.3). It is
// another client than the bot's own ([Manager.ClientMetadataHandler]), so an authorization
// server tells the two apart.
func NativeClientMetadataHandler(docURL, clientName string) http.Handler {
	if clientName == "" {
		clientName = DefaultClientName
	}
	doc := map[string]any{
		"client_id":                  docURL,
		"client_name":                clientName + " (command line)",
		"redirect_uris":              []string{"http://127.0.0.1" + LoopbackCallbackPath},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": authNone,
		"application_type":           "native",
	}
	return metadataHandler(func() map[string]any { return doc })
}

// metadataClient returns the client packbot is when asm supports Client ID Metadata Documents
// and packbot has one for server s (the pack's clientMetadataUrl, else the one packbot serves):
// its document's URL is the client_id, with no secret and nothing to register or cache.
func (m *Manager) metadataClient(asm *oauthex.AuthServerMeta, s packs.Server) (client, bool) {
	doc := m.metadataURL
	if a := s.Authentication; a != nil && a.ClientMetadataURL != "" {
		doc = a.ClientMetadataURL // the pack's own document for this server
	}
	if doc == "" || !asm.ClientIDMetadataDocumentSupported {
		return client{}, false
	}
	if s := asm.TokenEndpointAuthMethodsSupported; len(s) > 0 && !slices.Contains(s, authNone) {
		return client{}, false // no public clients there: register (with a secret) instead
	}
	// A document on http://localhost (a development PACKBOT_PUBLIC_URL) can only be fetched by an
	// authorization server on the same machine: for any other, register instead.
	mu, err1 := url.Parse(doc)
	iu, err2 := url.Parse(asm.Issuer)
	if err1 != nil || err2 != nil || (mu.Scheme != "https" && !loopbackHost(iu.Hostname())) {
		return client{}, false
	}
	return client{ID: doc, Method: authNone}, true
}

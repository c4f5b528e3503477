package oauth

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.metadataURL == "" {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		b, err := json.Marshal(m.clientMetadata())
		if err != nil {
			http.Error(w, "encode client metadata", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(b)
	})
}

// metadataClient returns the client packbot is when asm supports Client ID Metadata Documents
// and packbot serves one: its document's URL is the client_id, with no secret and nothing to
// register or cache.
func (m *Manager) metadataClient(asm *oauthex.AuthServerMeta) (client, bool) {
	if m.metadataURL == "" || !asm.ClientIDMetadataDocumentSupported {
		return client{}, false
	}
	if s := asm.TokenEndpointAuthMethodsSupported; len(s) > 0 && !slices.Contains(s, authNone) {
		return client{}, false // no public clients there: register (with a secret) instead
	}
	// A document on http://localhost (a development PACKBOT_PUBLIC_URL) can only be fetched by an
	// authorization server on the same machine: for any other, register instead.
	mu, err1 := url.Parse(m.metadataURL)
	iu, err2 := url.Parse(asm.Issuer)
	if err1 != nil || err2 != nil || (mu.Scheme != "https" && !loopbackHost(iu.Hostname())) {
		return client{}, false
	}
	return client{ID: m.metadataURL, Method: authNone}, true
}

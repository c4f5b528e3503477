package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// Protocol revisions the probe speaks, newest first, as go-sdk's client does.
const (
	probeVersion     = "2026-07-28" // stateless: server/discover, then requests with _meta
	probeLegacy      = "2025-11-25" // initialize handshake, then a session
	headerProtocol   = "MCP-Protocol-Version"
	headerMethod     = "Mcp-Method"
	headerSession    = "Mcp-Session-Id"
	probeBodyLimit   = 4 << 10
	metaProtocol     = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo   = "io.modelcontextprotocol/clientInfo"
	metaCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// probeAnswer is what one probe request got: the challenges of a 401 or 403, or else whether
// the server took the request (2xx) and the session it opened.
type probeAnswer struct {
	challenges []oauthex.Challenge
	refused    bool // 401 or 403
	ok         bool // 2xx without a JSON-RPC error
	session    string
}

// probe meets the server the way packbot's MCP client does, without a token, until a request
// is refused with 401 or 403, and returns that answer's challenges: server/discover with the
// MCP-Protocol-Version header and _meta of 2026-07-28, then tools/list the same way; a server
// that does not speak 2026-07-28 gets the 2025-11-25 initialize, then (in the session it opened)
// tools/list. A server that lets every one of them through gives none, and discovery falls back
// to the well-known URLs. An SSE server gets the GET that opens its stream. The server's URL is
// the pack's, so the plain client is used.
func (m *Manager) probe(ctx context.Context, s packs.Server) ([]oauthex.Challenge, error) {
	ctx, cancel := m.withTimeout(ctx)
	defer cancel()
	if s.Transport == packs.TransportSSE {
		a, err := m.probeRequest(ctx, s, http.MethodGet, "", nil)
		return a.challenges, err
	}
	a, err := m.probeRequest(ctx, s, http.MethodPost, "server/discover", probeHeaders(probeVersion, ""))
	if err != nil || a.refused {
		return a.challenges, err
	}
	if a.ok {
		a, err = m.probeRequest(ctx, s, http.MethodPost, "tools/list", probeHeaders(probeVersion, ""))
		return a.challenges, err
	}
	// Not a 2026-07-28 server: the handshake of 2025-11-25, then a request in its session.
	a, err = m.probeRequest(ctx, s, http.MethodPost, "initialize", nil)
	if err != nil || a.refused || !a.ok {
		return a.challenges, err
	}
	h := probeHeaders(probeLegacy, a.session)
	if _, err := m.probeRequest(ctx, s, http.MethodPost, "notifications/initialized", h); err != nil {
		return nil, err
	}
	b, err := m.probeRequest(ctx, s, http.MethodPost, "tools/list", h)
	if a.session != "" {
		m.endProbeSession(ctx, s, a.session)
	}
	return b.challenges, err
}

// challenges parses challenge, the WWW-Authenticate header of a refused request, or, when it is
// empty, probes the server for one.
func (m *Manager) challenges(ctx context.Context, s packs.Server, challenge string) ([]oauthex.Challenge, error) {
	if challenge == "" {
		return m.probe(ctx, s)
	}
	cs, err := oauthex.ParseWWWAuthenticate([]string{challenge})
	if err != nil {
		m.log.WarnContext(ctx, "oauth: malformed WWW-Authenticate of a refused request; probing instead", "server", s.Name, "err", err)
		return m.probe(ctx, s)
	}
	return cs, nil
}

// probeHeaders are the headers of a request at protocol version (with its session, if any).
func probeHeaders(version, session string) map[string]string {
	h := map[string]string{headerProtocol: version}
	if session != "" {
		h[headerSession] = session
	}
	return h
}

// probeRequest sends one request of the probe. method "" is the SSE GET.
func (m *Manager) probeRequest(ctx context.Context, s packs.Server, verb, method string, extra map[string]string) (probeAnswer, error) {
	var body io.Reader
	if method != "" {
		body = strings.NewReader(m.probeBody(method, extra[headerProtocol]))
	}
	req, err := http.NewRequestWithContext(ctx, verb, s.URL, body)
	if err != nil {
		return probeAnswer{}, fmt.Errorf("probe %s: %w", s.URL, err)
	}
	if method == "" {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if extra[headerProtocol] == probeVersion {
			req.Header.Set(headerMethod, method)
		}
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return probeAnswer{}, fmt.Errorf("probe %s: %w: %w", s.URL, mcp.ErrUnreachable, err)
	}
	defer func() { _ = resp.Body.Close() }() // without reading an open stream, which may never end
	a := probeAnswer{session: resp.Header.Get(headerSession)}
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		a.refused = true
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, probeBodyLimit)) // a short error text
		a.challenges, err = oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
		if err != nil {
			m.log.WarnContext(ctx, "oauth probe: malformed WWW-Authenticate", "server", s.Name, "err", err)
			a.challenges = nil
		}
		return a, nil
	case code >= 200 && code <= 299:
		a.ok = !jsonRPCError(resp)
	}
	if method != "notifications/initialized" && !a.ok {
		m.log.DebugContext(ctx, "oauth probe got no challenge", "server", s.Name, "request", cmpOr(method, "GET"), "status", resp.StatusCode)
	}
	return a, nil
}

// probeBody is the JSON-RPC request of method, with the _meta that 2026-07-28 requires.
func (m *Manager) probeBody(method, version string) string {
	info := map[string]string{"name": m.clientName, "version": "oauth-probe"}
	var msg map[string]any
	switch {
	case method == "initialize":
		msg = map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": map[string]any{
			"protocolVersion": probeLegacy, "capabilities": map[string]any{}, "clientInfo": info}}
	case strings.HasPrefix(method, "notifications/"):
		msg = map[string]any{"jsonrpc": "2.0", "method": method}
	case version == probeVersion:
		msg = map[string]any{"jsonrpc": "2.0", "id": 2, "method": method, "params": map[string]any{"_meta": map[string]any{
			metaProtocol: probeVersion, metaClientInfo: info, metaCapabilities: map[string]any{}}}}
	default:
		msg = map[string]any{"jsonrpc": "2.0", "id": 2, "method": method, "params": map[string]any{}}
	}
	b, _ := json.Marshal(msg) // maps of strings always encode
	return string(b)
}

// jsonRPCError reports whether a JSON answer is a JSON-RPC error (a server that does not know
// server/discover, or refuses the protocol version). An event stream counts as an answer.
func jsonRPCError(resp *http.Response) bool {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return false
	}
	var msg struct {
		Error *json.RawMessage `json:"error"`
	}
	return json.NewDecoder(io.LimitReader(resp.Body, probeBodyLimit)).Decode(&msg) != nil || msg.Error != nil
}

// endProbeSession ends the session a 2025-11-25 probe opened (best effort).
func (m *Manager) endProbeSession(ctx context.Context, s packs.Server, session string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.URL, nil)
	if err != nil {
		return
	}
	req.Header.Set(headerSession, session)
	req.Header.Set(headerProtocol, probeLegacy)
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	if resp, err := m.http.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

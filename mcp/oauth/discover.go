package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/packbot/packbot/packs"
)

// ErrResourceMismatch: the protected-resource metadata found for an MCP server describes
// another resource. packbot does not go on with another document or guess the authorization
// server: a token obtained that way would be for the wrong resource, or the metadata was
// planted.
var ErrResourceMismatch = errors.New("protected-resource metadata is for another resource")

// discovery is what Begin learns about a server's authorization.
type discovery struct {
	prm             *oauthex.ProtectedResourceMetadata
	asm             *authServer
	challengeScopes []string
	// legacy: the server publishes no protected-resource metadata, and its origin is taken as
	// the authorization server (MCP 2025-03-26).
	legacy bool
	// client makes every request about this server's authorization (guarded, see [guard]);
	// class is the kind of address the MCP server is on.
	client *http.Client
	class  netClass
	// issuer is the authorization server chosen.
	issuer string
}

// discover finds the authorization server of a user-controlled server ([Manager.findAuthServer])
// and checks that users can sign in there: PKCE S256, an authorization and a token endpoint, and
// every endpoint packbot calls guarded.
func (m *Manager) discover(ctx context.Context, s packs.Server, challenge string) (discovery, error) {
	d, err := m.findAuthServer(ctx, s, false, challenge)
	if err != nil {
		return d, err
	}
	issuer := d.issuer
	switch {
	case !slices.Contains(d.asm.CodeChallengeMethodsSupported, "S256"):
		return d, fmt.Errorf("authorization server %s does not support PKCE S256", issuer)
	case d.asm.AuthorizationEndpoint == "" || d.asm.TokenEndpoint == "":
		return d, fmt.Errorf("authorization server %s: metadata lacks authorization or token endpoint", issuer)
	}
	// The browser opens the authorization endpoint; packbot itself calls the others.
	if err := checkScheme(d.asm.AuthorizationEndpoint, "authorization_endpoint"); err != nil {
		return d, err
	}
	for what, u := range map[string]string{"token_endpoint": d.asm.TokenEndpoint,
		"registration_endpoint": d.asm.RegistrationEndpoint, "revocation_endpoint": d.asm.RevocationEndpoint} {
		if u == "" {
			continue
		}
		if err := checkURL(u, d.class, what); err != nil {
			return d, err
		}
		if err := m.checkNonPublic(u, d.class, s.URL, d.issuer, what); err != nil {
			return d, err
		}
	}
	return d, nil
}

// findAuthServer takes the challenge of a request the server refused (or, without one, probes
// the server without a token: [Manager.probe]) and follows it to the
// protected-resource metadata (RFC 9728 §5.1), else the well-known URLs (§3.1), then the
// authorization server's metadata (RFC 8414, then OpenID Connect discovery). A server with no
// protected-resource metadata at all gets the MCP 2025-03-26 treatment: its origin is the
// authorization server, with the default endpoints /authorize, /token and /register when that
// publishes no metadata either — unless packIssuer is set: then the pack's issuer is the
// authorization server (its metadata required). Every URL the server or a document names passes
// [checkURL] first, and every connection the guard's dialer.
func (m *Manager) findAuthServer(ctx context.Context, s packs.Server, packIssuerFallback bool, challenge string) (discovery, error) {
	var d discovery
	hc, class, err := m.remote(ctx, s.URL)
	if err != nil {
		return d, err
	}
	d.client, d.class = hc, class
	challenges, err := m.challenges(ctx, s, challenge)
	if err != nil {
		return d, err
	}
	var metadataURL string
	for _, c := range challenges {
		if c.Scheme != "bearer" && c.Scheme != "dpop" { // a DPoP-only server challenges with its own scheme (RFC 9449 §7.1)
			continue
		}
		if metadataURL == "" {
			metadataURL = c.Params["resource_metadata"]
		}
		if d.challengeScopes == nil && c.Params["scope"] != "" {
			d.challengeScopes = strings.Fields(c.Params["scope"])
		}
	}
	packIssuer := ""
	if s.Authentication != nil {
		packIssuer = s.Authentication.Issuer
	}
	d.prm, err = m.resourceMetadata(ctx, hc, class, s.URL, metadataURL, packIssuer)
	if err != nil {
		return d, err
	}
	su, _ := url.Parse(s.URL) // checked by New
	switch {
	case d.prm == nil && packIssuerFallback && packIssuer != "":
		d.prm = &oauthex.ProtectedResourceMetadata{Resource: s.URL, AuthorizationServers: []string{packIssuer}}
		m.log.InfoContext(ctx, "oauth: no protected-resource metadata, using the pack's authentication.issuer",
			"server", s.Name, "issuer", packIssuer)
	case d.prm == nil:
		d.legacy = true
		o := &url.URL{Scheme: su.Scheme, Host: su.Host}
		d.prm = &oauthex.ProtectedResourceMetadata{Resource: s.URL, AuthorizationServers: []string{o.String()}}
		m.log.InfoContext(ctx, "oauth: no protected-resource metadata, using the server's origin as authorization server (MCP 2025-03-26)",
			"server", s.Name, "issuer", o.String())
	}
	issuer, err := chooseIssuer(d.prm.AuthorizationServers, packIssuer, s.URL)
	if err != nil {
		return d, err
	}
	d.issuer = issuer
	if err := checkURL(issuer, class, "authorization server"); err != nil {
		return d, err
	}
	if err := m.checkNonPublic(issuer, class, s.URL, packIssuer, "authorization server"); err != nil {
		return d, err
	}
	d.asm, err = m.authServerMetadata(ctx, hc, issuer)
	if err != nil {
		return d, err
	}
	if d.asm == nil {
		if !d.legacy {
			return d, fmt.Errorf("authorization server %s publishes no metadata (RFC 8414 or OpenID Connect discovery)", issuer)
		}
		// MCP 2025-03-26 §2.3.3: the default endpoints at the server's origin. PKCE is
		// mandatory there, so S256 is assumed.
		d.asm = &authServer{AuthServerMeta: oauthex.AuthServerMeta{Issuer: issuer,
			AuthorizationEndpoint: issuer + "/authorize", TokenEndpoint: issuer + "/token",
			RegistrationEndpoint: issuer + "/register", CodeChallengeMethodsSupported: []string{"S256"}}}
		m.log.InfoContext(ctx, "oauth: no authorization server metadata, using the default endpoints (MCP 2025-03-26)",
			"server", s.Name, "issuer", issuer)
	}
	return d, nil
}

// checkScheme refuses what a browser must not be sent to: anything but https (http on loopback).
func checkScheme(raw, what string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !(u.Scheme == "https" || (u.Scheme == "http" && loopbackHost(u.Hostname()))) {
		return fmt.Errorf("%w: %s %q is not an https URL", ErrDiscoveryRefused, what, raw)
	}
	return nil
}

// chooseIssuer picks the authorization server: the pack's issuer when it names one (and then the
// metadata must list it), else the first one listed.
func chooseIssuer(listed []string, packIssuer, serverURL string) (string, error) {
	if len(listed) == 0 {
		return "", fmt.Errorf("protected-resource metadata of %s names no authorization server", serverURL)
	}
	if packIssuer == "" {
		return listed[0], nil
	}
	for _, a := range listed {
		if strings.TrimSuffix(a, "/") == strings.TrimSuffix(packIssuer, "/") {
			return a, nil
		}
	}
	return "", fmt.Errorf("%w: the protected-resource metadata of %s names authorization servers %q, not the pack's authentication.issuer %q; fix the issuer in the pack or the server's metadata",
		ErrDiscoveryRefused, serverURL, listed, packIssuer)
}

// resourceMetadata fetches the protected-resource metadata: from the challenge's
// resource_metadata URL, else at the well-known URL with the server's path inserted, else at the
// root (RFC 9728 §3.1, MCP 2025-11-25). It returns nil, nil when none of them exists (a 4xx),
// for the 2025-03-26 fallback. A document for another resource is an error wrapping
// ErrResourceMismatch, whatever the other URLs hold.
//
// The challenge's URL must be on the server's own origin, or on the origin of the pack's
// issuer: otherwise any MCP server could make packbot fetch any URL (blind SSRF).
func (m *Manager) resourceMetadata(ctx context.Context, hc *http.Client, class netClass, serverURL, fromChallenge, packIssuer string) (*oauthex.ProtectedResourceMetadata, error) {
	type candidate struct {
		url       string
		resources []string // what the document's resource may be
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	o := url.URL{Scheme: u.Scheme, Host: u.Host}
	var cands []candidate
	if fromChallenge != "" {
		if !sameOrigin(fromChallenge, serverURL) && (packIssuer == "" || !sameOrigin(fromChallenge, packIssuer)) {
			return nil, fmt.Errorf("%w: the server's 401 names resource_metadata %s, which is not on the server's origin %s; a server may only point at its own metadata (if its authorization server publishes it, name that issuer in the pack's authentication.issuer)",
				ErrDiscoveryRefused, redact(fromChallenge), o.String())
		}
		cands = append(cands, candidate{fromChallenge, []string{serverURL}})
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		w := o
		w.Path = "/.well-known/oauth-protected-resource/" + p
		cands = append(cands, candidate{w.String(), []string{serverURL}})
	}
	w := o
	w.Path = "/.well-known/oauth-protected-resource"
	cands = append(cands, candidate{w.String(), []string{serverURL, o.String()}})

	for _, c := range cands {
		if err := checkURL(c.url, class, "resource_metadata"); err != nil {
			return nil, err
		}
		var prm oauthex.ProtectedResourceMetadata
		found, err := m.getJSON(ctx, noRedirects(hc), c.url, &prm)
		if err != nil {
			return nil, fmt.Errorf("protected-resource metadata: %w", err)
		}
		if !found {
			continue
		}
		if !slices.ContainsFunc(c.resources, func(r string) bool { return sameResource(prm.Resource, r) }) {
			return nil, fmt.Errorf("%w: %s says resource %q, but the MCP server is %q; fix the server's metadata or the pack's url (packbot does not try another authorization server)",
				ErrResourceMismatch, c.url, prm.Resource, serverURL)
		}
		for i, a := range prm.AuthorizationServers {
			if err := checkURL(a, class, fmt.Sprintf("authorization_servers[%d]", i)); err != nil {
				return nil, err
			}
		}
		return &prm, nil
	}
	return nil, nil
}

// sameResource compares resource identifiers, ignoring one trailing slash.
func sameResource(a, b string) bool {
	return a != "" && strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// authServerMetadata fetches the metadata of issuer (RFC 8414 with path insertion, then
// OpenID Connect discovery; MCP 2025-11-25). It returns nil, nil when none exists.
func (m *Manager) authServerMetadata(ctx context.Context, hc *http.Client, issuer string) (*authServer, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("authorization server %q: %w", issuer, err)
	}
	var urls []string
	if p := strings.Trim(u.Path, "/"); p == "" {
		for _, path := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
			urls = append(urls, (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: path}).String())
		}
	} else {
		for _, path := range []string{"/.well-known/oauth-authorization-server/" + p, "/.well-known/openid-configuration/" + p, "/" + p + "/.well-known/openid-configuration"} {
			urls = append(urls, (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: path}).String())
		}
	}
	for _, mu := range urls {
		var asm authServer
		found, err := m.getJSON(ctx, hc, mu, &asm)
		if err != nil {
			return nil, fmt.Errorf("authorization server metadata of %s: %w", issuer, err)
		}
		if !found {
			continue
		}
		if strings.TrimSuffix(asm.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			return nil, fmt.Errorf("authorization server metadata at %s names issuer %q, not %q (RFC 8414 §3.3)", mu, asm.Issuer, issuer)
		}
		return &asm, nil
	}
	return nil, nil
}

// getJSON GETs a metadata document into v with the guarded client hc. found is false when the
// server answers 4xx (no such document).
func (m *Manager) getJSON(ctx context.Context, hc *http.Client, u string, v any) (found bool, err error) {
	ctx, cancel := m.withTimeout(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, fmt.Errorf("get %s: %w", redact(u), err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("get %s: %w", redact(u), err)
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// Only a client of noRedirects stops at a redirect.
		return false, fmt.Errorf("%w: %s answers with a redirect (HTTP %d) to %s; packbot does not follow redirects for protected-resource metadata, which must be served at the URL the server's origin names",
			ErrDiscoveryRefused, redact(u), resp.StatusCode, redact(resp.Header.Get("Location")))
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return false, nil
	case resp.StatusCode != http.StatusOK:
		return false, fmt.Errorf("get %s: answered %s", redact(u), resp.Status)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return false, fmt.Errorf("get %s: content type %q is not JSON", redact(u), mt)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(v); err != nil {
		return false, fmt.Errorf("get %s: decode: %w", redact(u), err)
	}
	return true, nil
}

// noRedirects is hc stopping at the first redirect (getJSON then refuses it). Protected-resource
// metadata comes from the server's own origin (or the pack's issuer's), and a redirect would take
// packbot anywhere else of the same kind of address, query string included.
func noRedirects(hc *http.Client) *http.Client {
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// redact shows a URL without user info or query, which a hostile server might fill with junk.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(malformed URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

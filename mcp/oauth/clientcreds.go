package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store/secret"
)

// ModeClientCredentials is the value of a server's authentication.mode with which packbot signs
// in as itself ([Machine]).
const ModeClientCredentials = packs.AuthClientCredentials

// MachineConfig holds the dependencies of a [Machine]. Every field but Servers has a default.
type MachineConfig struct {
	// Servers are the pack's MCP servers; those whose Authentication.Mode is client_credentials
	// are handled, the others ignored.
	Servers []packs.Server
	// HTTPClient, Timeout, Logger, Now, RefreshBefore and ClientName are as in [Config]: the
	// probe of each MCP server goes through HTTPClient, every other request through the SSRF
	// guard built on its transport.
	HTTPClient    *http.Client
	Timeout       time.Duration
	Logger        *slog.Logger
	Now           func() time.Time
	RefreshBefore time.Duration
	ClientName    string
	// CommandLine: the machine client of a command-line run on the deployer's own machine
	// (packbot mcp smoke), where a server on loopback may name an authorization server on
	// another loopback port without the pack's issuer (see ErrDiscoveryRefused).
	CommandLine bool
}

// Machine gets packbot's own access tokens for admin-controlled MCP servers whose pack entry
// says `authentication: {mode: client_credentials}`: the OAuth 2.1 client-credentials grant
// (RFC 6749 §4.4), with the client authenticated by client_secret_basic, client_secret_post or
// private_key_jwt (RFC 7523: a JWT signed ES256 with an EC P-256 key or RS256 with an RSA key).
// The token endpoint is discovered as for users' sign-in (protected-resource metadata from the
// server's 401, then authorization server metadata, behind the same SSRF guard and issuer rule);
// a server without protected-resource metadata uses the pack's authentication.issuer when it
// names one. Tokens are kept in memory only: each replica gets its own, and a new one is
// requested when the current one is within RefreshBefore (or half its lifetime) of expiry.
//
// Machine implements [mcp.MachineAuthorizer]. All methods are safe for concurrent use; for one
// server, one token request runs at a time and the callers waiting for it share its token.
type Machine struct {
	d       *Manager // only its discovery and token request methods: no store, no callback
	servers map[string]*machineServer
}

// machineServer is what Machine knows of one server.
type machineServer struct {
	srv    packs.Server
	id     string       // client id
	method string       // authBasic, authPost or packs.PrivateKeyJWT
	secret secret.Value // client_secret_basic and client_secret_post only
	key    assertionKey // private_key_jwt only
	// assertionFile (workload_identity only) holds the workload's JWT, presented with the
	// jwt-bearer grant instead of the client-credentials grant.
	assertionFile string
	lock          chan struct{} // holds one token while a token request runs

	mu sync.Mutex // guards what follows
	ep *machineEndpoint
	// dpopLocked is the key of its DPoP-bound tokens, made at the first token request of a
	// server whose authorization server issues them.
	dpopLocked *dpopKey
	tok        machineToken
	// refused is the last refusal of packbot's credentials by the authorization server, given
	// again without asking for renewQuiet after refusedAt: a wrong secret must not cost a token
	// request per HTTP request (nor get the client locked out).
	refused   error
	refusedAt time.Time
}

// machineEndpoint is what discovery found; kept until the server is asked again.
type machineEndpoint struct {
	issuer, tokenEndpoint, resource string
	scopes                          []string
	hc                              *http.Client
	dpop                            bool // the authorization server issues DPoP-bound tokens
}

// machineToken is an access token and when it expires (zero: not said).
type machineToken struct {
	access   secret.Value
	expiry   time.Time
	lifetime time.Duration
	obtained time.Time
	renewed  bool // obtained by Renew, after the server refused the one before
	bound    bool // to the server's DPoP key (RFC 9449)
}

// renewQuiet is how long after a renewal a refused token is not renewed again, and how long a
// refusal of packbot's credentials is given again without asking: a server that refuses every
// token, or a wrong secret, would otherwise cost a token request per HTTP request.
const renewQuiet = time.Minute

// NewMachine checks cfg and returns a Machine. It reads the private key files of the
// private_key_jwt servers (so that a key packbot cannot use stops it at start), and does no
// network I/O.
func NewMachine(cfg MachineConfig) (*Machine, error) {
	d := &Manager{http: cfg.HTTPClient, timeout: cfg.Timeout, log: cfg.Logger, now: cfg.Now,
		refreshBefore: cfg.RefreshBefore, clientName: cfg.ClientName, native: cfg.CommandLine}
	d.fillDefaults()
	m := &Machine{d: d, servers: make(map[string]*machineServer)}
	for _, s := range cfg.Servers {
		if !s.Enabled || !s.MachineAuth() {
			continue
		}
		ms, err := newMachineServer(s)
		if err != nil {
			return nil, fmt.Errorf("new oauth machine: MCP server %s: %w", s.Name, err)
		}
		if _, dup := m.servers[s.Name]; dup {
			return nil, fmt.Errorf("new oauth machine: server %q is listed twice", s.Name)
		}
		m.servers[s.Name] = ms
	}
	return m, nil
}

func newMachineServer(s packs.Server) (*machineServer, error) {
	a := s.Authentication
	if err := checkMachineServer(s); err != nil {
		return nil, err
	}
	if a.Mode == packs.AuthWorkloadIdentity {
		return newWorkloadServer(s)
	}
	if a.ClientID == "" {
		return nil, errors.New("authentication.clientId is empty")
	}
	ms := &machineServer{srv: s, lock: make(chan struct{}, 1), id: a.ClientID, method: a.TokenEndpointAuthMethod}
	switch ms.method {
	case "", authBasic:
		ms.method = authBasic
		fallthrough
	case authPost:
		if a.ClientSecret == "" {
			return nil, fmt.Errorf("authentication.clientSecret is empty (needed by %s)", ms.method)
		}
		ms.secret = secret.NewValue(a.ClientSecret)
	case packs.PrivateKeyJWT:
		key, err := loadAssertionKey(a.PrivateKeyFile, a.KeyID)
		if err != nil {
			return nil, fmt.Errorf("authentication.privateKeyFile: %w", err)
		}
		ms.key = key
	default:
		return nil, fmt.Errorf("authentication.tokenEndpointAuthMethod %q: use %s, %s or %s", ms.method, authBasic, authPost, packs.PrivateKeyJWT)
	}
	return ms, nil
}

// checkMachineServer refuses a server packbot cannot sign in to as itself: a user-controlled
// one, stdio, or one without an absolute HTTP(S) URL.
func checkMachineServer(s packs.Server) error {
	mode := s.Authentication.Mode
	switch {
	case s.UserControlled():
		return fmt.Errorf("%s is for admin-controlled servers (set accessMode: admin-controlled)", mode)
	case s.Transport == packs.TransportStdio:
		return fmt.Errorf("%s needs an HTTP transport, not stdio", mode)
	}
	if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("url %q is not an absolute HTTP(S) URL", s.URL)
	}
	return nil
}

// Token returns a valid access token for server, requesting one first when there is none or it
// expires within RefreshBefore (or half its lifetime, if shorter). When that request fails and
// the current token has not expired yet, the current token is returned (the next call asks
// again). Errors wrap mcp.ErrAuth when the authorization server refused packbot's credentials,
// mcp.ErrUnreachable when it or the MCP server could not be asked.
func (m *Machine) Token(ctx context.Context, server string) (string, error) {
	ms, err := m.server(server)
	if err != nil {
		return "", err
	}
	if t := ms.current(); m.fresh(t, m.d.now()) {
		return t.access.Reveal(), nil
	}
	return m.request(ctx, ms, "")
}

// Renew returns an access token other than rejected, which the MCP server refused (a 401): the
// token another caller got since, or a new one. Errors as Token, except that the refused token
// is never returned; a token that was itself obtained by Renew less than a minute ago is not
// renewed again (an error wrapping mcp.ErrAuth says the server refuses new tokens).
func (m *Machine) Renew(ctx context.Context, server, rejected string) (string, error) {
	ms, err := m.server(server)
	if err != nil {
		return "", err
	}
	return m.request(ctx, ms, rejected)
}

func (m *Machine) server(name string) (*machineServer, error) {
	ms, ok := m.servers[name]
	if !ok {
		return nil, fmt.Errorf("oauth machine token: server %q has no client_credentials authentication: %w", name, mcp.ErrUnknownServer)
	}
	return ms, nil
}

func (ms *machineServer) current() machineToken {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.tok
}

// fresh reports whether t may be used at now without asking for another.
func (m *Machine) fresh(t machineToken, now time.Time) bool {
	if t.access.IsZero() {
		return false
	}
	if t.expiry.IsZero() {
		return true // the server did not say: use it until it is refused
	}
	margin := m.d.refreshBefore
	if half := t.lifetime / 2; t.lifetime > 0 && half < margin {
		margin = half
	}
	return now.Add(margin).Before(t.expiry)
}

// request gets a token under the server's lock: the current one when another caller got a
// usable one meanwhile (other than rejected, when renewing), else a new one.
func (m *Machine) request(ctx context.Context, ms *machineServer, rejected string) (string, error) {
	select {
	case ms.lock <- struct{}{}:
		defer func() { <-ms.lock }()
	case <-ctx.Done():
		return "", fmt.Errorf("oauth machine token for MCP server %s: %w", ms.srv.Name, ctx.Err())
	}
	now := m.d.now()
	cur := ms.current()
	if m.fresh(cur, now) && (rejected == "" || cur.access.Reveal() != rejected) {
		return cur.access.Reveal(), nil
	}
	ms.mu.Lock()
	refused, refusedAt := ms.refused, ms.refusedAt
	ms.mu.Unlock()
	if refused != nil && now.Sub(refusedAt) < renewQuiet {
		return "", refused
	}
	if rejected != "" && cur.access.Reveal() == rejected && cur.renewed && now.Sub(cur.obtained) < renewQuiet {
		return "", fmt.Errorf("oauth machine token for MCP server %s: %w: the server refused a new token as well; not asking for another before %s (check the audience and scopes the server expects of packbot's client)",
			ms.srv.Name, mcp.ErrAuth, cur.obtained.Add(renewQuiet).Format(time.RFC3339))
	}
	tok, err := m.grant(ctx, ms, now)
	ms.mu.Lock()
	if err == nil {
		tok.renewed = rejected != ""
		ms.tok, ms.refused = tok, nil
	} else if errors.Is(err, mcp.ErrAuth) {
		ms.refused, ms.refusedAt = err, now
	}
	ms.mu.Unlock()
	if err == nil {
		return tok.access.Reveal(), nil
	}
	if rejected == "" && !errors.Is(err, mcp.ErrAuth) && !cur.access.IsZero() && now.Before(cur.expiry) {
		m.d.log.WarnContext(ctx, "oauth machine token not renewed; the current one is used until it expires",
			"server", ms.srv.Name, "expires", cur.expiry, "err", err)
		return cur.access.Reveal(), nil
	}
	return "", err
}

// grant runs the client-credentials grant: discovery (once, kept), then the token request.
func (m *Machine) grant(ctx context.Context, ms *machineServer, now time.Time) (machineToken, error) {
	name := ms.srv.Name
	ms.mu.Lock()
	ep := ms.ep
	ms.mu.Unlock()
	if ep == nil {
		var err error
		if ep, err = m.discover(ctx, ms); err != nil {
			return machineToken{}, fmt.Errorf("oauth machine token for MCP server %s: %w", name, err)
		}
		ms.mu.Lock()
		ms.ep = ep
		ms.mu.Unlock()
	}
	form := url.Values{"grant_type": {ms.grantType()}, "resource": {ep.resource}}
	if len(ep.scopes) > 0 {
		form.Set("scope", scopeString(ep.scopes))
	}
	c := client{ID: ms.id, Secret: ms.secret.Reveal(), Method: ms.method}
	if ms.assertionFile != "" {
		jwt, err := readWorkloadToken(ms.assertionFile)
		if err != nil {
			return machineToken{}, fmt.Errorf("oauth machine token for MCP server %s: %w: %w", name, mcp.ErrAuth, err)
		}
		form.Set("assertion", jwt)
	}
	if ms.method == packs.PrivateKeyJWT {
		// RFC 7523bis: the audience is the authorization server's issuer identifier; the token
		// endpoint only for a server that says it wants that (the pack's assertionAudience).
		aud := ep.issuer
		if ms.srv.Authentication.AssertionAudience == packs.AudienceTokenEndpoint {
			aud = ep.tokenEndpoint
		}
		c.assertion = func() (string, error) { return ms.key.sign(ms.id, aud, now) }
	}
	var key *dpopKey
	if ep.dpop {
		var err error
		if key, err = ms.dpopKey(); err != nil {
			return machineToken{}, fmt.Errorf("oauth machine token for MCP server %s: %w", name, err)
		}
	}
	tr, bound, err := m.d.tokenRequest(ctx, ep.hc, ep.tokenEndpoint, c, form, key)
	var ae *AuthorizationError
	switch {
	case errors.As(err, &ae) && (ae.Code == "invalid_client" || ae.Code == "unauthorized_client" || ae.Code == "invalid_scope" ||
		ae.Code == "invalid_target" || ae.Code == "invalid_grant"):
		return machineToken{}, fmt.Errorf("oauth machine token for MCP server %s: %w: the authorization server %s refused packbot's client credentials (%s; check authentication.clientId, %s and scopes in the pack): %w",
			name, mcp.ErrAuth, ep.issuer, ms.method, ms.credentialField(), err)
	case errors.As(err, &ae):
		return machineToken{}, fmt.Errorf("oauth machine token for MCP server %s: %w", name, err)
	case err != nil:
		ms.mu.Lock()
		ms.ep = nil // unreachable or moved: discover again next time
		ms.mu.Unlock()
		return machineToken{}, fmt.Errorf("oauth machine token for MCP server %s: %w: %w", name, mcp.ErrUnreachable, err)
	}
	t := machineToken{access: secret.NewValue(tr.AccessToken), obtained: now}
	t.bound = bound
	if tr.ExpiresIn > 0 {
		t.lifetime = time.Duration(tr.ExpiresIn) * time.Second
		t.expiry = now.Add(t.lifetime)
	}
	m.d.log.InfoContext(ctx, "oauth machine token obtained", "server", name, "expires", t.expiry, "scope", tr.Scope, "dpop", bound)
	return t, nil
}

// credentialField names the pack field holding the client's secret or key.
func (ms *machineServer) credentialField() string {
	if ms.assertionFile != "" {
		return "assertionFile (the workload's JWT, whose audience must be the authorization server)"
	}
	if ms.method == packs.PrivateKeyJWT {
		return "privateKeyFile (and keyId) registered with the authorization server"
	}
	return "clientSecret"
}

// discover finds the token endpoint as users' sign-in does, and checks that the authorization
// server offers what packbot needs: the client_credentials grant, the pack's client
// authentication method and, for private_key_jwt, the key's algorithm (when its metadata lists
// them).
func (m *Machine) discover(ctx context.Context, ms *machineServer) (*machineEndpoint, error) {
	d, err := m.d.findAuthServer(ctx, ms.srv, true, "")
	if err != nil {
		return nil, err
	}
	asm := d.asm
	switch {
	case asm.TokenEndpoint == "":
		return nil, fmt.Errorf("authorization server %s: metadata lacks a token endpoint", d.issuer)
	case len(asm.GrantTypesSupported) > 0 && !slices.Contains(asm.GrantTypesSupported, ms.grantType()):
		return nil, fmt.Errorf("%w: authorization server %s does not offer the %s grant (it lists %s)",
			mcp.ErrAuth, d.issuer, ms.grantType(), strings.Join(asm.GrantTypesSupported, ", "))
	case len(asm.TokenEndpointAuthMethodsSupported) > 0 && !slices.Contains(asm.TokenEndpointAuthMethodsSupported, ms.method):
		return nil, fmt.Errorf("%w: authorization server %s does not take %s (it lists %s): set authentication.tokenEndpointAuthMethod",
			mcp.ErrAuth, d.issuer, ms.method, strings.Join(asm.TokenEndpointAuthMethodsSupported, ", "))
	case ms.method == packs.PrivateKeyJWT && len(asm.TokenEndpointAuthSigningAlgValuesSupported) > 0 &&
		!slices.Contains(asm.TokenEndpointAuthSigningAlgValuesSupported, ms.key.alg):
		return nil, fmt.Errorf("%w: authorization server %s does not take %s assertions (it lists %s): use a key of another type",
			mcp.ErrAuth, d.issuer, ms.key.alg, strings.Join(asm.TokenEndpointAuthSigningAlgValuesSupported, ", "))
	}
	if err := checkURL(asm.TokenEndpoint, d.class, "token_endpoint"); err != nil {
		return nil, err
	}
	if err := m.d.checkNonPublic(asm.TokenEndpoint, d.class, ms.srv.URL, d.issuer, "token_endpoint"); err != nil {
		return nil, err
	}
	scopes := slices.Clone(ms.srv.Authentication.Scopes)
	if len(scopes) == 0 {
		scopes = d.challengeScopes
	}
	if len(scopes) == 0 {
		scopes = slices.Clone(d.prm.ScopesSupported)
	}
	m.d.log.InfoContext(ctx, "oauth machine client discovered its token endpoint", "server", ms.srv.Name,
		"issuer", d.issuer, "token_endpoint", redact(asm.TokenEndpoint), "auth_method", ms.method)
	return &machineEndpoint{issuer: cmpOr(asm.Issuer, d.issuer), tokenEndpoint: asm.TokenEndpoint, resource: d.prm.Resource,
		scopes: scopes, hc: d.client, dpop: asm.dpop()}, nil
}

// Interface guard.
var _ mcp.MachineAuthorizer = (*Machine)(nil)

package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// Defaults of [LoopbackConfig].
const (
	// DefaultLoopbackAddr listens on the IPv4 loopback address, on a port the system picks
	// (RFC 8252 §7.3 and §8.3: an IP literal, never "localhost", and never another interface).
	DefaultLoopbackAddr = "127.0.0.1:0"
	// DefaultLoopbackWait is how long a sign-in waits for the browser to come back.
	DefaultLoopbackWait = 5 * time.Minute
	// DefaultLoopbackIdentity names the command-line user's token set in the store.
	DefaultLoopbackIdentity = "packbot-cli"
)

// LoopbackCallbackPath is the path of the loopback redirect URI:
// http://127.0.0.1:<port>/callback.
const LoopbackCallbackPath = "/callback"

// ErrSignInTimeout: the browser did not come back to the loopback listener within
// LoopbackConfig.Wait.
var ErrSignInTimeout = errors.New("the browser did not come back in time")

// TokenSource says where the token of [Loopback.Token] or [Loopback.Rejected] came from.
type TokenSource string

// Token sources.
const (
	FromStore   TokenSource = "stored"    // a stored token, still fresh
	FromRefresh TokenSource = "refreshed" // a stored grant, refreshed without the browser
	FromBrowser TokenSource = "browser"   // a new authorization in the user's browser
)

// LoopbackConfig holds the dependencies of a [Loopback]. Credentials, Records, Keyring, Server
// and Prompt are required.
type LoopbackConfig struct {
	// Credentials, Records and Keyring keep the sealed tokens, as for a [Manager]. A store that
	// outlives the process lets the next sign-in reuse or refresh the tokens without the browser.
	Credentials store.Credentials
	Records     store.Records
	Keyring     *secret.Keyring
	// Server is the MCP server to sign in to (an HTTP transport). Its Authentication, when set,
	// gives the pre-registered client, scopes and issuer; its mode is taken to be oauth2.
	Server packs.Server
	// Identity names the token set in the store (default DefaultLoopbackIdentity).
	Identity string
	// ListenAddr is where the redirect listener listens (default DefaultLoopbackAddr); it must
	// be a loopback IP address. Port 0 picks a free port.
	ListenAddr string
	// Wait bounds the wait for the browser (default DefaultLoopbackWait); it is also how long
	// the authorization URL stays valid.
	Wait time.Duration
	// Prompt is given the authorization URL once the listener is ready: print it, or open a
	// browser. An error stops the sign-in.
	Prompt func(ctx context.Context, authURL string) error
	// HTTPClient, Timeout, Logger, Now and ClientName are those of [Config].
	HTTPClient *http.Client
	Timeout    time.Duration
	Logger     *slog.Logger
	Now        func() time.Time
	ClientName string
	// ClientMetadataURL, optional, is a Client ID Metadata Document describing this command-line
	// client (redirect URI http://127.0.0.1/callback, any port): where the authorization server
	// supports such documents it is the client_id, instead of a dynamic registration. The
	// server's own authentication.clientMetadataUrl takes precedence.
	ClientMetadataURL string
}

// Loopback signs the user of a command-line tool in to one OAuth-protected MCP server the way
// native apps do (RFC 8252): for each authorization it listens on a loopback port, registers
// (RFC 7591) with http://127.0.0.1:<port>/callback as redirect URI unless the server's
// authentication names a client, hands the authorization URL to Config.Prompt, waits for the
// browser's redirect and exchanges the code with PKCE. Discovery, registration, the SSRF guard,
// the code exchange and refreshing are the [Manager]'s. Its methods are not meant to be called
// concurrently: one user, one terminal.
type Loopback struct {
	cfg  LoopbackConfig
	m    *Manager // for stored tokens: never begins an authorization
	addr netip.AddrPort
	last TokenSource // where the token returned last came from
}

// NewLoopback checks cfg and returns a Loopback. It does no I/O.
func NewLoopback(cfg LoopbackConfig) (*Loopback, error) {
	if cfg.Prompt == nil {
		return nil, errors.New("new oauth loopback: Prompt is required")
	}
	a := packs.ServerAuth{}
	if cfg.Server.Authentication != nil {
		a = *cfg.Server.Authentication
	}
	a.Mode = ModeOAuth2
	cfg.Server.Authentication = &a
	if cfg.Identity == "" {
		cfg.Identity = DefaultLoopbackIdentity
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = DefaultLoopbackAddr
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultLoopbackWait
	}
	addr, err := netip.ParseAddrPort(cfg.ListenAddr)
	if err != nil || !addr.Addr().IsLoopback() {
		return nil, fmt.Errorf("new oauth loopback: listen address %q: want a loopback IP and port, such as %s", cfg.ListenAddr, DefaultLoopbackAddr)
	}
	l := &Loopback{cfg: cfg, addr: addr}
	// No authorization begins with this one, so its redirect URI is never sent.
	if l.m, err = l.manager(l.callbackURL(addr), nil); err != nil {
		return nil, fmt.Errorf("new oauth loopback: %w", err)
	}
	return l, nil
}

// manager builds a Manager of the one server with callbackURL as redirect URI, reporting the
// outcome of its callbacks to outcome (nil: not reported).
func (l *Loopback) manager(callbackURL string, outcome func(error)) (*Manager, error) {
	c := l.cfg
	cfg := Config{Credentials: c.Credentials, Records: c.Records, Keyring: c.Keyring,
		Servers: []packs.Server{c.Server}, CallbackURL: callbackURL, HTTPClient: c.HTTPClient,
		Timeout: c.Timeout, Logger: c.Logger, Now: c.Now, PendingTTL: c.Wait, ClientName: c.ClientName,
		ClientMetadataURL: c.ClientMetadataURL}
	if outcome != nil {
		cfg.OnAuthorized = func(context.Context, string, string) { outcome(nil) }
		cfg.OnFailed = func(_ context.Context, _, _ string, err error) { outcome(err) }
	}
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	m.native = true
	return m, nil
}

func (l *Loopback) callbackURL(addr netip.AddrPort) string {
	return "http://" + addr.String() + LoopbackCallbackPath
}

// Token returns a valid access token: the stored one, refreshed when it is about to expire, or
// else one from a new authorization in the browser (see [Loopback]). It fails with an
// *AuthorizationError when the authorization server refused (Code "access_denied" when the user
// did), ErrSignInTimeout when the browser did not come back in time, or ctx's error.
func (l *Loopback) Token(ctx context.Context) (secret.Value, TokenSource, error) {
	id, server := l.cfg.Identity, l.cfg.Server.Name
	src := FromRefresh
	if g, err := l.m.loadGrant(ctx, id, server); err == nil && l.m.fresh(g, l.m.now()) {
		src = FromStore
	}
	tok, err := l.m.Token(ctx, id, server)
	return l.orSignIn(ctx, tok, src, err, "")
}

// Rejected returns a new access token after the server refused the one returned last (HTTP
// 401 with the WWW-Authenticate challenge): a refreshed one, or else one from a new
// authorization in the browser. A token fresh from the browser is not refreshed: the server
// refusing it at once means its authorization server changed (a migration), so the user signs
// in again, following the challenge to the server's current authorization server (which
// packbot registers at anew). Its errors are those of Token.
func (l *Loopback) Rejected(ctx context.Context, challenge string) (secret.Value, TokenSource, error) {
	if l.last == FromBrowser {
		return l.signIn(ctx, challenge)
	}
	tok, err := l.m.Refresh(ctx, l.cfg.Identity, l.cfg.Server.Name)
	return l.orSignIn(ctx, tok, FromRefresh, err, challenge)
}

// Authorizer gives the signed-in user's tokens to package mcp as a pool gets a chat user's:
// refreshed before expiry, presented with a DPoP proof where they are bound. Identity is the
// user it knows them under. It never begins an authorization: when the user must sign in
// (again), its errors wrap mcp.ErrNeedsAuthentication, and [Loopback.Rejected] or
// [Loopback.StepUp] does it.
func (l *Loopback) Authorizer() (auth mcp.Authorizer, identity string) { return l.m, l.cfg.Identity }

// Last says where the token returned last came from ("" before the first).
func (l *Loopback) Last() TokenSource { return l.last }

// StepUp answers the server's HTTP 403 whose WWW-Authenticate is challenge, as [Manager.StepUp]
// does for the chat: for an insufficient_scope challenge it signs the user in again asking for
// the union of the scopes asked so far and those the server requires, at most MaxStepUps times
// in a row. Errors wrap ErrStepUpExhausted when that would not help, mcp.ErrAuth for a 403
// without such a challenge, or are those of Token.
func (l *Loopback) StepUp(ctx context.Context, challenge string) (secret.Value, TokenSource, error) {
	err := l.m.StepUp(ctx, l.cfg.Identity, l.cfg.Server.Name, challenge)
	var su *StepUpError
	if !errors.As(err, &su) {
		return secret.Value{}, "", err
	}
	return l.signIn(ctx, challenge)
}

// orSignIn returns tok from src, or signs in through the browser when err says the user must
// authorize.
func (l *Loopback) orSignIn(ctx context.Context, tok string, src TokenSource, err error, challenge string) (secret.Value, TokenSource, error) {
	switch {
	case err == nil:
		l.last = src
		return secret.NewValue(tok), src, nil
	case !errors.Is(err, mcp.ErrNeedsAuthentication):
		return secret.Value{}, "", err
	}
	return l.signIn(ctx, challenge)
}

// signIn runs one authorization through the browser, following challenge when the server
// refused a request with it (else probing): listen, begin, prompt, wait for the callback, and
// return the token it stored.
func (l *Loopback) signIn(ctx context.Context, challenge string) (secret.Value, TokenSource, error) {
	id, server := l.cfg.Identity, l.cfg.Server.Name
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", l.addr.String())
	if err != nil {
		return secret.Value{}, "", fmt.Errorf("oauth sign-in %s: listen for the browser's redirect: %w", server, err)
	}
	addr, err := netip.ParseAddrPort(ln.Addr().String())
	if err != nil {
		_ = ln.Close()
		return secret.Value{}, "", fmt.Errorf("oauth sign-in %s: listener address: %w", server, err)
	}
	outcome := make(chan error, 1)
	m, err := l.manager(l.callbackURL(addr), func(err error) {
		select {
		case outcome <- err:
		default: // only the first outcome counts
		}
	})
	if err != nil {
		_ = ln.Close()
		return secret.Value{}, "", fmt.Errorf("oauth sign-in %s: %w", server, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+LoopbackCallbackPath, m.callbackHandler(loopbackPage))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: m.timeout, ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelDebug)}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	defer func() {
		// Let the browser get its page, then stop.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.timeout)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			m.log.DebugContext(ctx, "oauth loopback: shut down the listener", "err", err)
		}
	}()

	link, err := m.BeginAfter(ctx, id, server, challenge)
	if err != nil {
		return secret.Value{}, "", err
	}
	if err := l.cfg.Prompt(ctx, link); err != nil {
		return secret.Value{}, "", fmt.Errorf("oauth sign-in %s: %w", server, err)
	}
	wctx, cancel := context.WithTimeout(ctx, l.cfg.Wait)
	defer cancel()
	select {
	case err := <-outcome:
		if err != nil {
			return secret.Value{}, "", fmt.Errorf("oauth sign-in %s: %w", server, err)
		}
	case err := <-served:
		return secret.Value{}, "", fmt.Errorf("oauth sign-in %s: redirect listener stopped: %w", server, err)
	case <-wctx.Done():
		if err := ctx.Err(); err != nil {
			return secret.Value{}, "", fmt.Errorf("oauth sign-in %s: %w", server, err)
		}
		return secret.Value{}, "", fmt.Errorf("oauth sign-in %s: %w (waited %s)", server, ErrSignInTimeout, l.cfg.Wait)
	}
	tok, err := m.Token(ctx, id, server)
	if err != nil {
		return secret.Value{}, "", err
	}
	l.last = FromBrowser
	return secret.NewValue(tok), FromBrowser, nil
}

// loopbackPage rewords the callback page for a terminal user: the chat's "go back to the chat"
// would mislead.
func loopbackPage(res callbackResult) callbackResult {
	if res.status == http.StatusOK {
		res.Title, res.Message = "Signed in", "You can close this page and go back to the terminal."
		return res
	}
	res.Message = "Nothing was signed in. Go back to the terminal to see what happens next."
	return res
}

package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// ErrConfigUnavailable: per-user credentials cannot be stored, because the bot has no
// encryption key (or no store).
var ErrConfigUnavailable = errors.New("per-user MCP credentials are unavailable: MCP_CONFIG_ENCRYPTION_KEY is not set")

type userKey struct{ identity, server string }

// UserConfigAvailable reports whether users can configure their own credentials (the config
// menu is hidden otherwise).
func (p *Pool) UserConfigAvailable() bool { return p.creds != nil && p.keyring != nil }

// conn returns the session slot for identity on ent: the shared one of an admin-controlled
// server, or the user's own, created with the user's credentials. It fails with ErrClosed when a
// pack update removed or replaced ent meanwhile.
func (p *Pool) conn(ctx context.Context, ent *entry, identity string) (*conn, error) {
	srv := ent.server()
	if !srv.UserControlled() {
		return ent.shared, nil
	}
	if identity == "" {
		return nil, fmt.Errorf("%w: %s takes each user's own credentials, and the caller has no identity", ErrNeedsAuthentication, srv.Name)
	}
	k := userKey{identity, srv.Name}
	if c, err := p.lookupUser(k); c != nil || err != nil {
		return c, err
	}
	headers, env, err := p.userAccess(ctx, srv, identity)
	if err != nil {
		return nil, err
	}
	c := newConn(p, ent, identity, headers, env)
	p.mu.Lock()
	if p.closed || p.current().servers[srv.Name] != ent { // an update drops the slots of old entries
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if e, ok := p.users[k]; ok { // another call got there first
		p.lru.MoveToFront(e)
		p.mu.Unlock()
		return e.Value.(*conn), nil
	}
	p.users[k] = p.lru.PushFront(c)
	evicted := p.evictLocked()
	p.mu.Unlock()
	for _, e := range evicted {
		e.close()
	}
	return c, nil
}

func (p *Pool) lookupUser(k userKey) (*conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if e, ok := p.users[k]; ok {
		p.lru.MoveToFront(e)
		return e.Value.(*conn), nil
	}
	return nil, nil
}

// evictLocked removes least recently used idle slots beyond the bound and returns them, to be
// closed outside the lock. Slots with calls in flight are never evicted.
func (p *Pool) evictLocked() []*conn {
	var out []*conn
	for e := p.lru.Back(); e != nil && p.lru.Len() > p.maxUsers; {
		prev := e.Prev()
		if c := e.Value.(*conn); c.idle() {
			p.lru.Remove(e)
			delete(p.users, userKey{c.identity, c.srv.Name})
			out = append(out, c)
		}
		e = prev
	}
	return out
}

// sweep closes the per-user sessions idle for longer than their server's maxSessionIdleSeconds.
func (p *Pool) sweep(now time.Time) int {
	p.mu.Lock()
	var idle []*conn
	for e := p.lru.Back(); e != nil; {
		prev := e.Prev()
		c := e.Value.(*conn)
		if c.idleFor(now) >= time.Duration(c.server().MaxSessionIdleSeconds)*time.Second {
			p.lru.Remove(e)
			delete(p.users, userKey{c.identity, c.srv.Name})
			idle = append(idle, c)
		}
		e = prev
	}
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
	return len(idle)
}

// UserSessions returns the number of open per-user session slots.
func (p *Pool) UserSessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lru.Len()
}

// dropUser removes c from the pool and closes it.
func (p *Pool) dropUser(c *conn) {
	p.mu.Lock()
	k := userKey{c.identity, c.srv.Name}
	if e, ok := p.users[k]; ok && e.Value.(*conn) == c {
		p.lru.Remove(e)
		delete(p.users, k)
	}
	p.mu.Unlock()
	c.close()
}

func (p *Pool) dropUserKey(identity, server string) {
	c, _ := p.lookupUser(userKey{identity, server})
	if c != nil {
		p.dropUser(c)
	}
}

// userAccess builds the headers (and, for stdio, the environment) of a user's session.
func (p *Pool) userAccess(ctx context.Context, srv *packs.Server, identity string) (headerFunc, []string, error) {
	static := staticValues(srv.Headers)
	if srv.OAuth() {
		if p.auth == nil {
			return nil, nil, fmt.Errorf("%w: %s signs in with OAuth, which needs the bot's public URL (PACKBOT_PUBLIC_URL)", ErrNeedsAuthentication, srv.Name)
		}
		return func(ctx context.Context) (map[string]secret.Value, error) {
			tok, err := p.auth.Token(ctx, identity, srv.Name)
			if err != nil {
				return nil, err
			}
			h := maps.Clone(static)
			if h == nil {
				h = make(map[string]secret.Value, 2)
			}
			return h, presentToken(ctx, p.auth, identity, srv.Name, tok, h)
		}, nil, nil
	}
	values, err := p.loadConfig(ctx, identity, srv)
	if err != nil {
		return nil, nil, err
	}
	h, env := fieldAccess(srv, values, static)
	return h, p.stdioEnv(srv, env), nil
}

// fieldAccess turns a user's field values into headers (fields with a headerTemplate) merged
// over the pack's, and, for stdio servers, environment variables named after the fields.
func fieldAccess(srv *packs.Server, values map[string]secret.Value, static map[string]secret.Value) (headerFunc, map[string]secret.Value) {
	h := maps.Clone(static)
	if h == nil {
		h = make(map[string]secret.Value)
	}
	if srv.UserConfig != nil {
		for _, f := range srv.UserConfig.Fields {
			v, ok := values[f.Name]
			if !ok || f.HeaderTemplate == "" {
				continue
			}
			name := f.HeaderName
			if name == "" {
				name = "Authorization"
			}
			h[name] = secret.NewValue(strings.ReplaceAll(f.HeaderTemplate, "{value}", v.Reveal()))
		}
	}
	return func(context.Context) (map[string]secret.Value, error) { return h, nil }, values
}

func staticValues(h map[string]string) map[string]secret.Value {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]secret.Value, len(h))
	for k, v := range h {
		out[k] = secret.NewValue(v)
	}
	return out
}

func staticHeaders(h map[string]string) headerFunc {
	vals := staticValues(h)
	if vals == nil {
		return nil
	}
	return func(context.Context) (map[string]secret.Value, error) { return vals, nil }
}

// loadConfig opens a user's saved field values.
func (p *Pool) loadConfig(ctx context.Context, identity string, srv *packs.Server) (map[string]secret.Value, error) {
	if !p.UserConfigAvailable() {
		return nil, fmt.Errorf("%w: %w", ErrNeedsAuthentication, ErrConfigUnavailable)
	}
	k := store.CredentialKey{Identity: identity, Server: srv.Name, Kind: store.KindConfig}
	row, err := p.creds.GetCredential(ctx, k)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: no credentials configured for %s", ErrNeedsAuthentication, srv.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("load credentials for %s: %w", srv.Name, err)
	}
	if row.Status == store.CredentialFailed {
		return nil, fmt.Errorf("%w: the credentials saved for %s were rejected; configure them again", ErrAuth, srv.Name)
	}
	var raw map[string]string
	if err := p.keyring.OpenJSON(k, row.Secret, &raw); err != nil {
		return nil, fmt.Errorf("%w: credentials for %s cannot be read: %w", ErrNeedsAuthentication, srv.Name, err)
	}
	values := make(map[string]secret.Value, len(raw))
	for name, v := range raw {
		values[name] = secret.NewValue(v)
	}
	return values, nil
}

// connected is called after a user's session opened: the server accepted the credentials.
func (p *Pool) connected(ctx context.Context, c *conn) {
	if c.identity == "" || c.srv.OAuth() || !p.UserConfigAvailable() || !c.confirmed.CompareAndSwap(false, true) {
		return
	}
	p.setStatus(ctx, c, store.CredentialOK)
}

// rejected marks a user's stored credential failed after the server refused it, tells the
// OnRejected hook once, and drops the session.
func (p *Pool) rejected(ctx context.Context, c *conn) {
	p.dropUser(c)
	if p.UserConfigAvailable() && p.setStatus(ctx, c, store.CredentialFailed) {
		c.log().Warn("MCP server rejected a user's stored credentials; marked failed")
		p.onRejected(c.identity, c.srv.Name)
	}
}

// setStatus sets the status of c's credential row and reports whether it changed.
func (p *Pool) setStatus(ctx context.Context, c *conn, status string) bool {
	k := store.CredentialKey{Identity: c.identity, Server: c.srv.Name, Kind: store.KindConfig}
	_, err := p.creds.UpdateCredential(ctx, k, func(row store.Credential) (store.Credential, error) {
		if row.Status == status {
			return row, errUnchanged
		}
		row.Status = status
		return row, nil
	})
	if err != nil && !errors.Is(err, errUnchanged) && !errors.Is(err, store.ErrNotFound) {
		c.log().Warn("MCP credential status not saved", "error", err)
	}
	return err == nil
}

// errUnchanged aborts an update that has nothing to write.
var errUnchanged = errors.New("unchanged")

// Configure tests a user's field values ([Pool.TestCredentials]) and, when the server accepts
// them, saves them ([Pool.SaveCredentials]). Nothing is saved when the test fails.
func (p *Pool) Configure(ctx context.Context, identity, server string, values map[string]secret.Value) ([]Tool, error) {
	tools, err := p.TestCredentials(ctx, identity, server, values)
	if err != nil {
		return nil, err
	}
	return tools, p.SaveCredentials(ctx, identity, server, values)
}

// TestCredentials tries a user's field values for a user-controlled server (connect,
// initialize, list tools) without saving them, and returns the tools the user would get. The
// error says why the server refused (ErrAuth with the challenge, ErrUnreachable, ...). A
// successful test discovers the server's tools for everyone if nobody had yet.
func (p *Pool) TestCredentials(ctx context.Context, identity, server string, values map[string]secret.Value) ([]Tool, error) {
	ent, clean, err := p.checkValues(identity, server, values)
	if err != nil {
		return nil, err
	}
	srv := ent.server()
	headers, env := fieldAccess(srv, clean, staticValues(srv.Headers))
	probe := newConn(p, ent, identity, headers, p.stdioEnv(srv, env))
	sess, cancel, tools, err := probe.dial(ctx)
	if err != nil {
		return nil, err
	}
	_ = sess.Close()
	cancel()
	p.discovered(probe, tools)
	return tools, nil
}

// SaveCredentials seals and stores a user's field values for a user-controlled server (as
// working: call it after a successful test), and closes the user's session so that the next call
// uses them.
func (p *Pool) SaveCredentials(ctx context.Context, identity, server string, values map[string]secret.Value) error {
	_, clean, err := p.checkValues(identity, server, values)
	if err != nil {
		return err
	}
	raw := make(map[string]string, len(clean))
	for k, v := range clean {
		raw[k] = v.Reveal()
	}
	k := store.CredentialKey{Identity: identity, Server: server, Kind: store.KindConfig}
	sealed, err := p.keyring.SealJSON(k, raw)
	if err != nil {
		return fmt.Errorf("save credentials for %s: %w", server, err)
	}
	if err := p.creds.PutCredential(ctx, store.Credential{Identity: identity, Server: server, Kind: store.KindConfig, Secret: sealed, Status: store.CredentialOK}); err != nil {
		return fmt.Errorf("save credentials for %s: %w", server, err)
	}
	p.dropUserKey(identity, server) // a session with older credentials must not outlive them
	return nil
}

// checkValues checks that server takes typed credentials and that values has every field.
func (p *Pool) checkValues(identity, server string, values map[string]secret.Value) (*entry, map[string]secret.Value, error) {
	ent, ok := p.current().servers[server]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownServer, server)
	}
	srv := ent.server()
	switch {
	case !srv.UserControlled():
		return nil, nil, fmt.Errorf("MCP server %s is admin-controlled: users do not configure it", server)
	case srv.OAuth():
		return nil, nil, fmt.Errorf("MCP server %s signs users in with OAuth, not with typed credentials", server)
	case !p.UserConfigAvailable():
		return nil, nil, ErrConfigUnavailable
	case identity == "":
		return nil, nil, errors.New("configure MCP credentials: no user identity")
	}
	clean := make(map[string]secret.Value, len(values))
	for _, f := range srv.UserConfig.Fields {
		v, ok := values[f.Name]
		if !ok || strings.TrimSpace(v.Reveal()) == "" {
			return nil, nil, fmt.Errorf("configure %s: field %q is missing", server, f.Name)
		}
		clean[f.Name] = v
	}
	return ent, clean, nil
}

// Forget deletes a user's credentials for a server (every kind: typed values, OAuth tokens,
// drafts) and closes the user's session.
func (p *Pool) Forget(ctx context.Context, identity, server string) error {
	if _, ok := p.current().servers[server]; !ok {
		return fmt.Errorf("%w: %q", ErrUnknownServer, server)
	}
	p.dropUserKey(identity, server)
	if p.creds == nil {
		return nil
	}
	if err := p.creds.DeleteCredentials(ctx, identity, server, ""); err != nil {
		return fmt.Errorf("forget credentials for %s: %w", server, err)
	}
	return nil
}

// Status reports whether identity can use server: for an admin-controlled server, whether the
// shared session works; for a user-controlled one, the state of the user's credentials.
func (p *Pool) Status(ctx context.Context, identity, server string) (Status, error) {
	ent, ok := p.current().servers[server]
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownServer, server)
	}
	srv := ent.server()
	if !srv.UserControlled() {
		if up, err := ent.shared.state(); !up && err != nil {
			return StatusFailure, nil
		}
		return StatusSuccess, nil
	}
	if p.creds == nil {
		return StatusNeedsAuthentication, nil
	}
	kind := store.KindConfig
	if srv.OAuth() {
		kind = store.KindOAuth
	}
	row, err := p.creds.GetCredential(ctx, store.CredentialKey{Identity: identity, Server: server, Kind: kind})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return StatusNeedsAuthentication, nil
	case err != nil:
		return "", fmt.Errorf("status of %s: %w", server, err)
	case row.Status == store.CredentialFailed && srv.OAuth():
		return StatusNeedsAuthentication, nil
	case row.Status == store.CredentialFailed:
		return StatusFailure, nil
	}
	return StatusSuccess, nil
}

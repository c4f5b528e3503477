package oauth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/store"
)

// MaxStepUps bounds the step-up authorizations that may follow one another for a user and
// server: a server that keeps asking for new scopes stops being asked on its behalf.
const MaxStepUps = 3

// ErrStepUpExhausted: a server answered 403 insufficient_scope although the user already
// authorized every scope it asks for (the authorization server did not grant them, or the
// server asks for a scope it cannot get), or after MaxStepUps step-ups. Asking the user again
// would loop; it wraps mcp.ErrAuth.
var ErrStepUpExhausted = fmt.Errorf("%w: step-up authorization did not help", mcp.ErrAuth)

// StepUpError says that the user must authorize again with more scopes: [Manager.Begin] now
// asks for Scopes (the union of what was granted and what the server requires). It wraps
// mcp.ErrNeedsAuthentication, so the conversation sends a new link as for a first sign-in.
type StepUpError struct {
	Server string
	Scopes []string
}

func (e *StepUpError) Error() string {
	return fmt.Sprintf("%s needs more permissions (scope %q): authorize again", e.Server, scopeString(e.Scopes))
}

func (e *StepUpError) Unwrap() error { return mcp.ErrNeedsAuthentication }

// StepUp handles a server's HTTP 403 whose WWW-Authenticate is challenge: with
// error="insufficient_scope" and a scope parameter (RFC 6750 §3.1, MCP 2025-11-25 "Scope
// Challenge Handling"), it records the union of the scopes already asked for and those
// required, for the next [Manager.Begin], and returns a *StepUpError. The user's current token
// stays usable for what it allows. A challenge asking for nothing new, or more than MaxStepUps
// step-ups in a row, gives ErrStepUpExhausted instead, so the same scope is never asked for
// forever. Any other 403 gives an error wrapping mcp.ErrAuth.
func (m *Manager) StepUp(ctx context.Context, identity, server, challenge string) error {
	if _, err := m.server(server); err != nil {
		return fmt.Errorf("oauth step-up: %w", err)
	}
	required, ok := insufficientScope(challenge)
	if !ok {
		return fmt.Errorf("oauth step-up %s/%s: %w: HTTP 403 without an insufficient_scope challenge naming a scope", identity, server, mcp.ErrAuth)
	}
	unlock, err := m.locks.lock(ctx, identity, server)
	if err != nil {
		return fmt.Errorf("oauth step-up %s/%s: %w", identity, server, err)
	}
	defer unlock()
	gk := grantKey(identity, server)
	var want []string
	var exhausted error
	_, err = m.creds.UpdateCredential(ctx, gk, func(c store.Credential) (store.Credential, error) {
		g, err := m.openGrant(gk, c.Secret)
		if err != nil {
			return c, fmt.Errorf("%w: %w", mcp.ErrNeedsAuthentication, err)
		}
		asked := g.Requested
		if len(asked) == 0 {
			asked = strings.Fields(g.Scope)
		}
		want, exhausted = union(union(asked, strings.Fields(g.Scope)), required), nil
		switch {
		case subset(required, asked):
			exhausted = fmt.Errorf("%w: the server still requires scope %q, which the user already authorized (packbot asked for %q); the authorization server did not grant it, or the server's scope requirement is wrong",
				ErrStepUpExhausted, scopeString(required), scopeString(asked))
			return c, nil
		case slices.Equal(want, g.StepUpScopes):
			return c, nil // the same 403 again before the user came back: nothing new
		case g.StepUps >= MaxStepUps:
			exhausted = fmt.Errorf("%w: %d step-up authorizations already, the server now requires scope %q",
				ErrStepUpExhausted, g.StepUps, scopeString(required))
			return c, nil
		}
		g.StepUpScopes = want
		c.Secret, err = m.sealJSON(gk, g)
		return c, err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("oauth step-up %s/%s: not authorized: %w", identity, server, mcp.ErrNeedsAuthentication)
	case err != nil:
		return fmt.Errorf("oauth step-up %s/%s: %w", identity, server, err)
	case exhausted != nil:
		m.log.WarnContext(ctx, "oauth step-up refused", "identity", identity, "server", server, "err", exhausted)
		return fmt.Errorf("oauth step-up %s/%s: %w", identity, server, exhausted)
	}
	m.log.InfoContext(ctx, "oauth step-up needed", "identity", identity, "server", server, "scopes", scopeString(want))
	return &StepUpError{Server: server, Scopes: want}
}

// pendingStepUp returns the scopes a recorded step-up asks for and the number of step-ups the
// next authorization will be (0 and none without a step-up).
func (m *Manager) pendingStepUp(ctx context.Context, identity, server string) ([]string, int) {
	g, err := m.loadGrant(ctx, identity, server)
	if err != nil || len(g.StepUpScopes) == 0 {
		return nil, 0
	}
	return g.StepUpScopes, g.StepUps + 1
}

// insufficientScope returns the scopes of a Bearer insufficient_scope challenge.
func insufficientScope(challenge string) ([]string, bool) {
	cs, err := oauthex.ParseWWWAuthenticate([]string{challenge})
	if err != nil {
		return nil, false
	}
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["error"] == "insufficient_scope" {
			s := strings.Fields(c.Params["scope"])
			return s, len(s) > 0
		}
	}
	return nil, false
}

// union returns a followed by the elements of b that a lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

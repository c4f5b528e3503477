package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store/secret"
)

// smokeAuth is how mcp smoke authenticates to its server: the headers given (--header, the
// pack's), an OAuth sign-in through the browser (oauth2, unless --header gives an
// Authorization), or packbot's own machine tokens (client_credentials, workload_identity). It
// answers the server's refusals as serve's pool does, within bounds: a 403 insufficient_scope
// by a step-up, a 401 by a refresh or, for a token fresh from the browser, by one more sign-in
// (the server moved to another authorization server).
type smokeAuth struct {
	a       *app
	srv     packs.Server
	headers map[string]string // the request headers (--header, the pack's)
	w       io.Writer         // where progress lines go
	signIn  *smokeSignIn      // nil without OAuth sign-in
	machine *oauth.Machine    // nil unless the server takes packbot's own tokens
	stepUps int
	resign  int // sign-ins after a 401
}

// openSmokeAuth prepares the authentication of srv and, for an OAuth server, gets a first
// token (through the browser when none is stored).
func openSmokeAuth(ctx context.Context, a *app, o smokeOptions, srv packs.Server, headers map[string]string, w io.Writer) (*smokeAuth, error) {
	sa := &smokeAuth{a: a, srv: srv, headers: headers, w: w}
	if _, given := headers["Authorization"]; given {
		return sa, nil
	}
	switch {
	case srv.MachineAuth():
		m, err := oauth.NewMachine(oauth.MachineConfig{Servers: []packs.Server{srv}, Logger: a.logger, CommandLine: true})
		if err != nil {
			return nil, fmt.Errorf("%w (fix the server's authentication in the pack)", err)
		}
		sa.machine = m
		fmt.Fprintf(w, "sign-in: packbot's own token (%s)\n", srv.Authentication.Mode)
	case srv.OAuth():
		si, err := openSignIn(ctx, a, o.signIn, srv)
		if err != nil {
			return nil, err
		}
		sa.signIn = si
		if err := sa.bearer(si.Token(ctx)); err != nil {
			sa.close(ctx)
			return nil, err
		}
	}
	return sa, nil
}

// bearer reports where the token a sign-in step stored came from, or why there is none. The
// smoke test asks the sign-in's authorizer for it (and for a DPoP proof, where it is bound).
func (sa *smokeAuth) bearer(_ secret.Value, src oauth.TokenSource, err error) error {
	if err != nil {
		fmt.Fprintf(sa.a.stderr, "FAILED: %s\n", signInReason(err, sa.signIn.opts))
		return exitError{code: 1}
	}
	fmt.Fprintf(sa.w, "sign-in: %s\n", src)
	return nil
}

// smoke runs the smoke test, again after each refusal that a new token may cure.
func (sa *smokeAuth) smoke(ctx context.Context, so mcp.SmokeOptions) (*mcp.SmokeReport, error) {
	if sa.signIn != nil {
		so.Authorizer, so.Identity = sa.signIn.Authorizer()
	}
	for {
		so.Headers = sa.headers
		rep, err := mcp.Smoke(ctx, sa.srv, so)
		again, rerr := sa.recover(ctx, err)
		switch {
		case rerr != nil:
			return rep, rerr
		case !again:
			return rep, err
		}
	}
}

// recover answers an OAuth server's refusal err with a new token: true when the test should
// run again.
func (sa *smokeAuth) recover(ctx context.Context, err error) (bool, error) {
	var ae *mcp.AuthError
	if sa.signIn == nil || !errors.As(err, &ae) {
		return false, nil
	}
	switch {
	case ae.Status == http.StatusForbidden && sa.stepUps < oauth.MaxStepUps:
		sa.stepUps++
		fmt.Fprintf(sa.w, "the server needs more permissions (HTTP 403): signing in again with more scopes\n")
		tok, src, err := sa.signIn.StepUp(ctx, ae.Challenge)
		if errors.Is(err, oauth.ErrStepUpExhausted) || errors.Is(err, mcp.ErrAuth) {
			sa.a.logger.InfoContext(ctx, "step-up not possible", slog.Any("err", err))
			return false, nil // the 403 stands, with its challenge shown
		}
		return true, sa.bearer(tok, src, err)
	case ae.Status == http.StatusUnauthorized && sa.resign == 0:
		sa.resign++
		fmt.Fprintf(sa.w, "the server refused the %s token (HTTP 401)\n", sa.signIn.Last())
		return true, sa.bearer(sa.signIn.Rejected(ctx, ae.Challenge))
	}
	return false, nil
}

// close forgets the throwaway token store (a --data-dir store stays).
func (sa *smokeAuth) close(ctx context.Context) {
	if sa.signIn == nil {
		return
	}
	// The throwaway store holds only tokens sealed under a key that dies with the process.
	if err := sa.signIn.close(); err != nil {
		sa.a.logger.WarnContext(ctx, "close the token store", slog.Any("err", err))
	}
}

// machineFor returns the machine authorizer of the pack's servers that take packbot's own
// tokens (client_credentials, workload_identity), as serve builds it; nil when there are none.
func machineFor(a *app, p *packs.Pack) (*oauth.Machine, error) {
	if !anyServer(p, (*packs.Server).MachineAuth) {
		return nil, nil
	}
	m, err := oauth.NewMachine(oauth.MachineConfig{Servers: p.MCP.Servers, Logger: a.logger})
	if err != nil {
		return nil, fmt.Errorf("%w (fix the server's authentication in %s)", err, p.Source)
	}
	return m, nil
}

// machineOrNil is m as an mcp.MachineAuthorizer, nil (not a typed nil) when m is.
func machineOrNil(m *oauth.Machine) mcp.MachineAuthorizer {
	if m == nil {
		return nil
	}
	return m
}

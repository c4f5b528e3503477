package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/store"
)

// leaseExtra is how much longer than one token request a refresh lease lasts.
const leaseExtra = 10 * time.Second

// Token returns a valid access token for identity on server, refreshing it first when it
// expires within Config.RefreshBefore (or half its lifetime, if shorter). When the refresh fails
// for a reason that may pass (network, 5xx) and the current token has not expired yet, that
// token is returned. Errors wrap mcp.ErrNeedsAuthentication when the user must authorize.
func (m *Manager) Token(ctx context.Context, identity, server string) (string, error) {
	if _, err := m.server(server); err != nil {
		return "", fmt.Errorf("oauth token: %w", err)
	}
	g, err := m.loadGrant(ctx, identity, server)
	if err != nil {
		return "", fmt.Errorf("oauth token %s/%s: %w", identity, server, err)
	}
	if m.fresh(g, m.now()) {
		return g.AccessToken, nil
	}
	tok, err := m.refresh(ctx, identity, server, false, g.Version)
	if err != nil {
		return "", fmt.Errorf("oauth token %s/%s: %w", identity, server, err)
	}
	return tok, nil
}

// Refresh gets a new access token after the server rejected the current one (a 401
// mid-session). When another caller refreshed since this user's token was read, its token is
// returned instead of spending the refresh token again. Errors are those of Token.
func (m *Manager) Refresh(ctx context.Context, identity, server string) (string, error) {
	if _, err := m.server(server); err != nil {
		return "", fmt.Errorf("oauth refresh: %w", err)
	}
	g, err := m.loadGrant(ctx, identity, server)
	if err != nil {
		return "", fmt.Errorf("oauth refresh %s/%s: %w", identity, server, err)
	}
	tok, err := m.refresh(ctx, identity, server, true, g.Version)
	if err != nil {
		return "", fmt.Errorf("oauth refresh %s/%s: %w", identity, server, err)
	}
	return tok, nil
}

// loadGrant reads and opens the token set; a missing or unreadable row needs authentication.
func (m *Manager) loadGrant(ctx context.Context, identity, server string) (grant, error) {
	gk := grantKey(identity, server)
	c, err := m.creds.GetCredential(ctx, gk)
	if errors.Is(err, store.ErrNotFound) {
		return grant{}, fmt.Errorf("not authorized yet: %w", mcp.ErrNeedsAuthentication)
	}
	if err != nil {
		return grant{}, err
	}
	g, err := m.openGrant(gk, c.Secret)
	if err != nil {
		// Sealed under a key that is gone, or tampered with: authorizing again replaces it.
		return grant{}, fmt.Errorf("%w: %w", mcp.ErrNeedsAuthentication, err)
	}
	return g, nil
}

// fresh reports whether g's access token may be used at now without refreshing.
func (m *Manager) fresh(g grant, now time.Time) bool {
	if g.Expiry.IsZero() {
		return true // the server did not say: use it until it is refused
	}
	margin := m.refreshBefore
	if half := time.Duration(g.Lifetime) * time.Second / 2; g.Lifetime > 0 && half < margin {
		margin = half
	}
	return now.Add(margin).Before(g.Expiry)
}

// refresh obtains a new access token. Within this process callers for one (identity, server)
// take turns; across processes the one that writes a lease into the row refreshes while the
// others wait for it, so a rotating refresh token is spent once. The network call runs outside
// any store transaction. force (Refresh) refreshes even a token that looks fresh, unless its
// version is no longer seenVersion: then someone else already did.
func (m *Manager) refresh(ctx context.Context, identity, server string, force bool, seenVersion string) (string, error) {
	unlock, err := m.locks.lock(ctx, identity, server)
	if err != nil {
		return "", err
	}
	defer unlock()
	gk := grantKey(identity, server)
	var waited time.Duration
	for {
		// Cheap check first: another caller may have refreshed while this one waited.
		g, err := m.loadGrant(ctx, identity, server)
		if err != nil {
			return "", err
		}
		now := m.now()
		if m.usable(g, now, force, seenVersion) {
			return g.AccessToken, nil
		}
		leaseID := m.instance + "." + randomText()
		var cur grant
		var outcome leaseOutcome
		_, err = m.creds.UpdateCredential(ctx, gk, func(c store.Credential) (store.Credential, error) {
			gg, err := m.openGrant(gk, c.Secret)
			if err != nil {
				return c, fmt.Errorf("%w: %w", mcp.ErrNeedsAuthentication, err)
			}
			cur, outcome = gg, m.decide(gg, now, force, seenVersion)
			if outcome != leaseTaken {
				return c, nil
			}
			gg.LeaseID, gg.LeaseUntil = leaseID, now.Add(m.timeout+leaseExtra)
			c.Secret, err = m.sealJSON(gk, gg)
			return c, err
		})
		if errors.Is(err, store.ErrNotFound) {
			return "", fmt.Errorf("not authorized: %w", mcp.ErrNeedsAuthentication)
		}
		if err != nil {
			return "", err
		}
		switch outcome {
		case useCurrent:
			return cur.AccessToken, nil
		case noRefreshToken:
			m.log.InfoContext(ctx, "oauth token expired and cannot be refreshed", "identity", identity, "server", server)
			if err := m.creds.DeleteCredentials(ctx, identity, server, store.KindOAuth); err != nil {
				return "", err
			}
			return "", fmt.Errorf("token expired, no refresh token: %w", mcp.ErrNeedsAuthentication)
		case leaseBusy:
			// Another process is refreshing: wait for its result, or for its lease to run out
			// if it died (bounded, should the clocks disagree).
			if waited > 2*(m.timeout+leaseExtra) {
				return "", fmt.Errorf("a refresh by another process has not finished after %s", waited)
			}
			t := time.NewTimer(m.pollInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return "", ctx.Err()
			case <-t.C:
			}
			waited += m.pollInterval
			continue
		}
		return m.refreshLeased(ctx, identity, server, cur, leaseID, force)
	}
}

// leaseOutcome is what the row said when a refresh looked at it under its lock.
type leaseOutcome int

const (
	useCurrent     leaseOutcome = iota // the stored token will do
	leaseTaken                         // this caller refreshes
	leaseBusy                          // another process is refreshing
	noRefreshToken                     // expired (or refused) and nothing to refresh it with
)

// usable reports whether the stored token can be returned without refreshing.
func (m *Manager) usable(g grant, now time.Time, force bool, seenVersion string) bool {
	if force {
		return g.Version != seenVersion && m.fresh(g, now)
	}
	return m.fresh(g, now)
}

// decide runs under the row lock; it must stay pure (the store may run it again).
func (m *Manager) decide(g grant, now time.Time, force bool, seenVersion string) leaseOutcome {
	switch {
	case m.usable(g, now, force, seenVersion):
		return useCurrent
	case g.LeaseID != "" && now.Before(g.LeaseUntil) && !strings.HasPrefix(g.LeaseID, m.instance+"."):
		// A lease of this Manager seen under its own per-key lock is left over from a refresh
		// that could not clear it: take it over.
		return leaseBusy
	case g.RefreshToken == "":
		return noRefreshToken
	}
	return leaseTaken
}

// refreshLeased spends g's refresh token (RFC 6749 §6, with the resource of RFC 8707) under
// the lease leaseID and stores the result.
func (m *Manager) refreshLeased(ctx context.Context, identity, server string, g grant, leaseID string, force bool) (string, error) {
	// The refresh token may be spent as soon as the request leaves: finish (request and store)
	// even when the caller gives up, or the rotated token would be lost.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*m.timeout)
	defer cancel()
	gk := grantKey(identity, server)
	log := m.log.With("identity", identity, "server", server)
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {g.RefreshToken}}
	if g.Resource != "" {
		form.Set("resource", g.Resource)
	}
	c := m.currentClient(server, g.Client)
	hc, rerr := m.remoteNamed(ctx, server)
	var tr tokenResponse
	var key *dpopKey
	bound := false
	if rerr == nil && len(g.DPoPKey) > 0 {
		key, rerr = parseDPoPKey(g.DPoPKey)
	}
	if rerr == nil {
		tr, bound, rerr = m.tokenRequest(ctx, hc, g.TokenEndpoint, c, form, key)
	}
	now := m.now()

	var ae *AuthorizationError
	permanent := rerr != nil && errors.As(rerr, &ae) && ae.permanent()
	var next, cur grant
	if rerr == nil {
		next = m.grantFrom(tr, g, now)
		if !bound {
			next.DPoPKey = nil // the authorization server gave a bearer token this time
		}
	}
	ours := false
	_, err := m.creds.UpdateCredential(ctx, gk, func(row store.Credential) (store.Credential, error) {
		gg, err := m.openGrant(gk, row.Secret)
		if err != nil {
			return row, err
		}
		cur, ours = gg, gg.LeaseID == leaseID
		switch {
		case !ours:
			return row, nil // lease lost (expired and taken, or re-authorized): leave the row be
		case rerr == nil:
			row.Secret, err = m.sealJSON(gk, next)
		case permanent:
			return row, nil // deleted below
		default:
			gg.LeaseID, gg.LeaseUntil = "", time.Time{}
			row.Secret, err = m.sealJSON(gk, gg)
		}
		return row, err
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("forgotten while refreshing: %w", mcp.ErrNeedsAuthentication)
	}
	if err != nil {
		return "", fmt.Errorf("store refreshed token: %w", err)
	}
	switch {
	case rerr == nil:
		if !ours && m.fresh(cur, now) {
			return cur.AccessToken, nil
		}
		log.InfoContext(ctx, "oauth token refreshed", "expires", next.Expiry, "rotated", tr.RefreshToken != "")
		return next.AccessToken, nil
	case permanent:
		if ours {
			if err := m.creds.DeleteCredentials(ctx, identity, server, store.KindOAuth); err != nil {
				return "", err
			}
			if ae.Code == "invalid_client" {
				m.dropClient(ctx, c)
			}
			log.InfoContext(ctx, "oauth refresh refused, authorization needed again", "error", ae.Code)
			return "", fmt.Errorf("refresh refused (%w): %w", rerr, mcp.ErrNeedsAuthentication)
		}
		if m.fresh(cur, now) {
			return cur.AccessToken, nil // someone else refreshed meanwhile
		}
		return "", fmt.Errorf("refresh refused (%w): %w", rerr, mcp.ErrNeedsAuthentication)
	}
	log.WarnContext(ctx, "oauth refresh failed", "err", rerr)
	if !force && !g.Expiry.IsZero() && now.Before(g.Expiry) {
		return g.AccessToken, nil // still valid for a while; the next call tries again
	}
	return "", fmt.Errorf("refresh: %w", rerr)
}

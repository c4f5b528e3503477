package flows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// kindAuth is the dialog waiting for the user's presentation.
const kindAuth = "auth"

// authWait is the authentication dialog: a proof request was sent; its outcome is awaited.
type authWait struct {
	question
	// Request is the id of the proof request.
	Request string `json:"request,omitempty"`
}

func (*authWait) kind() string { return kindAuth }

// checkLogin logs out a user whose credential has expired, or whose login was made for another
// authentication requirement than the pack's (a pack swapped in that asks for another
// credential, or reads roles from another attribute). A login made before logins were
// recorded is taken as made for the running pack.
func (t *turn) checkLogin(ctx context.Context) error {
	switch {
	case !t.s.Authenticated:
		return nil
	case t.s.Login == "":
		t.s.Login = t.e.login
	case t.s.Login != t.e.login:
		t.e.log.InfoContext(ctx, "logged out: the pack's authentication changed", slog.String("connection", logid.Conn(t.conn)))
		t.logout(ctx)
		return t.sayKey(ctx, "AUTH_PACK_CHANGED")
	}
	if t.s.CredentialExpiry.IsZero() || t.e.now().Before(t.s.CredentialExpiry) {
		return nil
	}
	t.logout(ctx)
	return t.sayKey(ctx, "AUTH_EXPIRED")
}

// LoginDigest identifies what a login under p's authentication means: which credential is
// asked for and how identity and roles are read from it. Sessions record it at login; a pack
// with another digest logs them out.
func LoginDigest(p *packs.Pack) string {
	a := p.Flows.Authentication
	v := struct {
		Enabled                                  bool
		Definition, Identity, Roles, DefaultRole string
		CredentialType                           string
		Issuers, Formats                         []string
	}{Enabled: a.Enabled, Definition: a.CredentialDefinitionID, Identity: a.UserIdentityAttribute, Roles: a.RolesAttribute,
		DefaultRole: a.DefaultRole}
	if c := a.Credential; c != nil {
		v.CredentialType, v.Issuers, v.Formats = c.Type, slices.Sorted(slices.Values(c.Issuers)), slices.Sorted(slices.Values(c.Formats))
	}
	raw, _ := json.Marshal(v) // plain fields: cannot fail
	h := sha256.Sum256(raw)
	return hex.EncodeToString(h[:8])
}

// authenticate sends a proof request (again, when one was pending) and waits in state AUTH.
func (t *turn) authenticate(ctx context.Context) error {
	if !t.e.canAuth {
		return t.sayKey(ctx, "AUTH_UNAVAILABLE")
	}
	r := ProofRequest(t.e.pack, t.tr(purposeKey(t.e.pack)))
	r.ID = newMessageID()
	id := r.ID
	t.send(channel.Outbound{ProofRequest: &r})
	t.setDialog(&authWait{Request: id})
	return nil
}

// purposeKey is the i18n key (or literal text) of the proof request's purpose.
func purposeKey(p *packs.Pack) string {
	if c := p.Flows.Authentication.Credential; c != nil && c.Purpose != "" {
		return c.Purpose
	}
	return "AUTH_PROOF_PURPOSE"
}

// ProofRequest is the proof request of a pack's authentication flow, with purpose shown to the
// user.
func ProofRequest(p *packs.Pack, purpose string) channel.ProofRequest {
	a := p.Flows.Authentication
	r := channel.ProofRequest{Purpose: purpose}
	if c := a.Credential; c != nil {
		r.W3C = &channel.W3CRequest{CredentialType: c.Type, Issuers: c.Issuers, Formats: c.Formats}
	}
	if a.CredentialDefinitionID != "" {
		ac := &channel.AnonCredsRequest{CredentialDefinitionID: a.CredentialDefinitionID}
		for _, attr := range []string{a.UserIdentityAttribute, a.RolesAttribute, "name"} {
			if attr != "" && !slices.Contains(ac.Attributes, attr) {
				ac.Attributes = append(ac.Attributes, attr)
			}
		}
		r.AnonCreds = ac
	}
	return r
}

// presentation handles the outcome of the proof request d waits for.
func (t *turn) presentation(ctx context.Context, d *authWait, p channel.PresentationResult) error {
	if d.Request != "" && p.RequestID != "" && p.RequestID != d.Request {
		t.e.log.InfoContext(ctx, "presentation for no pending request ignored", slog.String("connection", logid.Conn(t.conn)),
			slog.String("request", p.RequestID), slog.String("outcome", string(p.Outcome)))
		return nil
	}
	t.endDialog()
	switch p.Outcome {
	case channel.Verified:
		return t.verified(ctx, p)
	case channel.NoCredential:
		if err := t.sayKey(ctx, "AUTH_NO_CREDENTIAL"); err != nil {
			return err
		}
		return t.inviteToIssuer(ctx)
	case channel.Declined:
		return t.sayKey(ctx, "AUTH_DECLINED")
	case channel.TimedOut:
		return t.sayKey(ctx, "AUTH_TIMEOUT")
	}
	t.e.log.InfoContext(ctx, "authentication failed", slog.String("connection", logid.Conn(t.conn)), slog.String("outcome", string(p.Outcome)),
		slog.String("reason", p.Reason))
	return t.sayKey(ctx, "AUTH_FAILED")
}

// inviteToIssuer sends an invitation to the pack's issuer service, when it has one.
func (t *turn) inviteToIssuer(ctx context.Context) error {
	did := t.e.pack.Flows.Authentication.IssuerServiceDID
	if did == "" || !t.e.caps.Invitations {
		return nil
	}
	t.send(channel.Outbound{Invitation: &channel.Invitation{ID: newMessageID(), DID: did}})
	return t.sayKey(ctx, "AUTH_NO_CREDENTIAL_ISSUER")
}

// verified logs the user in from a verified credential's claims.
func (t *turn) verified(ctx context.Context, p channel.PresentationResult) error {
	identity, roles := t.e.claimed(p.Claims)
	if identity == "" {
		t.e.log.InfoContext(ctx, "authentication failed", slog.String("connection", logid.Conn(t.conn)),
			slog.String("reason", fmt.Sprintf("the credential has no %q attribute (flows.authentication.userIdentityAttribute)",
				t.e.pack.Flows.Authentication.UserIdentityAttribute)))
		return t.sayKey(ctx, "AUTH_FAILED")
	}
	if t.s.Identity != "" && t.s.Identity != identity {
		// Another user on this connection: what the previous one said is theirs.
		t.fx.ClearMemory = append(t.fx.ClearMemory, "conn:"+t.conn)
	}
	t.s.Authenticated, t.s.Identity, t.s.DisplayName, t.s.Roles = true, identity, DisplayName(p.Claims), roles
	t.s.CredentialExpiry, t.s.Login = p.Expires, t.e.login
	if err := t.e.st.PutIdentity(ctx, store.Identity{Identity: identity, DisplayName: t.s.DisplayName, Roles: roles}); err != nil {
		if retryable(err) {
			return fmt.Errorf("record roles of %s: %w", identity, err) // handled again once the store is back
		}
		// Approvals would see the previous login's roles: say so, but the login itself stands.
		t.e.log.ErrorContext(ctx, "roles not recorded in the directory", slog.String("identity", identity), slog.Any("err", err))
	}
	t.e.log.InfoContext(ctx, "authenticated", slog.String("connection", logid.Conn(t.conn)), slog.String("identity", identity),
		slog.Any("roles", roles), slog.Bool("admin", t.e.rbac.IsAdmin(t.caller())))
	if t.s.DisplayName != "" {
		return t.sayKey(ctx, "AUTH_SUCCESS_NAME", "name", t.s.DisplayName)
	}
	return t.sayKey(ctx, "AUTH_SUCCESS")
}

// claimed is the identity and roles a verified credential's claims give, as the pack's
// authentication reads them (identity "" when the credential lacks the attribute).
func (e *Engine) claimed(claims map[string]any) (identity string, roles []string) {
	a := e.pack.Flows.Authentication
	identity = claimString(claims, a.UserIdentityAttribute)
	if a.RolesAttribute != "" {
		roles = rbac.ParseRoles(claims[a.RolesAttribute])
	}
	if len(roles) == 0 && a.DefaultRole != "" {
		roles = []string{a.DefaultRole}
	}
	return identity, roles
}

// logout forgets who the user is and what they said.
func (t *turn) logout(context.Context) {
	t.fx.ClearMemory = append(t.fx.ClearMemory, t.memoryKey(), "conn:"+t.conn)
	t.s.Authenticated, t.s.Identity, t.s.DisplayName, t.s.Roles = false, "", "", nil
	t.s.CredentialExpiry, t.s.Login = time.Time{}, ""
	t.endDialog()
}

// DisplayName is the user's name from a credential's claims: name, else first and last name.
func DisplayName(claims map[string]any) string {
	if n := claimString(claims, "name"); n != "" {
		return n
	}
	for _, pair := range [][2]string{{"firstName", "lastName"}, {"givenName", "familyName"}, {"first_name", "last_name"}, {"given_name", "family_name"}} {
		first, last := claimString(claims, pair[0]), claimString(claims, pair[1])
		if n := strings.TrimSpace(first + " " + last); n != "" {
			return n
		}
	}
	return ""
}

func claimString(claims map[string]any, name string) string {
	switch v := claims[name].(type) {
	case string:
		return strings.TrimSpace(v)
	case fmt.Stringer:
		return strings.TrimSpace(v.String())
	case float64, int, int64, bool:
		return fmt.Sprint(v)
	}
	return ""
}

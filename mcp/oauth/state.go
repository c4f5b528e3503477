package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// Token endpoint client authentication methods (RFC 7591 §2).
const (
	authNone  = "none"
	authBasic = "client_secret_basic"
	authPost  = "client_secret_post"
)

// client is how packbot authenticates to an authorization server's token endpoint.
type client struct {
	ID     string `json:"id"`
	Secret string `json:"secret,omitempty"`
	Method string `json:"method"` // authNone, authBasic or authPost
	// Preregistered: the id (and secret) come from the pack; the pack's current secret is used
	// when the id still matches, so that an admin can rotate it.
	Preregistered bool `json:"preregistered,omitempty"`
	// CacheKey names the nsClient record of a dynamically registered client, dropped when the
	// authorization server no longer knows the client.
	CacheKey string `json:"cacheKey,omitempty"`
	// assertion signs a new private_key_jwt client assertion (a machine client), one per token
	// request: a request sent again (for a DPoP nonce) must not replay the jti.
	assertion func() (string, error)
}

// grant is the sealed plaintext of a store.KindOAuth row: the tokens and what refreshing them
// needs. It exists only in memory and sealed; formatting it shows nothing.
type grant struct {
	AccessToken        string    `json:"accessToken"`
	RefreshToken       string    `json:"refreshToken,omitempty"`
	Expiry             time.Time `json:"expiry,omitzero"`   // zero: the server did not say
	Lifetime           int64     `json:"lifetime,omitzero"` // expires_in, seconds
	Scope              string    `json:"scope,omitempty"`
	Issuer             string    `json:"issuer"`
	TokenEndpoint      string    `json:"tokenEndpoint"`
	RevocationEndpoint string    `json:"revocationEndpoint,omitempty"`
	Resource           string    `json:"resource"`
	Client             client    `json:"client"`
	// Requested are the scopes asked for in the authorization that gave these tokens;
	// StepUps counts the step-up authorizations that led to it, StepUpScopes (set by
	// [Manager.StepUp]) are the scopes the next authorization must ask for.
	Requested    []string `json:"requested,omitempty"`
	StepUps      int      `json:"stepUps,omitempty"`
	StepUpScopes []string `json:"stepUpScopes,omitempty"`
	// DPoPKey, when set, is the key the tokens are bound to (PKCS#8; RFC 9449): the access
	// token is presented with a proof signed by it, and refreshing needs it too.
	DPoPKey []byte `json:"dpopKey,omitempty"`
	// Version changes each time new tokens are written, so that Refresh can tell that another
	// caller refreshed while it waited.
	Version string `json:"version"`
	// LeaseID/LeaseUntil: a refresh is running under this lease (in this or another process);
	// others wait for it rather than spending the same refresh token.
	LeaseID    string    `json:"leaseId,omitempty"`
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
}

// pending is the sealed plaintext of a KindPending row: an authorization begun by Begin.
type pending struct {
	StateHash          string    `json:"stateHash"`
	Verifier           string    `json:"verifier"`
	Client             client    `json:"client"`
	Issuer             string    `json:"issuer"`
	IssSupported       bool      `json:"issSupported,omitempty"` // RFC 9207 advertised
	TokenEndpoint      string    `json:"tokenEndpoint"`
	RevocationEndpoint string    `json:"revocationEndpoint,omitempty"`
	Resource           string    `json:"resource"`
	Scopes             []string  `json:"scopes,omitempty"`
	StepUps            int       `json:"stepUps,omitempty"` // step-ups that led to this authorization
	RedirectURI        string    `json:"redirectUri"`
	DPoPKey            []byte    `json:"dpopKey,omitempty"` // the key the tokens will be bound to
	ExpiresAt          time.Time `json:"expiresAt"`
	Claimed            bool      `json:"claimed,omitempty"` // a callback took it: one use
}

// stateIndex is the (non-secret) value of an nsState record.
type stateIndex struct {
	Identity  string    `json:"identity"`
	Server    string    `json:"server"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// registered is the value of an nsClient record; the secret is sealed.
type registered struct {
	Issuer          string       `json:"issuer"`
	ClientID        string       `json:"clientId"`
	Method          string       `json:"method"`
	SecretExpiresAt time.Time    `json:"secretExpiresAt,omitzero"`
	Secret          store.Sealed `json:"secret"`
}

// Redaction: none of these may ever reach a log or an error text.

func (client) String() string        { return secret.Redacted }
func (client) GoString() string      { return secret.Redacted }
func (client) LogValue() slog.Value  { return slog.StringValue(secret.Redacted) }
func (grant) String() string         { return secret.Redacted }
func (grant) GoString() string       { return secret.Redacted }
func (grant) LogValue() slog.Value   { return slog.StringValue(secret.Redacted) }
func (pending) String() string       { return secret.Redacted }
func (pending) GoString() string     { return secret.Redacted }
func (pending) LogValue() slog.Value { return slog.StringValue(secret.Redacted) }

// hashState is the key under which a state is indexed: the state itself, a bearer secret for
// the callback, is never stored.
func hashState(state string) string {
	s := sha256.Sum256([]byte(state))
	return hex.EncodeToString(s[:])
}

// grantKey is the row of identity's token set for server.
func grantKey(identity, server string) store.CredentialKey {
	return store.CredentialKey{Identity: identity, Server: server, Kind: store.KindOAuth}
}

// pendingKey is the row of identity's pending authorization for server.
func pendingKey(identity, server string) store.CredentialKey {
	return store.CredentialKey{Identity: identity, Server: server, Kind: KindPending}
}

// sealJSON marshals v and seals it for the row k.
func (m *Manager) sealJSON(k store.CredentialKey, v any) (store.Sealed, error) {
	return m.keyring.SealJSON(k, v)
}

// openJSON opens s for the row k into v.
func (m *Manager) openJSON(k store.CredentialKey, s store.Sealed, v any) error {
	return m.keyring.OpenJSON(k, s, v)
}

func (m *Manager) openGrant(k store.CredentialKey, s store.Sealed) (grant, error) {
	var g grant
	err := m.openJSON(k, s, &g)
	return g, err
}

func (m *Manager) openPending(k store.CredentialKey, s store.Sealed) (pending, error) {
	var p pending
	err := m.openJSON(k, s, &p)
	return p, err
}

// putStateIndex replaces the state index records of (identity, server) with one for stateHash:
// only the newest link of a user for a server is indexed.
func (m *Manager) putStateIndex(ctx context.Context, stateHash string, idx stateIndex) error {
	old, err := m.records.QueryRecords(ctx, nsState,
		store.TagFilter{Name: "identity", Value: idx.Identity}, store.TagFilter{Name: "server", Value: idx.Server})
	if err != nil {
		return fmt.Errorf("index state: %w", err)
	}
	ops := make([]store.RecordOp, 0, len(old)+1)
	for _, r := range old {
		ops = append(ops, store.RecordOp{Key: r.Key, Delete: true})
	}
	b, err := json.Marshal(idx)
	if err != nil {
		return fmt.Errorf("index state: %w", err)
	}
	ops = append(ops, store.RecordOp{Key: stateHash, Value: b, Tags: []store.Tag{
		{Name: "identity", Value: idx.Identity}, {Name: "server", Value: idx.Server},
	}})
	if err := m.records.BatchRecords(ctx, nsState, ops); err != nil {
		return fmt.Errorf("index state: %w", err)
	}
	return nil
}

// deleteStateIndex removes every state index record of (identity, server).
func (m *Manager) deleteStateIndex(ctx context.Context, identity, server string) error {
	old, err := m.records.QueryRecords(ctx, nsState,
		store.TagFilter{Name: "identity", Value: identity}, store.TagFilter{Name: "server", Value: server})
	if err != nil {
		return fmt.Errorf("delete state index: %w", err)
	}
	if len(old) == 0 {
		return nil
	}
	ops := make([]store.RecordOp, 0, len(old))
	for _, r := range old {
		ops = append(ops, store.RecordOp{Key: r.Key, Delete: true})
	}
	if err := m.records.BatchRecords(ctx, nsState, ops); err != nil {
		return fmt.Errorf("delete state index: %w", err)
	}
	return nil
}

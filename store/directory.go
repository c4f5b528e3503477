package store

import (
	"context"
	"time"
)

// Identity is what the bot last learned of a user at login: their display name and roles.
type Identity struct {
	Identity    string
	DisplayName string
	Roles       []string
	UpdatedAt   time.Time
}

// Directory remembers every identity that logged in, with its roles as of its last login, so
// that approvers can be found (and told of new requests) while offline, and a requester's
// current roles checked when an approved call finally runs.
type Directory interface {
	// PutIdentity records identity's display name and roles (replacing what was recorded).
	PutIdentity(ctx context.Context, id Identity) error
	// GetIdentity returns what was last recorded for identity, or ErrNotFound.
	GetIdentity(ctx context.Context, identity string) (Identity, error)
	// IdentitiesWithRoles returns the identities holding any of roles, sorted (indexed by role).
	IdentitiesWithRoles(ctx context.Context, roles []string) ([]string, error)
}

package store

import (
	"context"
	"fmt"
)

// Resealer re-encrypts a sealed value under the current key (store/secret's Keyring).
type Resealer interface {
	CurrentKeyID() string
	Reseal(k CredentialKey, s Sealed) (Sealed, error)
}

// RotateStats reports what [RotateCredentials] did.
type RotateStats struct {
	Resealed int // rows now sealed under the current key
	Current  int // rows found already under the current key while rotating (raced writers)
}

// RotateCredentials re-seals every credential row not sealed under r's current key. Each row is
// rewritten in its own updater transaction, so writers running at the same time lose nothing, and
// a rotation that stops half way can simply be run again. It stops at the first row it cannot
// open (its key is missing, or it was tampered with) and returns that error with the counts so far.
func RotateCredentials(ctx context.Context, c Credentials, r Resealer) (RotateStats, error) {
	var st RotateStats
	cur := r.CurrentKeyID()
	var after CredentialKey
	for {
		page, err := c.ListCredentials(ctx, CredentialQuery{After: after, Limit: 100, NotKeyID: cur})
		if err != nil {
			return st, fmt.Errorf("rotate credentials: list: %w", err)
		}
		if len(page) == 0 {
			return st, nil
		}
		for _, row := range page {
			k := CredentialKey{Identity: row.Identity, Server: row.Server, Kind: row.Kind}
			after = k
			already := false
			_, err := c.UpdateCredential(ctx, k, func(c Credential) (Credential, error) {
				already = c.Secret.KeyID == cur
				if already {
					return c, nil
				}
				s, err := r.Reseal(k, c.Secret)
				if err != nil {
					return c, err
				}
				c.Secret = s
				return c, nil
			})
			switch {
			case err == nil && already:
				st.Current++
			case err == nil:
				st.Resealed++
			case isNotFound(err):
				// deleted while we rotated: nothing to do
			default:
				return st, fmt.Errorf("rotate credentials: %w", err)
			}
		}
	}
}

package sqlstore

import (
	"context"
	"fmt"

	"github.com/packbot/packbot/store"
)

const (
	credentialColumns = `identity, server, kind, key_id, nonce, ciphertext, status, created_at, updated_at`
	// qPutCredential keeps created_at of a row it replaces.
	qPutCredential = `INSERT INTO credentials (` + credentialColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
	ON CONFLICT (identity, server, kind) DO UPDATE SET key_id = excluded.key_id, nonce = excluded.nonce,
	ciphertext = excluded.ciphertext, status = excluded.status, updated_at = excluded.updated_at`
	qGetCredential = `SELECT ` + credentialColumns + ` FROM credentials
	WHERE identity = $1 AND server = $2 AND kind = $3`
	qLockCredential   = qGetCredential + ` FOR UPDATE`
	qUpdateCredential = `UPDATE credentials SET key_id = $4, nonce = $5, ciphertext = $6, status = $7, updated_at = $8
	WHERE identity = $1 AND server = $2 AND kind = $3 RETURNING ` + credentialColumns
	qDeleteCredentials = `DELETE FROM credentials WHERE identity = $1 AND server = $2 AND ($3 = '' OR kind = $3)`
	qListCredentials   = `SELECT ` + credentialColumns + ` FROM credentials
	WHERE ($1 = '' OR identity = $1) AND ($2 = '' OR server = $2) AND ($3 = '' OR key_id <> $3)
	AND (identity, server, kind) > ($4, $5, $6)
	ORDER BY identity, server, kind LIMIT $7`
)

// PutCredential inserts or replaces a credential row. CreatedAt defaults to the store's clock
// and is kept when a row is replaced; UpdatedAt is always the store's clock.
func (db *DB) PutCredential(ctx context.Context, c store.Credential) error {
	now := db.stamp()
	created := c.CreatedAt
	if created.IsZero() {
		created = now
	}
	_, err := db.conn().exec(ctx, qPutCredential, c.Identity, c.Server, c.Kind, c.Secret.KeyID,
		blob(c.Secret.Nonce), blob(c.Secret.Ciphertext), c.Status, millis(created), millis(now))
	if err != nil {
		return fmt.Errorf("put credential %s: %w", describeKey(keyOf(c)), err)
	}
	return nil
}

// GetCredential returns one row, or store.ErrNotFound.
func (db *DB) GetCredential(ctx context.Context, k store.CredentialKey) (store.Credential, error) {
	c, err := scanCredential(db.conn().queryRow(ctx, qGetCredential, k.Identity, k.Server, k.Kind))
	if err != nil {
		return store.Credential{}, fmt.Errorf("get credential %s: %w", describeKey(k), err)
	}
	return c, nil
}

// UpdateCredential runs update on the locked row and writes the result in the same transaction;
// store.ErrNotFound when the row does not exist. The key and CreatedAt cannot be changed.
func (db *DB) UpdateCredential(ctx context.Context, k store.CredentialKey, update func(store.Credential) (store.Credential, error)) (store.Credential, error) {
	var out store.Credential
	err := db.tx(ctx, func(c conn) error {
		cur, err := scanCredential(c.queryRow(ctx, qLockCredential, k.Identity, k.Server, k.Kind))
		if err != nil {
			return err
		}
		next, err := update(cur)
		if err != nil {
			return err
		}
		out, err = scanCredential(c.queryRow(ctx, qUpdateCredential, k.Identity, k.Server, k.Kind,
			next.Secret.KeyID, blob(next.Secret.Nonce), blob(next.Secret.Ciphertext), next.Status, millis(db.stamp())))
		return err
	})
	if err != nil {
		return store.Credential{}, fmt.Errorf("update credential %s: %w", describeKey(k), err)
	}
	return out, nil
}

// DeleteCredentials removes the rows of identity on server; kind "" removes every kind.
func (db *DB) DeleteCredentials(ctx context.Context, identity, server, kind string) error {
	if _, err := db.conn().exec(ctx, qDeleteCredentials, identity, server, kind); err != nil {
		return fmt.Errorf("delete credentials %s: %w", describeKey(store.CredentialKey{Identity: identity, Server: server, Kind: kind}), err)
	}
	return nil
}

// ListCredentials pages through rows ordered by (Identity, Server, Kind).
func (db *DB) ListCredentials(ctx context.Context, q store.CredentialQuery) ([]store.Credential, error) {
	cs, err := query(ctx, db.conn(), scanCredential, qListCredentials, q.Identity, q.Server, q.NotKeyID,
		q.After.Identity, q.After.Server, q.After.Kind, limitArg(q.Limit))
	if err != nil {
		return nil, fmt.Errorf("list credentials: %w", err)
	}
	return cs, nil
}

func scanCredential(r scanner) (store.Credential, error) {
	var (
		c                store.Credential
		created, updated int64
	)
	err := r.Scan(&c.Identity, &c.Server, &c.Kind, &c.Secret.KeyID, &c.Secret.Nonce, &c.Secret.Ciphertext,
		&c.Status, &created, &updated)
	c.CreatedAt, c.UpdatedAt = fromMillis(created), fromMillis(updated)
	return c, err
}

func keyOf(c store.Credential) store.CredentialKey {
	return store.CredentialKey{Identity: c.Identity, Server: c.Server, Kind: c.Kind}
}

// describeKey names a credential row in errors: identity/server/kind.
func describeKey(k store.CredentialKey) string {
	return k.Identity + "/" + k.Server + "/" + k.Kind
}

var _ store.Credentials = (*DB)(nil)

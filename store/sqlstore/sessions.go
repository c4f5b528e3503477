package sqlstore

import (
	"context"
	"fmt"

	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
)

const (
	sessionColumns = `connection_id, state, language, authenticated, identity, display_name, roles,
	credential_expiry, flow, menu_digest, login, created_at, updated_at`
	qGetSession  = `SELECT ` + sessionColumns + ` FROM sessions WHERE connection_id = $1`
	qLockSession = qGetSession + ` FOR UPDATE`
	// qEnsureSession inserts a placeholder row (created_at 0) so that there is a row to lock even
	// for a new connection; the updater transaction replaces it or rolls it back.
	qEnsureSession = `INSERT INTO sessions (connection_id, created_at, updated_at) VALUES ($1, 0, 0)
	ON CONFLICT DO NOTHING`
	qUpdateSession = `UPDATE sessions SET state = $2, language = $3, authenticated = $4, identity = $5,
	display_name = $6, roles = $7, credential_expiry = $8, flow = $9, menu_digest = $10, login = $11,
	created_at = $12, updated_at = $13 WHERE connection_id = $1 RETURNING ` + sessionColumns
	qDeleteSession      = `DELETE FROM sessions WHERE connection_id = $1`
	qSessionsByIdentity = `SELECT ` + sessionColumns + ` FROM sessions
	WHERE identity = $1 AND authenticated ORDER BY updated_at DESC, connection_id`
	qListSessions = `SELECT ` + sessionColumns + ` FROM sessions
	WHERE connection_id > $1 AND updated_at >= $2 AND created_at > 0 ORDER BY connection_id LIMIT $3`
)

// GetSession returns the session of a connection, or store.ErrNotFound.
func (db *DB) GetSession(ctx context.Context, connectionID string) (store.Session, error) {
	s, err := scanSession(db.conn().queryRow(ctx, qGetSession, connectionID))
	if err != nil {
		return store.Session{}, fmt.Errorf("get session %s: %w", logid.Conn(connectionID), err)
	}
	return s, nil
}

// UpdateSession runs update on the locked session row (creating it when missing) and writes the
// result in the same transaction. The store keeps ConnectionID and CreatedAt, and sets UpdatedAt.
func (db *DB) UpdateSession(ctx context.Context, connectionID string, update func(store.Session) (store.Session, error)) (store.Session, error) {
	var out store.Session
	err := db.tx(ctx, func(c conn) error {
		if _, err := c.exec(ctx, qEnsureSession, connectionID); err != nil {
			return err
		}
		cur, err := scanSession(c.queryRow(ctx, qLockSession, connectionID))
		if err != nil {
			return err
		}
		if cur.CreatedAt.IsZero() { // the placeholder: present the caller a zero session
			cur = store.Session{ConnectionID: connectionID}
		}
		s, err := update(cur)
		if err != nil {
			return err
		}
		created := cur.CreatedAt
		now := db.stamp()
		if created.IsZero() {
			created = now
		}
		roles, err := stringsArg(s.Roles)
		if err != nil {
			return err
		}
		out, err = scanSession(c.queryRow(ctx, qUpdateSession, connectionID, s.State, s.Language,
			s.Authenticated, s.Identity, s.DisplayName, roles, millis(s.CredentialExpiry), jsonArg(s.Flow),
			s.MenuDigest, s.Login, millis(created), millis(now)))
		return err
	})
	if err != nil {
		return store.Session{}, fmt.Errorf("update session %s: %w", logid.Conn(connectionID), err)
	}
	return out, nil
}

// DeleteSession removes a session; deleting a missing one is not an error.
func (db *DB) DeleteSession(ctx context.Context, connectionID string) error {
	if _, err := db.conn().exec(ctx, qDeleteSession, connectionID); err != nil {
		return fmt.Errorf("delete session %s: %w", logid.Conn(connectionID), err)
	}
	return nil
}

// SessionsByIdentity returns the authenticated sessions of identity, most recently updated first.
func (db *DB) SessionsByIdentity(ctx context.Context, identity string) ([]store.Session, error) {
	ss, err := query(ctx, db.conn(), scanSession, qSessionsByIdentity, identity)
	if err != nil {
		return nil, fmt.Errorf("sessions of %s: %w", identity, err)
	}
	return ss, nil
}

// ListSessions pages through the sessions in connection id order.
func (db *DB) ListSessions(ctx context.Context, q store.SessionQuery) ([]store.Session, error) {
	if q.Limit <= 0 {
		q.Limit = 1000
	}
	ss, err := query(ctx, db.conn(), scanSession, qListSessions, q.After, millis(q.UpdatedSince), q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list sessions after %q: %w", q.After, err)
	}
	return ss, nil
}

func scanSession(r scanner) (store.Session, error) {
	var (
		s                       store.Session
		roles, flow             []byte
		expiry, created, update int64
	)
	err := r.Scan(&s.ConnectionID, &s.State, &s.Language, &s.Authenticated, &s.Identity,
		&s.DisplayName, &roles, &expiry, &flow, &s.MenuDigest, &s.Login, &created, &update)
	if err != nil {
		return store.Session{}, err
	}
	s.Roles, err = scanStrings(roles)
	s.CredentialExpiry, s.CreatedAt, s.UpdatedAt = fromMillis(expiry), fromMillis(created), fromMillis(update)
	if len(flow) > 0 {
		s.Flow = flow
	}
	return s, err
}

var _ store.Sessions = (*DB)(nil)

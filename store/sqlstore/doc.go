// Package sqlstore implements [store.Store] on PostgreSQL (pgx, for production and every
// deployment with more than one replica) and on SQLite (modernc, pure Go, the embedded default).
//
// It owns the SQL: every query is written once, in PostgreSQL syntax with $N parameters, and the
// SQLite dialect rewrites it (see dialect.rebind); each driver maps its unique-violation error to
// [store.ErrConflict]. It owns the schema too: numbered scripts embedded from migrations/, one
// version sequence for both dialects (a line ending in "-- only: postgres" or "-- only: sqlite"
// belongs to that dialect), applied by Open under a lock so that replicas starting together
// migrate once, and recorded in packbot_schema_version. A database migrated by a newer binary is
// refused with [ErrSchemaTooNew]. Timestamps are stored as unix milliseconds, so times come
// back in UTC truncated to the millisecond. Audit rows are written by one writer (appendAudit)
// in the transaction of what caused them, as links of hash chains (see audit.go).
//
// It does not seal secrets (store/secret does, before they get here) and knows nothing of what
// the rows mean; the behaviour every backend must share is pinned by store/storetest.
//
//	db, err := sqlstore.OpenSQLite(ctx, "data/packbot.db", nil)
//	// or: db, err := sqlstore.OpenPostgres(ctx, os.Getenv("DATABASE_URL"), &sqlstore.Options{Logger: logger})
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//	m, _ := store.NewOutboxMessage("alice", "", "text", map[string]string{"text": "hi"})
//	id, err := db.EnqueueOutbox(ctx, m)
package sqlstore

package sqlstore

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/storetest"
)

// database creates one fresh, empty database and returns a function that opens it; every call
// of that function opens the same database.
type database func(t testing.TB) func(ctx context.Context) (*DB, error)

var backends = []struct {
	name     string
	database database
}{
	{"SQLite", sqliteDatabase},
	{"Postgres", postgresDatabase},
	{"PostgresSealed", sealedPostgresDatabase},
}

func TestConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { storetest.Run(t, newStore(b.database)) })
	}
}

func TestConcurrency(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { storetest.RunConcurrency(t, newStore(b.database)) })
	}
}

// inboxRaceRepetitions: as raceRepetitions, for storetest.RunInboxRaces.
var inboxRaceRepetitions = map[string]int{"SQLite": 5, "Postgres": 30}

// TestInboxRaces races two handles on one database (two replicas) through the inbox.
func TestInboxRaces(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			storetest.RunInboxRaces(t, func(t *testing.T) (store.Store, store.Store) {
				opener := b.database(t)
				return open(t, opener), open(t, opener)
			}, inboxRaceRepetitions[b.name])
		})
	}
}

func newStore(database database) func(t *testing.T) store.Store {
	return func(t *testing.T) store.Store { return open(t, database(t)) }
}

// open opens a database and closes it when the test ends.
func open(t testing.TB, open func(ctx context.Context) (*DB, error)) *DB {
	t.Helper()
	db, err := open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// testOptions log to the test and use a clock that advances a millisecond on every reading, so
// that every timestamp the store sets differs and ordering by time is exact.
func testOptions(t testing.TB) *Options {
	var ticks atomic.Int64
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &Options{
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		Now:    func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Millisecond) },
	}
}

func sqliteDatabase(t testing.TB) func(ctx context.Context) (*DB, error) {
	path := filepath.Join(t.TempDir(), "data", "packbot.db") // data/ does not exist yet
	return func(ctx context.Context) (*DB, error) { return OpenSQLite(ctx, path, testOptions(t)) }
}

// postgresDatabase opens stores in a fresh schema of the database at TEST_DATABASE_URL (see
// storetest.PostgresDSN: skipped without it, a failure under CI).
func postgresDatabase(t testing.TB) func(ctx context.Context) (*DB, error) {
	t.Helper()
	dsn := storetest.PostgresDSN(t)
	return func(ctx context.Context) (*DB, error) { return OpenPostgres(ctx, dsn, testOptions(t)) }
}

// testAuditKey is the audit key of sealedPostgresDatabase's stores.
var testAuditKey = []byte("0123456789abcdef0123456789abcdef")

// sealedPostgresDatabase is postgresDatabase with an audit key: records are written unsealed and
// sealed after their commit (Options.AuditKey).
func sealedPostgresDatabase(t testing.TB) func(ctx context.Context) (*DB, error) {
	t.Helper()
	dsn := storetest.PostgresDSN(t)
	return func(ctx context.Context) (*DB, error) {
		o := testOptions(t)
		o.AuditKey = testAuditKey
		return OpenPostgres(ctx, dsn, o)
	}
}

// TestErrorsHideConnectionIDs: a store error names a connection by its log id, never by its
// raw id (errors end up in WARN lines).
func TestErrorsHideConnectionIDs(t *testing.T) {
	db, err := OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "e.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	const raw = "5f0c2d7e-raw-connection-id"
	_, err = db.GetSession(t.Context(), raw)
	if err == nil || strings.Contains(err.Error(), raw) || !strings.Contains(err.Error(), logid.Conn(raw)) {
		t.Fatalf("error %v: want the connection's log id, not its id", err)
	}
}

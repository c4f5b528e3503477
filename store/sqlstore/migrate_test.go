package sqlstore

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/packbot/packbot/store"
)

func TestEmbeddedMigrations(t *testing.T) {
	if len(migrations) == 0 {
		t.Fatal("no embedded migrations")
	}
	for _, m := range migrations {
		if header := fmt.Sprintf("-- v%d: ", m.version); !strings.HasPrefix(m.script, header) {
			t.Errorf("%s: first line must be a header %q followed by the purpose", m.name, header+"…")
		}
		for _, d := range []*dialect{postgresDialect, sqliteDialect} {
			if _, err := d.filter(m.script); err != nil {
				t.Errorf("%s for %s: %v", m.name, d.name, err)
			}
		}
	}
}

func TestMigrationNumbering(t *testing.T) {
	for name, files := range map[string][]string{
		"gap":       {"001-a.sql", "003-c.sql"},
		"no number": {"001-a.sql", "second.sql"},
	} {
		fsys := fstest.MapFS{}
		for _, f := range files {
			fsys["migrations/"+f] = &fstest.MapFile{Data: []byte("-- header\n")}
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: migrations %v accepted", name, files)
				}
			}()
			mustLoadMigrations(fsys)
		}()
	}
}

// TestConcurrentOpen opens one fresh database from several goroutines at once, as replicas
// starting together do: every open succeeds and the schema is migrated exactly once.
func TestConcurrentOpen(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opener := b.database(t)
			const n = 4
			dbs, errs := make([]*DB, n), make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { dbs[i], errs[i] = opener(t.Context()) })
			}
			wg.Wait()
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("open %d: %v", i, errs[i])
				}
				t.Cleanup(func() { _ = dbs[i].Close() })
			}
			for i, db := range dbs {
				v, err := db.SchemaVersion(t.Context())
				if err != nil || v != len(migrations) {
					t.Fatalf("store %d: schema version %d, %v; want %d", i, v, err, len(migrations))
				}
				if err := db.Ping(t.Context()); err != nil {
					t.Fatalf("store %d: %v", i, err)
				}
			}
			var applied int
			if err := dbs[0].conn().queryRow(t.Context(), `SELECT COUNT(*) FROM packbot_schema_version`).Scan(&applied); err != nil || applied != len(migrations) {
				t.Fatalf("%d migrations recorded (%v), want %d", applied, err, len(migrations))
			}
		})
	}
}

// TestFutureVersion refuses a database that a newer binary migrated.
func TestFutureVersion(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opener := b.database(t)
			db := open(t, opener)
			if _, err := db.conn().exec(t.Context(), qRecordVersion, len(migrations)+1, 0); err != nil {
				t.Fatal(err)
			}
			if err := db.Ping(t.Context()); err == nil {
				t.Error("Ping accepted a schema newer than the binary")
			}
			_, err := opener(t.Context())
			if !errors.Is(err, ErrSchemaTooNew) {
				t.Fatalf("open: error %v, want %v", err, ErrSchemaTooNew)
			}
			if want := fmt.Sprintf("version %d", len(migrations)+1); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
}

// TestConflict checks each driver's unique-violation mapper on a real violation.
func TestConflict(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			db := open(t, b.database(t))
			_, err := db.conn().exec(t.Context(), qRecordVersion, 1, 0)
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("duplicate key: error %v, want %v", err, store.ErrConflict)
			}
		})
	}
}

package didcomm

import (
	"context"
	"path/filepath"
	"testing"

	afgostoragetest "github.com/hyperledger/aries-framework-go/test/component/storage"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
)

// testStores opens an empty store of each backend (PostgreSQL when TEST_DATABASE_URL is set).
func testStores(t testing.TB) map[string]func(t testing.TB) store.Store {
	return map[string]func(t testing.TB) store.Store{
		"SQLite": func(t testing.TB) store.Store {
			st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "packbot.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
		"Postgres": func(t testing.TB) store.Store {
			st, err := sqlstore.OpenPostgres(context.Background(), storetest.PostgresDSN(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
}

// TestStorageProviderConformance holds the adapter to aries-framework-go's own storage suite.
// Paging and sorting are not implemented (afgo never asks for them), so those cases are skipped.
func TestStorageProviderConformance(t *testing.T) {
	for name, open := range testStores(t) {
		t.Run(name, func(t *testing.T) {
			p := newStorageProvider(context.Background(), open(t), "afgo/")
			afgostoragetest.TestAll(t, p, afgostoragetest.SkipSortTests(false), afgostoragetest.SkipIteratorTotalItemTests(false))
		})
	}
}

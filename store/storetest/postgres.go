package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresDSN creates a schema with a random name in the database at TEST_DATABASE_URL, drops it
// when the test ends, and returns a connection string whose search_path is that schema: every
// store opened with it sees an empty, private database. Without TEST_DATABASE_URL, or when the
// database does not answer, the test is skipped — and fails when CI=true, so that CI can never
// pass without having tested PostgreSQL.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	unavailable := t.Skipf
	if os.Getenv("CI") == "true" {
		unavailable = t.Fatalf
	}
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		unavailable("TEST_DATABASE_URL is not set: no PostgreSQL to test against")
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	schema := "packbot_test_" + hex.EncodeToString(b[:])
	admin := func(ctx context.Context, sql string) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(ctx) }()
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := admin(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		unavailable("PostgreSQL at TEST_DATABASE_URL: %v", err)
	}
	t.Cleanup(func() {
		if err := admin(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

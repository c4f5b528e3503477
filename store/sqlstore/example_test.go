package sqlstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
)

func ExampleOpenSQLite() {
	dir, err := os.MkdirTemp("", "packbot")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()

	ctx := context.Background()
	db, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "data", "packbot.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = db.Close() }()

	if _, err := db.EnqueueOutbox(ctx, store.OutboxMessage{Identity: "alice", Kind: "text", Payload: []byte(`{"text":"hi"}`)}); err != nil {
		fmt.Println(err)
		return
	}
	n, err := db.PendingOutbox(ctx, "alice")
	fmt.Println(n, err, db.Ping(ctx))
	// Output: 1 <nil> <nil>
}

func ExampleOpenPostgres() {
	ctx := context.Background()
	db, err := sqlstore.OpenPostgres(ctx, os.Getenv("DATABASE_URL"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = db.Close() }()
	fmt.Println(db.Ping(ctx))
}

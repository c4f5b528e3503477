package rollout_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/packbot/packbot/rollout"
	"github.com/packbot/packbot/store/sqlstore"
)

// A pack applied becomes the next version; the same content again changes nothing; every
// replica on the store moves to it, and Await waits until they all run it.
func ExampleRegistry_Apply() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rollout")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "packbot.db"), nil)
	if err != nil {
		panic(err)
	}
	defer func() { _ = st.Close() }()

	reg := rollout.NewRegistry(st, nil)
	for _, text := range []string{"metadata: {id: bank}\n", "metadata: {id: bank}\n", "metadata: {id: bank2}\n"} {
		v, created, err := reg.Apply(ctx, []byte(text), "agent-pack.yaml", rollout.OriginApply)
		if err != nil {
			panic(err)
		}
		fmt.Println(v.Version, created)
	}
	// Output:
	// 1 true
	// 1 false
	// 2 true
}

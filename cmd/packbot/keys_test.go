package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
)

// genOut is all `keys gen` prints on stdout, so that `export K=$(packbot keys gen)` works; the
// key id goes to stderr.
var (
	genOut = regexp.MustCompile(`^([0-9a-f]{64})\n$`)
	genID  = regexp.MustCompile(`\bid ([0-9a-f]{16})\b`)
)

func genKey(t *testing.T) (hexKey string, k secret.Key) {
	t.Helper()
	code, out, errOut := cli(t, nil, "keys", "gen")
	m, id := genOut.FindStringSubmatch(out), genID.FindStringSubmatch(errOut)
	if code != 0 || m == nil || id == nil {
		t.Fatalf("keys gen: exit %d, %q %q", code, out, errOut)
	}
	k, err := secret.ParseKey(m[1])
	if err != nil || k.ID() != id[1] {
		t.Fatalf("key %s: id %s, err %v", m[1], k.ID(), err)
	}
	return m[1], k
}

func TestKeysGenMakesDistinctKeys(t *testing.T) {
	a, _ := genKey(t)
	b, _ := genKey(t)
	if a == b {
		t.Fatal("two keys alike")
	}
}

// storeBackends opens an empty store of each kind for the test, and gives the flags that make
// the CLI open the same store.
var testBackends = []struct {
	name  string
	setup func(t *testing.T) (store.Store, []string)
}{
	{"SQLite", func(t *testing.T) (store.Store, []string) {
		dir := t.TempDir()
		st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, "packbot.db"), nil)
		return closeLater(t, st, err), []string{"--data-dir", dir}
	}},
	{"Postgres", func(t *testing.T) (store.Store, []string) {
		dsn := storetest.PostgresDSN(t)
		st, err := sqlstore.OpenPostgres(context.Background(), dsn, nil)
		return closeLater(t, st, err), []string{"--database-url", dsn}
	}},
}

func closeLater(t *testing.T, st *sqlstore.DB, err error) store.Store {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestKeysRotate(t *testing.T) {
	for _, b := range testBackends {
		t.Run(b.name, func(t *testing.T) {
			st, flags := b.setup(t)
			oldHex, oldKey := genKey(t)
			newHex, newKey := genKey(t)
			oldRing, _ := secret.NewKeyring(oldKey)
			ctx := context.Background()

			rows := map[store.CredentialKey]string{
				{Identity: "ana@acme.corp", Server: "github", Kind: store.KindConfig}: `{"token":"ghp_ana"}`,
				{Identity: "ana@acme.corp", Server: "linear", Kind: store.KindConfig}: `{"token":"lin_ana"}`,
				{Identity: "bob@acme.corp", Server: "github", Kind: store.KindOAuth}:  `{"access_token":"gho_bob"}`,
				{Identity: "bob@acme.corp", Server: "github", Kind: store.KindConfig}: `{"token":"ghp_bob"}`,
				{Identity: "cy@acme.corp", Server: "notion", Kind: store.KindConfig}:  `{"token":"ntn_cy"}`,
				{Identity: "cy@acme.corp", Server: "notion", Kind: store.KindDraft}:   `{"field":"token"}`,
				{Identity: "dee@acme.corp", Server: "github", Kind: store.KindConfig}: `{"token":"ghp_dee"}`,
				{Identity: "eve@acme.corp", Server: "github", Kind: store.KindConfig}: `{"token":"ghp_eve"}`,
				{Identity: "fay@acme.corp", Server: "github", Kind: store.KindConfig}: `{"token":"ghp_fay"}`,
				{Identity: "gus@acme.corp", Server: "github", Kind: store.KindConfig}: `{"token":"ghp_gus"}`,
				{Identity: "hal@acme.corp", Server: "github", Kind: store.KindConfig}: `{"token":"ghp_hal"}`,
				{Identity: "ivy@acme.corp", Server: "github", Kind: store.KindConfig}: `{"token":"ghp_ivy"}`,
			}
			for k, pt := range rows {
				sealed, err := oldRing.Seal(k, []byte(pt))
				if err != nil {
					t.Fatal(err)
				}
				if err := st.PutCredential(ctx, store.Credential{Identity: k.Identity, Server: k.Server, Kind: k.Kind, Secret: sealed}); err != nil {
					t.Fatal(err)
				}
			}
			both, _ := secret.NewKeyring(newKey, oldKey)
			newOnly, _ := secret.NewKeyring(newKey)
			readAll := func(kr *secret.Keyring) (underNew int, err error) {
				for k, want := range rows {
					c, err := st.GetCredential(ctx, k)
					if err != nil {
						return 0, err
					}
					pt, err := kr.Open(k, c.Secret)
					if err != nil {
						return 0, err
					}
					if string(pt) != want {
						t.Fatalf("%v: %q, want %q", k, pt, want)
					}
					if c.Secret.KeyID == newKey.ID() {
						underNew++
					}
				}
				return underNew, nil
			}
			// Before rotation, old-key rows read with the old key configured as old.
			if n, err := readAll(both); err != nil || n != 0 {
				t.Fatalf("before rotation: %d under the new key, err %v", n, err)
			}

			// Without the old key the rotation cannot open the rows: a clear error, nothing changed.
			code, out, errOut := cli(t, map[string]string{"MCP_CONFIG_ENCRYPTION_KEY": newHex}, append([]string{"keys", "rotate"}, flags...)...)
			if code != 1 || !strings.Contains(errOut, "sealed under a key that is not configured") || !strings.Contains(errOut, "MCP_CONFIG_ENCRYPTION_KEYS_OLD") ||
				!strings.Contains(out, "0 credential row(s) re-sealed") {
				t.Fatalf("rotate without old key: exit %d\n%s%s", code, out, errOut)
			}
			if n, err := readAll(both); err != nil || n != 0 {
				t.Fatalf("after failed rotation: %d rows changed, err %v", n, err)
			}

			env := map[string]string{"MCP_CONFIG_ENCRYPTION_KEY": newHex, "MCP_CONFIG_ENCRYPTION_KEYS_OLD": " , " + oldHex}
			code, out, errOut = cli(t, env, append([]string{"keys", "rotate"}, flags...)...)
			if code != 0 || !strings.Contains(out, "12 credential row(s) re-sealed under key "+newKey.ID()) {
				t.Fatalf("rotate: exit %d\n%s%s", code, out, errOut)
			}
			if n, err := readAll(newOnly); err != nil || n != len(rows) {
				t.Fatalf("after rotation: %d of %d under the new key, err %v", n, len(rows), err)
			}
			if _, err := readAll(oldRing); err == nil {
				t.Fatal("the old key alone still opens rotated rows")
			}
			// Running again finds nothing to do.
			code, out, _ = cli(t, env, append([]string{"keys", "rotate"}, flags...)...)
			if code != 0 || !strings.Contains(out, "0 credential row(s) re-sealed") {
				t.Fatalf("second rotate: exit %d %s", code, out)
			}
		})
	}
}

func TestKeysRotateNeedsKey(t *testing.T) {
	code, _, errOut := cli(t, nil, "keys", "rotate", "--data-dir", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "MCP_CONFIG_ENCRYPTION_KEY is not set") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, _, errOut = cli(t, map[string]string{"MCP_CONFIG_ENCRYPTION_KEY": "abc"}, "keys", "rotate", "--data-dir", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "MCP_CONFIG_ENCRYPTION_KEY: malformed key") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/store/sqlstore"
)

// doctorRun runs `packbot doctor` in process with env and returns its exit status and output.
func doctorRun(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	code, out, _ := cli(t, env, append([]string{"doctor", "--timeout", "20s"}, args...)...)
	return code, out
}

// doctorLine is the report line of check name ("" when there is none).
func doctorLine(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(strings.TrimSpace(l[len(f[0]):]), name+" ") {
			return l
		}
	}
	return ""
}

// TestDoctor: a healthy deployment passes every check; a broken MCP server, a key that opens
// no stored credential and an unreachable store each give a FAIL line with the fix, and exit 1.
func TestDoctor(t *testing.T) {
	dir := t.TempDir()
	hexA, hexB := newHexKey(t), newHexKey(t)
	keyA, err := secret.ParseKey(hexA)
	if err != nil {
		t.Fatal(err)
	}
	// A store holding one credential sealed under key A.
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, "packbot.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secret.NewKeyring(keyA)
	if err != nil {
		t.Fatal(err)
	}
	k := store.CredentialKey{Identity: "ana@acme.corp", Server: "vault", Kind: store.KindConfig}
	sealed, err := kr.Seal(k, []byte(`{"token":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutCredential(t.Context(), store.Credential{Identity: k.Identity, Server: k.Server, Kind: k.Kind, Secret: sealed}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	public := httptest.NewServer(http.NotFoundHandler())
	defer public.Close()
	good := writeMCPPack(t, "    - {name: bank, transport: stdio, command: \""+os.Args[0]+"\", args: [mcp, demo-server]}\n")
	llm := agenttest.New(t)
	base := map[string]string{"PACKBOT_DATA_DIR": dir, "MCP_CONFIG_ENCRYPTION_KEY": hexA, "PACKBOT_PUBLIC_URL": public.URL,
		"OPENAI_BASE_URL": llm.URL, "OPENAI_API_KEY": "k"}

	code, out := doctorRun(t, base, "--pack", good)
	if code != 0 {
		t.Fatalf("healthy deployment: exit %d\n%s", code, out)
	}
	for _, name := range []string{"pack", "store", "keys", "llm", "mcp bank", "public"} {
		if l := doctorLine(out, name); !strings.HasPrefix(l, "ok") {
			t.Errorf("%s: %q\n%s", name, l, out)
		}
	}

	t.Run("broken MCP server", func(t *testing.T) {
		broken := writeMCPPack(t, "    - {name: crm, transport: streamable-http, url: \"http://"+freeAddr(t)+"/mcp\", timeoutMs: 2000}\n")
		code, out := doctorRun(t, base, "--pack", broken)
		if l := doctorLine(out, "mcp crm"); code != 1 || !strings.HasPrefix(l, "FAIL") || !strings.Contains(l, "unreachable") || !strings.Contains(l, "packbot mcp smoke --server crm") {
			t.Fatalf("exit %d, line %q\n%s", code, l, out)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		env := map[string]string{"MCP_CONFIG_ENCRYPTION_KEY": hexB}
		for k, v := range base {
			if _, set := env[k]; !set {
				env[k] = v
			}
		}
		code, out := doctorRun(t, env, "--pack", good)
		if l := doctorLine(out, "keys"); code != 1 || !strings.HasPrefix(l, "FAIL") || !strings.Contains(l, "1 of 1") || !strings.Contains(l, secret.EnvOldKeys) {
			t.Fatalf("exit %d, line %q\n%s", code, l, out)
		}
	})
	t.Run("unreachable store", func(t *testing.T) {
		env := map[string]string{"DATABASE_URL": "postgres://packbot:pw-s3cr3t@" + freeAddr(t) + "/packbot?sslmode=disable&connect_timeout=5"}
		for k, v := range base {
			env[k] = v
		}
		code, out := doctorRun(t, env, "--pack", good)
		if l := doctorLine(out, "store"); code != 1 || !strings.HasPrefix(l, "FAIL") || !strings.Contains(l, "DATABASE_URL") || strings.Contains(out, "pw-s3cr3t") {
			t.Fatalf("exit %d, line %q\n%s", code, l, out)
		}
	})
}

// newHexKey is a new MCP_CONFIG_ENCRYPTION_KEY value.
func newHexKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

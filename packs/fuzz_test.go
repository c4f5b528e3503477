package packs_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/packbot/packbot/packs"
)

// FuzzParse feeds arbitrary bytes to the loader: it must never panic, and it either returns a
// pack or an InvalidError whose problems all carry a position.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"demo/agent-pack.yaml", "wise-corporate/agent-pack.yaml", "github-personal/agent-pack.yaml",
		"testdata/mistakes.yaml", "testdata/hologram-full.yaml", "testdata/minimal.json"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "")
	}
	f.Add([]byte("mcp: {servers: [{name: a, url: '${X:-http://h}'}]}"), `[{"name":"b","command":"c"}]`)
	f.Add([]byte("a: &x [*x]"), "")
	f.Add([]byte("mcp: {servers: [{name: m, url: 'http://h/mcp', authentication: {mode: client_credentials, clientId: c, privateKeyFile: k.pem}}]}"),
		`[{"name":"n","url":"http://h","authentication":{"mode":"client_credentials","clientId":"c","clientSecret":"${X}"}}]`)
	f.Fuzz(func(t *testing.T, data []byte, serversConfig string) {
		env := packs.MapEnv(map[string]string{"MCP_SERVERS_CONFIG": serversConfig, "X": "1"})
		p, err := packs.Parse("fuzz.yaml", data, env)
		if err == nil {
			if p == nil {
				t.Fatal("nil pack without error")
			}
			return
		}
		var inv *packs.InvalidError
		if !errors.As(err, &inv) || len(inv.Problems) == 0 {
			t.Fatalf("error %v is not an InvalidError with problems", err)
		}
		for _, pr := range inv.Problems {
			if pr.Pos.File == "" || pr.Message == "" {
				t.Fatalf("problem without position or message: %#v", pr)
			}
		}
	})
}

// FuzzDotEnv: the .env parser never panics, and every name it returns is a valid variable name.
func FuzzDotEnv(f *testing.F) {
	f.Add("A=1\nexport B='x'\nC=\"y\\n\" # c\n#d\n")
	f.Add("A=\"unterminated")
	f.Fuzz(func(t *testing.T, s string) {
		vars, err := packs.ParseDotEnv("fuzz.env", []byte(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.env:") && !strings.HasPrefix(err.Error(), "read fuzz.env") {
				t.Fatalf("error without file:line: %v", err)
			}
			return
		}
		for name := range vars {
			if name == "" || strings.ContainsAny(name, " =\t\n") {
				t.Fatalf("bad name %q", name)
			}
		}
	})
}

// TestAliasBombIsBounded: a few kilobytes of aliases that fan out through servers × roles ×
// tools to a million values must stop with an error, not take minutes.
func TestAliasBombIsBounded(t *testing.T) {
	rep := func(item string, n int) string { return strings.TrimSuffix(strings.Repeat(item+", ", n), ", ") }
	var roles []string
	for i := 0; i < 100; i++ {
		roles = append(roles, fmt.Sprintf("r%d: *t", i))
	}
	src := "t: &t [" + rep("a", 100) + "]\n" +
		"r: &r {" + strings.Join(roles, ", ") + "}\n" +
		"s: &s {name: s, url: 'http://h', toolAccess: {roles: *r}}\n" +
		"mcp: {servers: [" + rep("*s", 100) + "]}\n"
	_, err := packs.Parse("bomb.yaml", []byte(src), nil)
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("err = %.300v", err)
	}
}

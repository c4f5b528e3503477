package main

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packbot/packbot/packs"
)

// TestOpenMCPMachine: a pack with a client_credentials server gets a pool whose shared session
// asks packbot's machine client for tokens; a private key that packbot cannot sign with stops
// serve at start, naming the server, the field and the pack.
func TestOpenMCPMachine(t *testing.T) {
	dir := t.TempDir()
	// A PEM block of the right type passes the pack's check; its content is no key.
	key := filepath.Join(dir, "packbot.pem")
	if err := os.WriteFile(key, []byte("-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "mcp:\n  servers:\n" +
		"    - {name: billing, url: http://mcp.invalid/mcp, authentication: {mode: client_credentials, clientId: packbot, clientSecret: s}}\n"
	a := &app{logger: slog.New(slog.DiscardHandler)}
	open := func(src string) error {
		t.Helper()
		p, err := packs.Parse(filepath.Join(dir, "agent-pack.yaml"), []byte(src), nil)
		if err != nil {
			t.Fatal(err)
		}
		pool, _, err := openMCP(t.Context(), a, p, nil, nil, "http://bot.invalid", http.NewServeMux(), nil, nil)
		if err == nil {
			pool.Close()
		}
		return err
	}
	if err := open(src); err != nil {
		t.Fatalf("openMCP with client_secret_basic: %v", err)
	}
	err := open(strings.Replace(src, "clientSecret: s", "privateKeyFile: packbot.pem", 1))
	for _, want := range []string{"billing", "privateKeyFile", "agent-pack.yaml"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("openMCP with a broken key: %v, want an error saying %q", err, want)
		}
	}
}

package oauth_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"

	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/store/sqlstore"
)

// A command-line tool signs its user in to an OAuth-protected MCP server: the first Token
// prints the authorization URL and waits for the browser to come back to its loopback listener;
// a second run over the same store needs no browser. The authorization server, the MCP server
// and the browser are this package's test doubles, on loopback.
func ExampleLoopback() {
	ctx := context.Background()
	as := newTestAS(newClock())
	defer as.Close()
	notes := newProtectedMCP(as)
	defer notes.Close()

	dir, err := os.MkdirTemp("", "packbot-loopback-example")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "packbot.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	key, err := secret.GenerateKey(nil)
	if err != nil {
		log.Fatal(err)
	}
	kr, err := secret.NewKeyring(key)
	if err != nil {
		log.Fatal(err)
	}

	cfg := oauth.LoopbackConfig{
		Credentials: st, Records: st, Keyring: kr,
		Server: packs.Server{Name: "notes", Transport: packs.TransportStreamableHTTP, URL: notes.Endpoint},
		Prompt: func(ctx context.Context, authURL string) error {
			u, err := url.Parse(authURL)
			if err != nil {
				return err
			}
			fmt.Println("Open this URL to sign in:", u.Host != "", u.Path, u.Query().Get("code_challenge_method"))
			_, _, err = get(ctx, authURL) // the user's browser
			return err
		},
	}
	for range 2 {
		l, err := oauth.NewLoopback(cfg)
		if err != nil {
			log.Fatal(err)
		}
		tok, from, err := l.Token(ctx)
		if err != nil {
			log.Fatal(err)
		}
		user, _ := as.Verify(tok.Reveal()) // the MCP server's check
		fmt.Printf("token for %s, %s\n", user, from)
	}
	// Output:
	// Open this URL to sign in: true /authorize S256
	// token for alice, browser
	// token for alice, stored
}

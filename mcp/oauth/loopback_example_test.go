package oauth_test

import (
	"context"
	"fmt"
	"log"
	"net/url"

	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
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

	st, kr, done := exampleStore(ctx)
	defer done()

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

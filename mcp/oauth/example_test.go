package oauth_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/store/sqlstore"
)

// A user authorizes packbot on an OAuth-protected MCP server: the bot sends the link from
// Begin, the user's browser comes back to the callback, and from then on Token gives the bearer
// for every request to the server. The authorization server and MCP server here are the test
// doubles of this package, on loopback.
func Example() {
	ctx := context.Background()
	as := newTestAS(newClock())
	defer as.Close()
	notes := newProtectedMCP(as)
	defer notes.Close()

	st, kr, done := exampleStore(ctx)
	defer done()

	// packbot's own HTTP server, where cmd mounts the callback.
	mux := http.NewServeMux()
	bot := httptest.NewServer(mux)
	defer bot.Close()

	m, err := oauth.New(oauth.Config{
		Credentials: st,
		Records:     st,
		Keyring:     kr,
		Servers: []packs.Server{{
			Name: "notes", Transport: packs.TransportStreamableHTTP, URL: notes.Endpoint,
			AccessMode: packs.UserControlled,
			// The authorization server of this example is on another loopback port than the
			// MCP server: the pack names it.
			Authentication: &packs.ServerAuth{Mode: oauth.ModeOAuth2, Issuer: as.URL()},
		}},
		CallbackURL: bot.URL + oauth.DefaultCallbackPath,
		OnAuthorized: func(_ context.Context, identity, server string) {
			fmt.Printf("chat: %s may now use %s\n", identity, server)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux.Handle(oauth.DefaultCallbackPath, m.CallbackHandler())

	link, err := m.Begin(ctx, "alice@acme.example", "notes") // the bot sends this link
	if err != nil {
		log.Fatal(err)
	}
	status, _, _, err := followAuthorization(ctx, link) // the user signs in
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("callback page:", status)

	cs, err := connect(ctx, m, "alice@acme.example", "notes", notes.Endpoint) // Token on every request
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	text, err := whoami(ctx, cs)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tool says:", text)
	// Output:
	// chat: alice@acme.example may now use notes
	// callback page: 200
	// tool says: you are alice
}

// packbot signs in as itself to an admin-controlled MCP server with the client-credentials
// grant: the pool's shared session asks the Machine for a bearer on every request, and the
// Machine finds the token endpoint from the server's 401 and keeps the token until shortly
// before it expires. The servers are this package's test doubles, on loopback.
func ExampleNewMachine() {
	ctx := context.Background()
	as := newTestAS(newClock())
	defer as.Close()
	billing := newProtectedMCP(as)
	defer billing.Close()
	as.RegisterMachine("packbot-billing", packs.ClientSecretBasic, "s3cret", nil) // by the admin

	servers := []packs.Server{{
		Name: "billing", Transport: packs.TransportStreamableHTTP, URL: billing.Endpoint,
		AccessMode: packs.AdminControlled, Enabled: true, TimeoutMs: 10_000, MaxSessionIdleSeconds: 60,
		Authentication: &packs.ServerAuth{Mode: oauth.ModeClientCredentials, ClientID: "packbot-billing",
			ClientSecret: "s3cret", TokenEndpointAuthMethod: packs.ClientSecretBasic, Issuer: as.URL()},
	}}
	m, err := oauth.NewMachine(oauth.MachineConfig{Servers: servers})
	if err != nil {
		log.Fatal(err)
	}
	pool, err := mcp.New(mcp.Config{Servers: servers, Machine: m})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	res, err := pool.Call(ctx, mcp.Call{Server: "billing", Tool: "whoami"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tool says:", res.Text)
	// Output:
	// tool says: you are packbot-billing
}

// exampleStore opens a throwaway SQLite store and a keyring for the examples; done removes them.
func exampleStore(ctx context.Context) (*sqlstore.DB, *secret.Keyring, func()) {
	dir, err := os.MkdirTemp("", "packbot-oauth-example")
	if err != nil {
		log.Fatal(err)
	}
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "packbot.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	key, err := secret.GenerateKey(nil)
	if err != nil {
		log.Fatal(err)
	}
	kr, err := secret.NewKeyring(key)
	if err != nil {
		log.Fatal(err)
	}
	return st, kr, func() {
		_ = st.Close()
		_ = os.RemoveAll(dir)
	}
}

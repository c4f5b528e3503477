package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/mcp/oauth/oauthtest"
)

// serveForms serves a go-sdk server whose tools ask the person a form and answer with what
// came back: book (every field has a default but the note), register (its required name has
// none).
func serveForms(t *testing.T) string {
	t.Helper()
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "forms", Version: "1"}, nil)
	ask := func(name string, schema map[string]any) {
		mcpsdk.AddTool(s, &mcpsdk.Tool{Name: name, Description: "Asks a form."},
			func(ctx context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
				res, err := req.Session.Elicit(ctx, &mcpsdk.ElicitParams{Message: "Details for " + name, RequestedSchema: schema})
				if err != nil {
					return nil, nil, err
				}
				b, _ := json.Marshal(res.Content)
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: res.Action + " " + string(b)}}}, nil, nil
			})
	}
	ask("book", map[string]any{"type": "object", "properties": map[string]any{
		"room":      map[string]any{"type": "string", "title": "Room", "default": "A1"},
		"nights":    map[string]any{"type": "integer", "title": "Nights", "minimum": 1, "default": 2},
		"breakfast": map[string]any{"type": "boolean", "title": "Breakfast", "default": true},
		"note":      map[string]any{"type": "string", "title": "Note"},
	}, "required": []string{"room", "nights"}})
	ask("register", map[string]any{"type": "object", "properties": map[string]any{
		"name":       map[string]any{"type": "string", "title": "Name"},
		"newsletter": map[string]any{"type": "boolean", "default": false},
	}, "required": []string{"name"}})
	ts := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return writeMCPPack(t, "    - name: forms\n      transport: streamable-http\n      url: "+ts.URL+"\n")
}

// TestMCPSmokeElicitDefaults: without a terminal, --elicit defaults accepts a form with its
// defaults, and fails clearly on a form whose required field has none (which the server is told
// was declined); by default every question is declined.
func TestMCPSmokeElicitDefaults(t *testing.T) {
	path := serveForms(t)
	code, out, errOut := cli(t, nil, "mcp", "smoke", "--pack", path, "--call", "book", "--elicit", "defaults")
	if code != 0 || !strings.Contains(out, `call: ok`+"\n"+`accept {"breakfast":true,"nights":2,"room":"A1"}`) {
		t.Errorf("book with defaults: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, nil, "mcp", "smoke", "--pack", path, "--call", "register", "--elicit", "defaults")
	if code != 1 || !strings.Contains(out, "decline") ||
		!strings.Contains(errOut, "FAILED: --elicit defaults: the server's form has required field(s) without a default: name") {
		t.Errorf("register with defaults: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, nil, "mcp", "smoke", "--pack", path, "--call", "book")
	if code != 0 || !strings.Contains(out, "decline") || !strings.Contains(errOut, "declined (--elicit decline)") {
		t.Errorf("book, not on a terminal: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := cli(t, nil, "mcp", "smoke", "--pack", path, "--elicit", "accept"); code != 1 || !strings.Contains(errOut, "--elicit") {
		t.Errorf("--elicit accept: exit %d\n%s", code, errOut)
	}
}

// terminal is what a process wrote to its terminal, read as it comes.
type terminal struct {
	mu   sync.Mutex
	b    bytes.Buffer
	more chan struct{} // signalled on each write
}

func (tm *terminal) Write(p []byte) (int, error) {
	tm.mu.Lock()
	tm.b.Write(p)
	tm.mu.Unlock()
	select {
	case tm.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (tm *terminal) String() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.b.String()
}

// await waits until the terminal shows want after position from, and returns where it ends.
func (tm *terminal) await(t *testing.T, from int, want string) int {
	t.Helper()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	for {
		if i := strings.Index(tm.String()[from:], want); i >= 0 {
			return from + i + len(want)
		}
		select {
		case <-tm.more:
		case <-timer.C:
			t.Fatalf("the terminal never showed %q:\n%s", want, tm.String())
		}
	}
}

// TestMCPSmokeElicitOnTerminal: on a terminal smoke asks the server's form field by field, the
// defaults in brackets; a typed answer replaces a default, Enter keeps it, a wrong answer is
// asked again, and an optional field without a default can be skipped. packbot runs as its own
// process on a pseudo-terminal, and the test types.
func TestMCPSmokeElicitOnTerminal(t *testing.T) {
	path := serveForms(t)
	master, slave := openPTY(t)
	cmd := exec.Command(os.Args[0], "mcp", "smoke", "--pack", path, "--call", "book")
	cmd.Env = []string{"PACKBOT_TEST_AS_MAIN=1", "HOME=" + t.TempDir()}
	cmd.SysProcAttr = childOfTest()
	var stdout bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &stdout, slave
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { // on failure: the server's question would wait for an answer for ever
		_ = cmd.Process.Kill()
		t.Logf("smoke ended: %v", <-exited)
	})
	_ = slave.Close() // the child has its own: when it exits, reading master ends
	tm := &terminal{more: make(chan struct{}, 1)}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			_, _ = tm.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	typeLine := func(s string) {
		if _, err := master.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	at := tm.await(t, 0, "The server forms asks (during book): Details for book")
	at = tm.await(t, at, "[a]nswer, [d]ecline, [c]ancel (a): ")
	typeLine("") // Enter: answer
	// The fields come in the schema's order (the server's JSON sorts them by name).
	at = tm.await(t, at, "Breakfast (boolean, optional) [true]: ")
	typeLine("no")
	at = tm.await(t, at, "Nights (integer) [2]: ")
	typeLine("zero") // not an integer: asked again
	at = tm.await(t, at, "Nights (integer) [2]: ")
	typeLine("") // Enter keeps 2
	at = tm.await(t, at, "Note (string, optional): ")
	typeLine("") // skipped
	tm.await(t, at, "Room (string) [A1]: ")
	typeLine("B2")
	if err := <-exited; err != nil {
		exited <- err
		t.Fatalf("smoke: %v\n%s\n%s", err, stdout.String(), tm.String())
	}
	exited <- nil
	<-copied
	if want := `accept {"breakfast":false,"nights":2,"room":"B2"}`; !strings.Contains(stdout.String(), want) {
		t.Errorf("the server got another answer than %s:\n%s", want, stdout.String())
	}
}

// TestMCPSmokeStepUp: the server's challenge asks for mcp:basic; at tools/call it answers 403
// insufficient_scope for mcp:write: smoke signs in again asking for both, and the call works.
func TestMCPSmokeStepUp(t *testing.T) {
	as := oauthtest.NewAuthServer(oauthtest.NewClock())
	t.Cleanup(as.Close)
	as.Set(func(as *oauthtest.AuthServer) { as.Scopes = []string{"mcp:basic", "mcp:write"} })
	notes := oauthtest.NewProtectedMCPWith(as, oauthtest.MCPOptions{ChallengeScope: "mcp:basic", RequireScope: "mcp:write"})
	t.Cleanup(notes.Close)
	path := writeMCPPack(t, "    - name: notes\n      url: "+notes.Endpoint+"\n      accessMode: user-controlled\n      authentication: {mode: oauth2}\n")
	r := startSmoke(t, nil, "mcp", "smoke", "--pack", path, "--call", "whoami")
	r.browse(t)
	r.browse(t)
	code, out, errOut := r.wait()
	if code != 0 || !strings.Contains(out, "signing in again with more scopes") || !strings.Contains(out, "you are alice") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	as.Set(func(as *oauthtest.AuthServer) {
		if got := strings.Join(as.AuthorizedScopes, " | "); got != "mcp:basic | mcp:basic mcp:write" {
			t.Errorf("authorizations asked for %q, want mcp:basic, then mcp:basic mcp:write", got)
		}
	})
	checkNoSecrets(t, as, "the output", []byte(out+errOut))
}

// TestMCPSmokeClientMetadataDocument: with --client-metadata-url, or the command-line document
// that serve publishes at PACKBOT_PUBLIC_URL, an authorization server that supports Client ID
// Metadata Documents fetches it and nothing is registered; without one it registers (DCR).
func TestMCPSmokeClientMetadataDocument(t *testing.T) {
	mux := http.NewServeMux()
	bot := httptest.NewServer(mux)
	t.Cleanup(bot.Close)
	docURL := bot.URL + oauth.DefaultNativeClientMetadataPath
	mux.Handle("GET "+oauth.DefaultNativeClientMetadataPath, oauth.NativeClientMetadataHandler(docURL, "packbot"))
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"--client-metadata-url", nil, []string{"--client-metadata-url", docURL}},
		{"PACKBOT_PUBLIC_URL", map[string]string{"PACKBOT_PUBLIC_URL": bot.URL}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as, path := oauthPack(t)
			as.Set(func(as *oauthtest.AuthServer) { as.CIMD = true })
			r := startSmoke(t, tc.env, append([]string{"mcp", "smoke", "--pack", path, "--call", "whoami"}, tc.args...)...)
			if status := r.browse(t); status != http.StatusOK {
				t.Errorf("callback page: %d", status)
			}
			if code, out, errOut := r.wait(); code != 0 || !strings.Contains(out, "you are alice") {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			as.Set(func(as *oauthtest.AuthServer) {
				if as.MetadataFetches != 1 || as.Registrations != 0 {
					t.Errorf("document fetched %d times, %d registrations; want 1 and 0", as.MetadataFetches, as.Registrations)
				}
			})
		})
	}
	// An authorization server without Client ID Metadata Documents: registration.
	as, path := oauthPack(t)
	r := startSmoke(t, nil, "mcp", "smoke", "--pack", path, "--client-metadata-url", docURL, "--call", "whoami")
	r.browse(t)
	if code, out, errOut := r.wait(); code != 0 {
		t.Fatalf("without CIMD support: exit %d\n%s\n%s", code, out, errOut)
	}
	as.Set(func(as *oauthtest.AuthServer) {
		if as.MetadataFetches != 0 || as.Registrations != 1 {
			t.Errorf("without CIMD support: document fetched %d times, %d registrations; want 0 and 1", as.MetadataFetches, as.Registrations)
		}
	})
}

// TestMCPSmokeClientCredentials: a server whose pack entry says client_credentials is
// smoke-tested, checked by doctor and listed by pack explain --connect with packbot's own token,
// as serve gets it.
func TestMCPSmokeClientCredentials(t *testing.T) {
	as := oauthtest.NewAuthServer(oauthtest.NewClock())
	t.Cleanup(as.Close)
	billing := oauthtest.NewProtectedMCP(as)
	t.Cleanup(billing.Close)
	as.RegisterMachine("packbot-billing", "client_secret_basic", "s3cret", nil)
	path := writeMCPPack(t, `    - name: billing
      url: `+billing.Endpoint+`
      authentication: {mode: client_credentials, clientId: packbot-billing, clientSecret: s3cret, issuer: "`+as.URL()+`"}
`)
	code, out, errOut := cli(t, nil, "mcp", "smoke", "--pack", path, "--call", "whoami")
	if code != 0 || !strings.Contains(out, "sign-in: packbot's own token (client_credentials)") || !strings.Contains(out, "you are packbot-billing") {
		t.Fatalf("smoke: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out = doctorRun(t, map[string]string{"AGENT_PACK_PATH": path, "PACKBOT_DATA_DIR": t.TempDir()})
	if line := doctorLine(out, "mcp billing"); !strings.HasPrefix(line, "ok") || !strings.Contains(line, "1 tool(s) listed, 1 offered") {
		t.Errorf("doctor (exit %d): %q\n%s", code, line, out)
	}
	code, out, errOut = cli(t, nil, "pack", "explain", path, "--connect", "--json")
	if code != 0 || strings.Contains(out, `"connect":`) {
		t.Errorf("explain --connect: exit %d\n%s\n%s", code, out, errOut)
	}
	if grants, _ := as.MachineStats(); grants != 3 {
		t.Errorf("%d client-credentials grants, want 3 (smoke, doctor, explain)", grants)
	}
}

// TestMCPSmokeSchemaAndJSON: --schema shows a tool's whole input and output schema; --json
// prints the report as JSON (the tools with their schemas, the call's result) and nothing else
// on stdout.
func TestMCPSmokeSchemaAndJSON(t *testing.T) {
	code, out, errOut := cli(t, nil, "mcp", "smoke", "--server", "bank", "--schema", "get_exchange_rate")
	if code != 0 || !strings.Contains(out, "tool get_exchange_rate\n") || !strings.Contains(out, "input schema:\n  {") ||
		!strings.Contains(out, `"from"`) || !strings.Contains(out, "output schema:") {
		t.Errorf("--schema: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := cli(t, nil, "mcp", "smoke", "--server", "bank", "--schema", "no_such_tool"); code != 1 || !strings.Contains(errOut, "--schema no_such_tool") {
		t.Errorf("--schema of an unknown tool: exit %d\n%s", code, errOut)
	}

	code, out, errOut = cli(t, nil, "mcp", "smoke", "--server", "bank", "--json", "--call", "get_exchange_rate", "--args", `{"from":"EUR","to":"USD"}`)
	var rep smokeJSON
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("--json: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	if len(rep.Tools) != 9 || rep.Call == nil || rep.Call.IsError || !strings.Contains(rep.Call.Text, "rate") ||
		json.Unmarshal(rep.Tools[0].InputSchema, &schema) != nil || len(schema.Properties) == 0 {
		t.Errorf("--json report: %+v", rep)
	}
	if !strings.Contains(errOut, "server bank: stdio") {
		t.Errorf("the progress lines are not on stderr:\n%s", errOut)
	}
}

package main

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/packbot/packbot/mcp/oauth/oauthtest"
	"github.com/packbot/packbot/store/secret"
)

// promptWatcher is a stderr that hands each sign-in URL to the test as soon as packbot prints
// it, while keeping everything written.
type promptWatcher struct {
	mu      sync.Mutex
	b       bytes.Buffer
	scanned int
	urls    chan string
}

func (w *promptWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	for {
		rest := w.b.Bytes()[w.scanned:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.scanned += i + 1
		if u, ok := strings.CutPrefix(string(rest[:i]), signInPrompt); ok {
			select {
			case w.urls <- u:
			default:
			}
		}
	}
}

func (w *promptWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// smokeRun is an `mcp smoke` running in-process.
type smokeRun struct {
	stdout bytes.Buffer // read only after done
	stderr *promptWatcher
	urls   <-chan string
	done   chan int
}

// startSmoke runs packbot with args and exactly env as its environment, in the background.
func startSmoke(t *testing.T, env map[string]string, args ...string) *smokeRun {
	t.Helper()
	urls := make(chan string, 4)
	r := &smokeRun{stderr: &promptWatcher{urls: urls}, urls: urls, done: make(chan int, 1)}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	go func() { r.done <- run(t.Context(), args, &r.stdout, r.stderr, lookup) }()
	return r
}

// browse waits for the sign-in URL and opens it as a browser would (following the redirect to
// packbot's loopback callback); it returns the callback page's status.
func (r *smokeRun) browse(t *testing.T) int {
	t.Helper()
	select {
	case u := <-r.urls:
		status, _, err := oauthtest.Get(t.Context(), u)
		if err != nil {
			t.Fatalf("browse %s: %v", u, err)
		}
		return status
	case code := <-r.done:
		t.Fatalf("smoke ended (exit %d) without printing a sign-in URL\n%s\n%s", code, r.stdout.String(), r.stderr)
	}
	return 0
}

// wait returns the exit status and output once the run ends.
func (r *smokeRun) wait() (code int, stdout, stderr string) {
	code = <-r.done
	return code, r.stdout.String(), r.stderr.String()
}

// oauthPack starts an authorization server and a go-sdk MCP server protected by it, and writes
// a pack whose server "notes" signs in there.
func oauthPack(t *testing.T) (*oauthtest.AuthServer, string) {
	t.Helper()
	as := oauthtest.NewAuthServer(oauthtest.NewClock())
	t.Cleanup(as.Close)
	notes := oauthtest.NewProtectedMCP(as)
	t.Cleanup(notes.Close)
	return as, writeMCPPack(t, `    - name: notes
      transport: streamable-http
      url: `+notes.Endpoint+`
      accessMode: user-controlled
      authentication: {mode: oauth2}
`)
}

// lines returns the lines of s that start with prefix.
func lines(s, prefix string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// checkNoSecrets fails when a token, code, verifier or client secret the authorization server
// issued or received appears in what.
func checkNoSecrets(t *testing.T, as *oauthtest.AuthServer, what string, data []byte) {
	t.Helper()
	for _, s := range as.Secrets() {
		if s != "" && bytes.Contains(data, []byte(s)) {
			t.Errorf("%s holds a secret in clear: %.6s…", what, s)
		}
	}
}

// TestMCPSmokeOAuthSignIn: smoke signs in through the browser (dynamic registration with the
// loopback redirect URI), lists the tools and calls one with the token, and leaves nothing
// behind.
func TestMCPSmokeOAuthSignIn(t *testing.T) {
	as, path := oauthPack(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the throwaway token store goes
	r := startSmoke(t, nil, "mcp", "smoke", "--pack", path, "--call", "whoami")
	if status := r.browse(t); status != http.StatusOK {
		t.Errorf("callback page: %d", status)
	}
	code, out, errOut := r.wait()
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"sign-in: browser", "1 tool(s) listed, 1 offered", "  whoami", "call: ok\nyou are alice"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	as.Set(func(as *oauthtest.AuthServer) {
		if as.Registrations != 1 || as.Authorizations != 1 || as.Exchanges != 1 {
			t.Errorf("registrations %d, authorizations %d, exchanges %d; want 1 each", as.Registrations, as.Authorizations, as.Exchanges)
		}
	})
	checkNoSecrets(t, as, "the output", []byte(out+errOut))
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("the throwaway token store is still there: %v %v", left, err)
	}
}

// TestMCPSmokeOAuthPreregistered: with --client-id and --client-secret no registration request
// reaches the authorization server, and the client authenticates with its secret.
func TestMCPSmokeOAuthPreregistered(t *testing.T) {
	as, path := oauthPack(t)
	as.Preregister("smoke-cli", "smoke-secret", "http://127.0.0.1/callback")
	r := startSmoke(t, nil, "mcp", "smoke", "--pack", path, "--client-id", "smoke-cli", "--client-secret", "smoke-secret", "--call", "whoami")
	if status := r.browse(t); status != http.StatusOK {
		t.Errorf("callback page: %d", status)
	}
	code, out, errOut := r.wait()
	if code != 0 || !strings.Contains(out, "you are alice") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	as.Set(func(as *oauthtest.AuthServer) {
		if as.Registrations != 0 || strings.Join(as.AuthMethods, ",") != "client_secret_basic" {
			t.Errorf("registrations %d, token endpoint auth %q; want 0, client_secret_basic", as.Registrations, as.AuthMethods)
		}
	})
	checkNoSecrets(t, as, "the output", []byte(out+errOut))
}

// TestMCPSmokeOAuthDataDir: with --data-dir the second run reuses the sealed token: no browser,
// no authorization request; after a server-side revocation the third refreshes it, still without
// the browser. The store holds no token in clear.
func TestMCPSmokeOAuthDataDir(t *testing.T) {
	as, path := oauthPack(t)
	key, err := secret.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{secret.EnvKey: key.Hex()}
	dir := t.TempDir()
	args := []string{"mcp", "smoke", "--pack", path, "--data-dir", dir, "--call", "whoami"}

	r := startSmoke(t, env, args...)
	r.browse(t)
	if code, out, errOut := r.wait(); code != 0 || !strings.Contains(out, "sign-in: browser") {
		t.Fatalf("first run: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, tc := range []struct {
		name, from string
		before     func()
	}{
		{"second run", "sign-in: stored", func() {}},
		// The stored token looks fresh, the server refuses it: refreshed, then accepted.
		{"after a revocation", "sign-in: stored,sign-in: refreshed", as.RevokeAccess},
	} {
		tc.before()
		code, out, errOut := startSmoke(t, env, args...).wait()
		if code != 0 || !strings.Contains(out, "you are alice") {
			t.Fatalf("%s: exit %d\n%s\n%s", tc.name, code, out, errOut)
		}
		if got := lines(out, "sign-in: "); strings.Join(got, ",") != tc.from {
			t.Errorf("%s: %q, want %s", tc.name, got, tc.from)
		}
		if len(lines(errOut, signInPrompt)) != 0 {
			t.Errorf("%s: a sign-in URL was printed:\n%s", tc.name, errOut)
		}
		checkNoSecrets(t, as, tc.name+"'s output", []byte(out+errOut))
	}
	as.Set(func(as *oauthtest.AuthServer) {
		if as.Authorizations != 1 || as.Registrations != 1 || as.Refreshes != 1 {
			t.Errorf("authorizations %d, registrations %d, refreshes %d; want 1 each", as.Authorizations, as.Registrations, as.Refreshes)
		}
	})
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("nothing stored in --data-dir: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkNoSecrets(t, as, f, b)
	}

	// Without the key the tokens cannot be sealed.
	if code, _, errOut := cli(t, nil, args...); code != 1 || !strings.Contains(errOut, secret.EnvKey) {
		t.Errorf("--data-dir without %s: exit %d\n%s", secret.EnvKey, code, errOut)
	}
}

// TestMCPSmokeOAuthFailures: a refused authorization fails the smoke test with the
// authorization server's error code; sign-in flags on a server without OAuth are mistakes.
func TestMCPSmokeOAuthFailures(t *testing.T) {
	as, path := oauthPack(t)
	as.Set(func(as *oauthtest.AuthServer) { as.Deny = true })
	r := startSmoke(t, nil, "mcp", "smoke", "--pack", path)
	if status := r.browse(t); status != http.StatusBadRequest {
		t.Errorf("callback page: %d, want 400", status)
	}
	code, out, errOut := r.wait()
	if code != 1 || len(lines(errOut, "FAILED: ")) != 1 || !strings.Contains(errOut, "access_denied") {
		t.Errorf("denied: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out, "tool(s) listed") {
		t.Errorf("denied, yet tools were listed:\n%s", out)
	}

	plain := writeMCPPack(t, "    - name: plain\n      transport: streamable-http\n      url: http://mcp.invalid/mcp\n")
	for _, args := range [][]string{
		{"--pack", plain, "--client-id", "x"},
		{"--pack", plain, "--data-dir", t.TempDir()},
		{"--pack", path, "--client-secret", "s"},
		{"--pack", path, "--sign-in-timeout", "0s"},
	} {
		if code, _, errOut := cli(t, nil, append([]string{"mcp", "smoke"}, args...)...); code != 1 || !strings.Contains(errOut, args[2]) {
			t.Errorf("%q: exit %d, want 1 naming %s\n%s", args, code, args[2], errOut)
		}
	}
}

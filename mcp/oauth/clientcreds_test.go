package oauth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/mcp/oauth/oauthtest"
	"github.com/packbot/packbot/packs"
)

const (
	machineServer = "billing"
	machineID     = "packbot-billing"
	machineSecret = "billing-secret-7f3a9c"
)

// machineEnv is an authorization server, a protected MCP server, and a pool whose shared
// session on it gets packbot's own tokens from an oauth.Machine; all on one fake clock.
type machineEnv struct {
	t     *testing.T
	clock *clock
	as    *testAS
	mcp   *protectedMCP
	logs  *syncBuffer
	srv   packs.Server
	m     *oauth.Machine
	pool  *mcp.Pool
}

// newMachineEnv starts the servers, lets configure adjust the pack's server entry (whose
// authentication is client_secret_basic with the registered secret unless changed), and builds
// the Machine and the pool.
func newMachineEnv(t *testing.T, o oauthtest.MCPOptions, configure ...func(e *machineEnv)) *machineEnv {
	t.Helper()
	e := &machineEnv{t: t, clock: newClock(), logs: &syncBuffer{}}
	e.as = newTestAS(e.clock)
	t.Cleanup(e.as.Close)
	e.mcp = oauthtest.NewProtectedMCPWith(e.as, o)
	t.Cleanup(e.mcp.Close)
	e.srv = packs.Server{Name: machineServer, Transport: packs.TransportStreamableHTTP, URL: e.mcp.Endpoint,
		AccessMode: packs.AdminControlled, Enabled: true, TimeoutMs: 10_000, MaxSessionIdleSeconds: packs.DefaultMaxSessionIdle,
		Authentication: &packs.ServerAuth{Mode: oauth.ModeClientCredentials, ClientID: machineID, ClientSecret: machineSecret,
			TokenEndpointAuthMethod: packs.ClientSecretBasic}}
	if o.AuthorizationServers == nil {
		e.srv.Authentication.Issuer = e.as.URL() // on another loopback port: the pack names it
	}
	e.as.RegisterMachine(machineID, packs.ClientSecretBasic, machineSecret, nil)
	for _, f := range configure {
		f(e)
	}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	e.m, err = oauth.NewMachine(oauth.MachineConfig{Servers: []packs.Server{e.srv}, Logger: log, Now: e.clock.Now})
	if err != nil {
		t.Fatalf("NewMachine: %v", err)
	}
	e.pool, err = mcp.New(mcp.Config{Servers: []packs.Server{e.srv}, Machine: e.m, Logger: log, Now: e.clock.Now})
	if err != nil {
		t.Fatalf("mcp.New: %v", err)
	}
	t.Cleanup(e.pool.Close)
	return e
}

// call calls whoami on the server through the pool.
func (e *machineEnv) call() (string, error) {
	res, err := e.pool.Call(e.t.Context(), mcp.Call{Server: machineServer, Tool: "whoami"})
	return res.Text, err
}

// mustCall fails the test unless whoami answers as packbot's client.
func (e *machineEnv) mustCall(when string) {
	e.t.Helper()
	text, err := e.call()
	if err != nil || text != "you are "+machineID {
		e.t.Fatalf("%s: %q, %v", when, text, err)
	}
}

// grants returns the client-credentials grants so far, failing on any refused assertion.
func (e *machineEnv) grants() int {
	e.t.Helper()
	n, rejections := e.as.MachineStats()
	if len(rejections) > 0 {
		e.t.Fatalf("the authorization server refused assertions: %q", rejections)
	}
	return n
}

func (e *machineEnv) checkLogsClean(extra ...string) {
	e.t.Helper()
	logs := e.logs.String()
	for _, s := range append(e.as.Secrets(), extra...) {
		if s != "" && strings.Contains(logs, s) {
			e.t.Errorf("a secret appears in the logs: %.6s…", s)
		}
	}
}

// keyFile writes key as PEM (PKCS#8 for EC, PKCS#1 for RSA, both forms packbot reads) into a
// temporary folder and returns the path.
func keyFile(t *testing.T, key crypto.Signer) string {
	t.Helper()
	var block *pem.Block
	switch k := key.(type) {
	case *rsa.PrivateKey:
		block = &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
	default:
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	}
	path := filepath.Join(t.TempDir(), "packbot.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func ecKey(t *testing.T, curve elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// withJWT makes the server's client authenticate with private_key_jwt and key, registered at
// the authorization server with its public half.
func withJWT(key crypto.Signer, kid string) func(e *machineEnv) {
	return func(e *machineEnv) {
		e.srv.Authentication.TokenEndpointAuthMethod = packs.PrivateKeyJWT
		e.srv.Authentication.ClientSecret = ""
		e.srv.Authentication.PrivateKeyFile = keyFile(e.t, key)
		e.srv.Authentication.KeyID = kid
		e.as.RegisterMachine(machineID, packs.PrivateKeyJWT, "", key.Public())
	}
}

// TestMachineAuthMethods: with each client authentication method the authorization server
// verifies (for private_key_jwt: signature, iss = sub = client id, aud, exp, unused jti), the
// pool's shared session gets a token, the tool call works, and the token is reused while fresh.
func TestMachineAuthMethods(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method string
		configure    func(e *machineEnv)
	}{
		{"client_secret_basic", packs.ClientSecretBasic, func(*machineEnv) {}},
		{"client_secret_post", packs.ClientSecretPost, func(e *machineEnv) {
			e.srv.Authentication.TokenEndpointAuthMethod = packs.ClientSecretPost
			e.as.RegisterMachine(machineID, packs.ClientSecretPost, machineSecret, nil)
		}},
		{"private_key_jwt ES256", packs.PrivateKeyJWT, withJWT(ecKey(t, elliptic.P256()), "k1")},
		{"private_key_jwt RS256", packs.PrivateKeyJWT, withJWT(rsaKey, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newMachineEnv(t, oauthtest.MCPOptions{}, tc.configure)
			e.mustCall("first call")
			e.mustCall("second call")
			if n := e.grants(); n != 1 {
				t.Errorf("grants = %d, want 1 (the token is kept while fresh)", n)
			}
			e.as.Set(func(as *testAS) {
				if len(as.AuthMethods) == 0 || as.AuthMethods[len(as.AuthMethods)-1] != tc.method {
					t.Errorf("the client authenticated with %q, want %s", as.AuthMethods, tc.method)
				}
			})
			if n := e.mcp.Refusals.Load(); n != 0 {
				t.Errorf("the MCP server refused %d requests, want 0", n)
			}
			e.checkLogsClean()
		})
	}
}

// TestMachineRenewedBeforeExpiry: the token is requested again once it is within a minute of
// expiry, before the MCP server would refuse it (no 401), each time with a new assertion.
func TestMachineRenewedBeforeExpiry(t *testing.T) {
	e := newMachineEnv(t, oauthtest.MCPOptions{}, withJWT(ecKey(t, elliptic.P256()), ""))
	e.mustCall("first call") // the token lives 5 minutes
	e.clock.Advance(3 * time.Minute)
	e.mustCall("after 3 minutes")
	if n := e.grants(); n != 1 {
		t.Fatalf("grants after 3 minutes = %d, want 1", n)
	}
	e.clock.Advance(90 * time.Second) // 30 s before expiry
	e.mustCall("30 s before expiry")
	if n := e.grants(); n != 2 {
		t.Fatalf("grants 30 s before expiry = %d, want 2", n)
	}
	if n := e.mcp.Refusals.Load(); n != 0 {
		t.Errorf("the MCP server refused %d requests, want 0 (the token must be renewed before it expires)", n)
	}
	e.checkLogsClean()
}

// TestMachineRenewAfter401: a token the MCP server refuses mid-session (revoked on the server's
// side) is replaced by one new token and the call, which the server did not act on, is sent once
// more; when the server refuses the new token too, the call fails with ErrAuth after exactly one
// more token request.
func TestMachineRenewAfter401(t *testing.T) {
	e := newMachineEnv(t, oauthtest.MCPOptions{})
	e.mustCall("first call")
	e.as.RevokeAccess()
	e.mustCall("after the revocation")
	if n, refusals := e.grants(), e.mcp.Refusals.Load(); n != 2 || refusals != 1 {
		t.Fatalf("grants, refusals = %d, %d, want 2, 1", n, refusals)
	}

	// Calls refused together share one new token.
	e.clock.Advance(2 * time.Minute)
	e.as.RevokeAccess()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if text, err := e.call(); err != nil || text != "you are "+machineID {
				t.Errorf("concurrent call after a revocation: %q, %v", text, err)
			}
		})
	}
	wg.Wait()
	if n := e.grants(); n != 3 {
		t.Fatalf("grants after 8 concurrent refused calls = %d, want 3 (one new token for all)", n)
	}

	e.clock.Advance(2 * time.Minute) // the new token is still fresh
	e.as.Set(func(as *testAS) { as.RefuseTokens = true })
	_, err := e.call()
	var ae *mcp.AuthError
	if !errors.Is(err, mcp.ErrAuth) || !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("call with every token refused: %v, want an *mcp.AuthError with HTTP 401", err)
	}
	if n := e.grants(); n != 4 {
		t.Errorf("grants = %d, want 4 (one new token for the refused call, no more)", n)
	}
	t.Logf("refused: %v", err)

	e.as.Set(func(as *testAS) { as.RefuseTokens = false })
	e.mustCall("once the server takes tokens again")
	e.checkLogsClean()
}

// TestMachineWrongCredentials: a secret or key the authorization server does not accept fails
// the call with an ErrAuth that names the server and the pack field to fix, and quotes no secret.
func TestMachineWrongCredentials(t *testing.T) {
	t.Run("secret", func(t *testing.T) {
		const wrong = "not-the-billing-secret"
		e := newMachineEnv(t, oauthtest.MCPOptions{}, func(e *machineEnv) { e.srv.Authentication.ClientSecret = wrong })
		_, err := e.call()
		if !errors.Is(err, mcp.ErrAuth) {
			t.Fatalf("call: %v, want ErrAuth", err)
		}
		for _, want := range []string{"MCP server " + machineServer, "invalid_client", "clientSecret"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not say %q: %v", want, err)
			}
		}
		t.Logf("refused: %v", err)
		if strings.Contains(err.Error(), wrong) {
			t.Errorf("the error quotes the secret: %v", err)
		}
		if n := e.grants(); n != 0 {
			t.Errorf("grants = %d, want 0", n)
		}
		e.checkLogsClean(wrong)
	})
	t.Run("key", func(t *testing.T) {
		e := newMachineEnv(t, oauthtest.MCPOptions{}, withJWT(ecKey(t, elliptic.P256()), ""), func(e *machineEnv) {
			e.as.RegisterMachine(machineID, packs.PrivateKeyJWT, "", ecKey(t, elliptic.P256()).Public()) // another key
		})
		_, err := e.call()
		if !errors.Is(err, mcp.ErrAuth) || !strings.Contains(err.Error(), "privateKeyFile") || !strings.Contains(err.Error(), machineServer) {
			t.Fatalf("call: %v, want ErrAuth naming the server and privateKeyFile", err)
		}
		if _, rejections := e.as.MachineStats(); len(rejections) != 1 || !strings.Contains(rejections[0], "bad ES256 signature") {
			t.Errorf("rejections = %q, want one bad signature", rejections)
		}
	})
}

// TestMachineIssuer: a server without protected-resource metadata gets its token endpoint from
// the pack's authentication.issuer; without one, the server's origin is tried (MCP 2025-03-26)
// and, serving no authorization server, fails.
func TestMachineIssuer(t *testing.T) {
	noPRM := oauthtest.MCPOptions{NoResourceMetadata: true}
	e := newMachineEnv(t, noPRM, func(e *machineEnv) { e.srv.Authentication.Issuer = e.as.URL() })
	e.mustCall("with the pack's issuer")

	e = newMachineEnv(t, noPRM, func(e *machineEnv) { e.srv.Authentication.Issuer = "" })
	if _, err := e.call(); err == nil {
		t.Fatal("a call without protected-resource metadata nor issuer worked")
	}
	if n := e.grants(); n != 0 {
		t.Errorf("grants = %d, want 0", n)
	}
}

// TestMachineSSRF: the SSRF guard of users' sign-in applies: an authorization server that the
// metadata, or the pack's issuer, puts on a link-local or private address while the MCP server
// is on loopback is refused before any request to it.
func TestMachineSSRF(t *testing.T) {
	for name, configure := range map[string]func(*machineEnv){
		"metadata": func(*machineEnv) {},
		"issuer": func(e *machineEnv) {
			e.srv.Authentication.Issuer = "https://10.20.30.40"
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := oauthtest.MCPOptions{AuthorizationServers: []string{"https://169.254.169.254"}}
			if name == "issuer" {
				o = oauthtest.MCPOptions{NoResourceMetadata: true}
			}
			e := newMachineEnv(t, o, configure)
			_, err := e.call()
			if !errors.Is(err, oauth.ErrDiscoveryRefused) || !strings.Contains(err.Error(), "for an MCP server on a loopback address") {
				t.Fatalf("call: %v, want ErrDiscoveryRefused", err)
			}
			if n := e.grants(); n != 0 {
				t.Errorf("grants = %d, want 0", n)
			}
		})
	}
}

// TestNewMachineRefuses: a key packbot cannot sign with, or a missing secret, stops NewMachine
// with the server and the field named; a pool with a client_credentials server and no Machine is
// refused.
func TestNewMachineRefuses(t *testing.T) {
	srv := func(auth packs.ServerAuth) packs.Server {
		auth.Mode, auth.ClientID = oauth.ModeClientCredentials, machineID
		return packs.Server{Name: machineServer, Transport: packs.TransportStreamableHTTP, URL: "http://mcp.invalid/mcp",
			AccessMode: packs.AdminControlled, Enabled: true, TimeoutMs: 1000, MaxSessionIdleSeconds: 60, Authentication: &auth}
	}
	for name, tc := range map[string]struct {
		auth packs.ServerAuth
		want []string
	}{
		"P-384 key":   {packs.ServerAuth{TokenEndpointAuthMethod: packs.PrivateKeyJWT, PrivateKeyFile: keyFile(t, ecKey(t, elliptic.P384()))}, []string{"privateKeyFile", "P-384", "ES256"}},
		"missing key": {packs.ServerAuth{TokenEndpointAuthMethod: packs.PrivateKeyJWT, PrivateKeyFile: filepath.Join(t.TempDir(), "none.pem")}, []string{"privateKeyFile", "none.pem"}},
		"no secret":   {packs.ServerAuth{TokenEndpointAuthMethod: packs.ClientSecretPost}, []string{"clientSecret", "client_secret_post"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := oauth.NewMachine(oauth.MachineConfig{Servers: []packs.Server{srv(tc.auth)}})
			if err == nil {
				t.Fatal("NewMachine accepted it")
			}
			for _, w := range append(tc.want, machineServer) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
		})
	}
	_, err := mcp.New(mcp.Config{Servers: []packs.Server{srv(packs.ServerAuth{ClientSecret: "s"})}})
	if err == nil || !strings.Contains(err.Error(), "client_credentials") {
		t.Errorf("mcp.New without a Machine: %v", err)
	}
}

// TestMachineAssertionAudience: a private_key_jwt assertion names the authorization server's
// issuer as its audience (RFC 7523bis; an authorization server that takes nothing else signs
// packbot in), and the token endpoint only where the pack says the server wants it. Before the
// fix the audience was the token endpoint, which such a server refuses.
func TestMachineAssertionAudience(t *testing.T) {
	key := ecKey(t, elliptic.P256())
	for _, tc := range []struct {
		name, setting, want string
		issuerOnly          bool
	}{
		{"default: the issuer", "", "", true},
		{"issuer", packs.AudienceIssuer, "", true},
		{"token_endpoint, where the server wants it", packs.AudienceTokenEndpoint, "/token", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newMachineEnv(t, oauthtest.MCPOptions{}, withJWT(key, ""), func(e *machineEnv) {
				e.srv.Authentication.AssertionAudience = tc.setting
				e.as.Set(func(as *testAS) { as.AudienceIssuerOnly = tc.issuerOnly })
			})
			e.mustCall("call")
			want := `"` + e.as.URL() + tc.want + `"`
			e.as.Set(func(as *testAS) {
				if len(as.Audiences) != 1 || as.Audiences[0] != want {
					t.Errorf("assertion audiences = %q, want [%s]", as.Audiences, want)
				}
			})
		})
	}
}

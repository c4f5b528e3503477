package packs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packbot/packbot/packs"
)

// A PEM block of the right type is all the packs package checks of a key file; the key itself
// is parsed by mcp/oauth.
const pemKey = "-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n"

// TestClientCredentialsRules: the client_credentials mode's mistakes are errors (or warnings)
// that name the field and the fix.
func TestClientCredentialsRules(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "key.txt")
	if err := os.WriteFile(notPEM, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	const url = "http://mcp.invalid/mcp"
	cc := func(auth string) string {
		return server("name: s\nurl: " + url + "\nauthentication: {mode: client_credentials, " + auth + "}")
	}
	errs := []struct {
		name, src, path string
		fragments       []string
	}{
		{"user-controlled", server("name: s\nurl: " + url + "\naccessMode: user-controlled\nauthentication: {mode: client_credentials, clientId: c, clientSecret: x}"),
			"mcp.servers[0].authentication.mode", []string{"admin-controlled", "mode: oauth2"}},
		{"stdio", server("name: s\ncommand: x\nauthentication: {mode: client_credentials, clientId: c, clientSecret: x}"),
			"mcp.servers[0].authentication.mode", []string{"HTTP transport"}},
		{"no client id", cc("clientSecret: x"), "mcp.servers[0].authentication.clientId", []string{"needs the clientId"}},
		{"no secret", cc("clientId: c"), "mcp.servers[0].authentication.clientSecret", []string{"client_secret_basic needs clientSecret", "${NAME}"}},
		{"no secret for post", cc("clientId: c, tokenEndpointAuthMethod: client_secret_post"),
			"mcp.servers[0].authentication.clientSecret", []string{"client_secret_post needs clientSecret"}},
		{"unknown method", cc("clientId: c, clientSecret: x, tokenEndpointAuthMethod: tls_client_auth"),
			"mcp.servers[0].authentication.tokenEndpointAuthMethod", []string{`unknown token endpoint auth method "tls_client_auth"`, "private_key_jwt"}},
		{"no key file", cc("clientId: c, tokenEndpointAuthMethod: private_key_jwt"),
			"mcp.servers[0].authentication.privateKeyFile", []string{"private_key_jwt needs privateKeyFile", "ES256"}},
		{"missing key file", cc("clientId: c, privateKeyFile: " + filepath.Join(dir, "gone.pem")),
			"mcp.servers[0].authentication.privateKeyFile", []string{"gone.pem", "no such file"}},
		{"key file is a folder", cc("clientId: c, privateKeyFile: " + dir),
			"mcp.servers[0].authentication.privateKeyFile", []string{"not a regular file"}},
		{"not PEM", cc("clientId: c, privateKeyFile: " + notPEM),
			"mcp.servers[0].authentication.privateKeyFile", []string{"no PEM private key"}},
		{"unset key file variable", cc("clientId: c, privateKeyFile: '${KEY_FILE}'"),
			"mcp.servers[0].authentication.privateKeyFile", []string{"${KEY_FILE} is not set"}},
		{"unset secret variable", cc("clientId: c, clientSecret: '${CS}'"),
			"mcp.servers[0].authentication.clientSecret", []string{"${CS} is not set"}},
		{"unknown mode", server("name: s\nurl: " + url + "\nauthentication: {mode: machine}"),
			"mcp.servers[0].authentication.mode", []string{"unknown authentication mode", "client_credentials", "workload_identity"}},
		{"unknown assertion audience", cc("clientId: c, privateKeyFile: " + filepath.Join(dir, "key.pem") + ", assertionAudience: endpoint"),
			"mcp.servers[0].authentication.assertionAudience", []string{`unknown assertion audience "endpoint"`, "issuer", "token_endpoint"}},
		{"workload without its token file", server("name: s\nurl: " + url + "\nauthentication: {mode: workload_identity}"),
			"mcp.servers[0].authentication.assertionFile", []string{"workload_identity needs assertionFile"}},
		{"workload user-controlled", server("name: s\nurl: " + url + "\naccessMode: user-controlled\nauthentication: {mode: workload_identity, assertionFile: t}"),
			"mcp.servers[0].authentication.mode", []string{"admin-controlled"}},
		{"client metadata document not a URL", server("name: s\nurl: " + url + "\naccessMode: user-controlled\nauthentication: {mode: oauth2, clientMetadataUrl: nowhere}"),
			"mcp.servers[0].authentication.clientMetadataUrl", nil},
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), []byte(pemKey), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			p := wantProblem(t, problemsOf(t, tt.src, nil), tt.path, tt.fragments...)
			if p.Pos.Line == 0 {
				t.Fatalf("problem without a line: %s", p)
			}
		})
	}

	t.Run("warnings", func(t *testing.T) {
		key := filepath.Join(dir, "key.pem")
		if err := os.WriteFile(key, []byte(pemKey), 0o600); err != nil {
			t.Fatal(err)
		}
		p := parse(t, "mcp:\n  servers:\n"+
			"    - {name: a, url: "+url+", headers: {authorization: Bearer x}, authentication: {mode: client_credentials, clientId: c, clientSecret: x, privateKeyFile: "+key+", tokenEndpointAuthMethod: client_secret_post}}\n"+
			"    - {name: b, url: "+url+", authentication: {mode: client_credentials, clientId: c, clientSecret: x, privateKeyFile: "+key+"}}\n"+
			"    - {name: c, url: "+url+", accessMode: user-controlled, authentication: {mode: oauth2, keyId: k}}\n", nil)
		want := map[string]string{
			"mcp.servers[0].headers.authorization":                  "replaced by the client_credentials access token",
			"mcp.servers[0].authentication.tokenEndpointAuthMethod": "ignored with client_secret_post",
			"mcp.servers[1].authentication.clientSecret":            "ignored with private_key_jwt",
			"mcp.servers[2].authentication.keyId":                   "ignored with mode oauth2",
		}
		for path, fragment := range want {
			found := false
			for _, w := range p.Warnings {
				found = found || (w.Path == path && strings.Contains(w.Message, fragment))
			}
			if !found {
				t.Errorf("no warning at %s containing %q among:\n%s", path, fragment, dump(p.Warnings))
			}
		}
	})
}

// TestClientCredentialsDefaults: the auth method follows from what the pack gives, and a
// relative privateKeyFile is relative to the pack's folder, not the working directory.
func TestClientCredentialsDefaults(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keys", "packbot.pem"), []byte(pemKey), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "mcp:\n  servers:\n" +
		"    - {name: jwt, url: http://mcp.invalid/mcp, authentication: {mode: client_credentials, clientId: packbot, privateKeyFile: keys/packbot.pem, keyId: k1}}\n" +
		"    - {name: basic, url: http://mcp.invalid/mcp, authentication: {mode: client_credentials, clientId: packbot, clientSecret: '${CS}', scopes: [billing.read]}}\n"
	if err := os.WriteFile(filepath.Join(dir, "agent-pack.yaml"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := packs.Load(packs.Options{Path: dir, Env: packs.MapEnv(map[string]string{"CS": "s3cret"})})
	if err != nil {
		t.Fatal(err)
	}
	jwt, basic := p.Server("jwt"), p.Server("basic")
	if !jwt.ClientCredentials() || jwt.OAuth() || jwt.UserControlled() {
		t.Errorf("jwt: ClientCredentials, OAuth, UserControlled = %v, %v, %v", jwt.ClientCredentials(), jwt.OAuth(), jwt.UserControlled())
	}
	if a := jwt.Authentication; a.TokenEndpointAuthMethod != packs.PrivateKeyJWT || a.PrivateKeyFile != filepath.Join(dir, "keys", "packbot.pem") || a.KeyID != "k1" {
		t.Errorf("jwt authentication = %+v", *a)
	}
	if a := basic.Authentication; a.TokenEndpointAuthMethod != packs.ClientSecretBasic || a.ClientSecret != "s3cret" || len(a.Scopes) != 1 {
		t.Errorf("basic authentication = %+v", *a)
	}
	for _, w := range p.Warnings {
		if strings.HasPrefix(w.Path, "mcp.") {
			t.Errorf("warning: %s", w)
		}
	}
}

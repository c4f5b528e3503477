package oauth_test

import (
	"crypto/elliptic"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/mcp/oauth/oauthtest"
	"github.com/packbot/packbot/packs"
)

// TestMachineWorkloadIdentity: a server with authentication.mode workload_identity gets
// packbot's token for the JWT its platform wrote to assertionFile (the RFC 7523 jwt-bearer
// grant); the file is read again for each token request, as platforms rotate it; a JWT the
// authorization server refuses (wrong audience) is an authentication failure, not asked again
// at once nor replaced by another grant.
func TestMachineWorkloadIdentity(t *testing.T) {
	platform := ecKey(t, elliptic.P256())
	file := filepath.Join(t.TempDir(), "token")
	write := func(aud string, exp time.Time) string {
		jwt := oauthtest.WorkloadJWT(platform, machineID, aud, exp)
		if err := os.WriteFile(file, []byte(jwt+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return jwt
	}
	var first string
	e := newMachineEnv(t, oauthtest.MCPOptions{}, func(e *machineEnv) {
		e.as.RegisterWorkload(machineID, platform.Public())
		first = write(e.as.URL(), e.clock.Now().Add(time.Hour))
		e.srv.Authentication = &packs.ServerAuth{Mode: packs.AuthWorkloadIdentity, ClientID: machineID,
			AssertionFile: file, Issuer: e.as.URL()}
	})
	e.mustCall("first call")
	e.clock.Advance(10 * time.Minute) // the access token expired; the platform rotated the JWT
	second := write(e.as.URL(), e.clock.Now().Add(time.Hour))
	e.mustCall("after rotation")
	presented, refusals := e.as.WorkloadStats()
	if len(refusals) != 0 || len(presented) != 2 || presented[0] != first || presented[1] != second {
		t.Fatalf("presented %d JWTs (refused: %q), want the first then the rotated one", len(presented), refusals)
	}

	e.clock.Advance(10 * time.Minute)
	write("https://elsewhere.example", e.clock.Now().Add(time.Hour))
	for range 2 {
		if _, err := e.call(); !errors.Is(err, mcp.ErrAuth) || !strings.Contains(err.Error(), "assertionFile") {
			t.Fatalf("call with a JWT for another audience: %v, want ErrAuth naming assertionFile", err)
		}
	}
	if presented, _ := e.as.WorkloadStats(); len(presented) != 3 {
		t.Errorf("%d JWTs presented, want 3 (a refused one is not presented again at once)", len(presented))
	}
	e.checkLogsClean(first, second)

	// A file that holds no JWT stops packbot at start.
	if err := os.WriteFile(file, []byte("not a jwt"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := oauth.NewMachine(oauth.MachineConfig{Servers: []packs.Server{e.srv}})
	if err == nil || !strings.Contains(err.Error(), "assertionFile") || strings.Contains(err.Error(), "not a jwt") {
		t.Errorf("NewMachine with a bad token file: %v", err)
	}
}

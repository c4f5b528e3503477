package oauth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/packbot/packbot/packs"
)

// grantJWTBearer is the RFC 7523 §2.1 grant with which a workload presents the JWT its
// platform issued it (MCP workload identity federation, SEP-1933).
const grantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// maxWorkloadToken bounds what is read of a workload's token file.
const maxWorkloadToken = 64 << 10

// grantType is the grant the server's tokens are requested with.
func (ms *machineServer) grantType() string {
	if ms.assertionFile != "" {
		return grantJWTBearer
	}
	return "client_credentials"
}

// newWorkloadServer checks a server whose authentication mode is workload_identity (past
// [checkMachineServer]): packbot
// presents the JWT its platform writes to assertionFile (a Kubernetes projected service
// account token, a cloud workload identity token), read again for every token request since
// platforms rotate it, with the jwt-bearer grant; the client id, when the pack gives one, is
// sent as client_id (a public client: the JWT is the credential).
func newWorkloadServer(s packs.Server) (*machineServer, error) {
	a := s.Authentication
	if a.AssertionFile == "" {
		return nil, errors.New("authentication.assertionFile is empty: name the file the platform writes the workload's JWT to")
	}
	if _, err := readWorkloadToken(a.AssertionFile); err != nil {
		return nil, fmt.Errorf("authentication.assertionFile: %w", err)
	}
	return &machineServer{srv: s, lock: make(chan struct{}, 1), id: a.ClientID, method: authNone, assertionFile: a.AssertionFile}, nil
}

// readWorkloadToken reads the workload's JWT: one compact JWS, trimmed. Errors never quote the
// file, which holds a credential.
func readWorkloadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxWorkloadToken+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	b = bytes.TrimSpace(b)
	if len(b) > maxWorkloadToken || bytes.Count(b, []byte(".")) != 2 || bytes.ContainsAny(b, " \t\r\n") {
		return "", fmt.Errorf("%s does not hold one JWT (three base64url parts separated by dots)", path)
	}
	return strings.Clone(string(b)), nil
}

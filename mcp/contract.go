package mcp

import (
	"context"
	"errors"
)

// Errors that callers tell apart with errors.Is. A *tool* failure is not an error: it is a
// [Result] with IsError set, which goes back to the LLM so that it can correct itself.
var (
	// ErrUnreachable: the server could not be reached or the session broke (network, process
	// exit, timeout while connecting). Retrying later may work.
	ErrUnreachable = errors.New("MCP server unreachable")
	// ErrTimeout: the server took longer than the server's timeoutMs to answer a call.
	ErrTimeout = errors.New("MCP call timed out")
	// ErrAuth: the server refused the credentials (HTTP 401 or 403).
	ErrAuth = errors.New("MCP server refused the credentials")
	// ErrNeedsAuthentication: the user has no usable credentials for this user-controlled server
	// yet (never configured, or an OAuth grant that can no longer be refreshed).
	ErrNeedsAuthentication = errors.New("credentials needed for this MCP server")
	// ErrProtocol: the server answered, but not as an MCP server should.
	ErrProtocol = errors.New("MCP protocol error")
	// ErrUnknownTool: the server has no such tool (or the allowlist hides it).
	ErrUnknownTool = errors.New("unknown MCP tool")
	// ErrUnknownServer: the pack has no such enabled server.
	ErrUnknownServer = errors.New("unknown MCP server")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("MCP pool closed")
)

// Authorizer supplies OAuth 2.1 access tokens for the users of user-controlled servers whose
// authentication mode is oauth2 (package mcp/oauth implements it). Both methods are safe for
// concurrent use.
type Authorizer interface {
	// Token returns a valid access token for identity on server, refreshing it first when it is
	// about to expire. It returns an error wrapping ErrNeedsAuthentication when the user must
	// authorize (never did, was revoked, or the refresh failed for good).
	Token(ctx context.Context, identity, server string) (string, error)
	// Refresh gets a new access token after the server rejected the current one (a 401
	// mid-session), with the same errors as Token.
	Refresh(ctx context.Context, identity, server string) (string, error)
}

// MachineAuthorizer supplies the OAuth 2.1 access tokens that packbot holds as itself for the
// shared sessions of admin-controlled servers whose authentication mode is client_credentials
// (package mcp/oauth implements it with the client-credentials grant). Both methods are safe for
// concurrent use; the pool calls them for every HTTP request of those sessions, so Token must
// answer from its cache while the token is fresh.
type MachineAuthorizer interface {
	// Token returns a valid access token for server, requesting a new one first when the
	// current one is about to expire. Errors wrap ErrAuth when the authorization server refused
	// packbot's client credentials, ErrUnreachable when it could not be asked.
	Token(ctx context.Context, server string) (string, error)
	// Renew returns an access token other than rejected, which the server refused (an HTTP 401):
	// the one another caller got meanwhile, or a new one. Errors as Token.
	Renew(ctx context.Context, server, rejected string) (string, error)
}

// StepUpper is an optional capability of an [Authorizer] (package mcp/oauth has it): after an
// HTTP 403 on an OAuth server, the pool hands it the server's WWW-Authenticate challenge instead
// of refreshing. It returns an error wrapping ErrNeedsAuthentication when the user must
// authorize again with more scopes, or one wrapping ErrAuth when that would not help (bounded
// step-up). Safe for concurrent use.
type StepUpper interface {
	StepUp(ctx context.Context, identity, server, challenge string) error
}

// Status of a user's credentials for a user-controlled server (the config menu and the admin
// API report it).
type Status string

// Statuses.
const (
	StatusSuccess             Status = "SUCCESS"              // configured and last known to work
	StatusFailure             Status = "FAILURE"              // configured, and the server rejected it
	StatusNeedsAuthentication Status = "NEEDS_AUTHENTICATION" // nothing configured (or OAuth to redo)
)

// Binder is an optional capability of an [Authorizer] or a [MachineAuthorizer] whose tokens
// may be sender-constrained (DPoP, RFC 9449; package mcp/oauth has it). For each HTTP request
// that carries token to server (identity "" for packbot's own tokens) the pool asks it for the
// headers that present the token: an Authorization header with the DPoP scheme and a fresh
// proof bound to req. Nil headers mean token is a plain bearer token. Safe for concurrent use.
type Binder interface {
	Bind(ctx context.Context, identity, server, token string, req HTTPRequest) (map[string]string, error)
}

// HTTPRequest is what a proof binds a token to: one request's method and URL, and the nonce
// the server gave last (RFC 9449 §9), if any.
type HTTPRequest struct {
	Method, URL, Nonce string
}

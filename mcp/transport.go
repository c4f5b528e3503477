package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store/secret"
)

// headerFunc returns the headers to add to one request (static pack headers, a user's
// configured headers, or a fresh OAuth bearer).
type headerFunc func(ctx context.Context) (map[string]secret.Value, error)

// observer remembers what an HTTP transport saw that the SDK's errors do not carry: the last
// authentication refusal (with the server's challenge), and the last answer that no MCP server
// would give (an HTML page, a 404), so that errors can be told apart and explained.
type observer struct {
	mu        sync.Mutex
	status    int
	challenge string
	foreign   string // description of the last non-MCP answer
}

func (o *observer) saw(req *http.Request, resp *http.Response) {
	ct := resp.Header.Get("Content-Type")
	o.mu.Lock()
	defer o.mu.Unlock()
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		o.status, o.challenge = code, resp.Header.Get("WWW-Authenticate")
	case code == http.StatusNotFound && req.Header.Get("Mcp-Session-Id") != "":
		// the server forgot the session (it restarted): not a foreign answer
	case code == http.StatusMethodNotAllowed && req.Method == http.MethodGet:
		// a streamable server without the optional standalone stream
	case code < 200 || code > 299:
		o.foreign = fmt.Sprintf("HTTP %d %s from %s %s", code, http.StatusText(code), req.Method, req.URL.Redacted())
	case code != http.StatusAccepted && code != http.StatusNoContent && resp.ContentLength != 0 && !mcpContentType(ct):
		o.foreign = fmt.Sprintf("content of type %q from %s %s", ct, req.Method, req.URL.Redacted())
	}
}

func mcpContentType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	return mt == "application/json" || mt == "text/event-stream"
}

// take returns what was seen and clears it.
func (o *observer) take() (status int, challenge, foreign string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	status, challenge, foreign = o.status, o.challenge, o.foreign
	o.status, o.challenge, o.foreign = 0, "", ""
	return status, challenge, foreign
}

// headerTransport adds headers to every request, for every HTTP transport (the SSE stream and
// its posts included), and records 401 and 403 answers.
type headerTransport struct {
	base    http.RoundTripper
	headers headerFunc
	obs     *observer
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.headers != nil {
		h, err := t.headers(req.Context())
		if err != nil {
			return nil, err
		}
		if len(h) > 0 {
			req = req.Clone(req.Context())
			for k, v := range h {
				req.Header.Set(k, v.Reveal())
			}
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		t.obs.saw(req, resp)
	}
	return resp, err
}

// AuthError is an ErrAuth with what the server said.
type AuthError struct {
	Status    int
	Challenge string // the WWW-Authenticate header, if any
}

func (e *AuthError) Error() string {
	if e.Challenge != "" {
		return fmt.Sprintf("%v: HTTP %d, WWW-Authenticate: %s", ErrAuth, e.Status, e.Challenge)
	}
	return fmt.Sprintf("%v: HTTP %d", ErrAuth, e.Status)
}

func (e *AuthError) Unwrap() error { return ErrAuth }

// transportFor builds the go-sdk transport of a server. env is the environment a stdio server's
// process starts with (the pack's env entries are added).
func transportFor(s *packs.Server, base http.RoundTripper, headers headerFunc, obs *observer, env []string, stderr io.Writer) (mcpsdk.Transport, error) {
	client := &http.Client{Transport: &headerTransport{base: base, headers: headers, obs: obs}}
	switch s.Transport {
	case packs.TransportStreamableHTTP:
		return &mcpsdk.StreamableClientTransport{Endpoint: s.URL, HTTPClient: client, MaxRetries: -1}, nil
	case packs.TransportSSE:
		return &mcpsdk.SSEClientTransport{Endpoint: s.URL, HTTPClient: client}, nil
	case packs.TransportStdio:
		cmd := exec.Command(s.Command, s.Args...)
		cmd.Env = append([]string(nil), env...)
		for k, v := range s.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = stderr
		return &mcpsdk.CommandTransport{Command: cmd}, nil
	}
	return nil, fmt.Errorf("server %s: unsupported transport %q", s.Name, s.Transport)
}

// classify turns an SDK error into one of the package's error classes.
func classify(ctx context.Context, err error, obs *observer) error {
	if err == nil {
		return nil
	}
	status, challenge, foreign := obs.take()
	switch {
	case status != 0:
		return &AuthError{Status: status, Challenge: challenge}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	case errors.Is(err, context.Canceled), errors.Is(err, ErrNeedsAuthentication), errors.Is(err, ErrClosed):
		return err
	case errors.Is(err, mcpsdk.ErrSessionMissing):
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	case foreign != "":
		return &ProtocolError{Code: 0, Message: "the server answered with " + foreign + ", not as an MCP endpoint (check the URL and transport)"}
	}
	// Anything else means the session could not be used: the connection was refused, dropped,
	// or the transport gave up (the SDK's own "rejected by transport" included).
	var wire *jsonrpc.Error
	if errors.As(err, &wire) && wire.Code != codeRejected {
		return &ProtocolError{Code: wire.Code, Message: wire.Message}
	}
	return fmt.Errorf("%w: %w", ErrUnreachable, err)
}

// codeRejected is the code of the go-sdk's "rejected by transport" error: the request was never
// delivered.
const codeRejected = -32005

// ProtocolError is an ErrProtocol carrying the JSON-RPC error the server answered.
type ProtocolError struct {
	Code    int64
	Message string
}

func (e *ProtocolError) Error() string {
	if e.Code == 0 {
		return fmt.Sprintf("%v: %s", ErrProtocol, e.Message)
	}
	return fmt.Sprintf("%v: %s (JSON-RPC code %d)", ErrProtocol, e.Message, e.Code)
}

func (e *ProtocolError) Unwrap() error { return ErrProtocol }

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

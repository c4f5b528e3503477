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
	"sync/atomic"
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
	probe   *taskProbe // nil: no tools/list capture
	// renewable: headers can renew their credential after a 401 (see renewal).
	renewable bool

	mu    sync.Mutex
	nonce string // the last DPoP-Nonce the server gave (see dpop.go)
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	out, sent := req, map[string]secret.Value(nil)
	if t.headers != nil {
		h, err := t.headers(withRequest(req.Context(), t.request(req)))
		if err != nil {
			return nil, err
		}
		out, sent = withHeaders(req, h), h
	}
	resp, err := t.base.RoundTrip(out)
	if err == nil {
		t.sawNonce(resp)
	}
	if err == nil && resp.StatusCode == http.StatusUnauthorized && sent != nil && (t.renewable || wantsNonce(resp, sent)) {
		again, rerr := t.renew(req, sent, wantsNonce(resp, sent))
		if rerr != nil || again != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			_ = resp.Body.Close()
		}
		switch {
		case rerr != nil:
			return nil, rerr
		case again != nil:
			resp, err = t.base.RoundTrip(again)
		}
	}
	if err == nil {
		t.obs.saw(req, resp)
		if t.probe != nil {
			t.probe.capture(req, resp)
		}
		if req.Method == http.MethodPost && resp.StatusCode >= 200 && resp.StatusCode <= 299 {
			if d, ok := req.Context().Value(deliveryKey{}).(*atomic.Bool); ok {
				d.Store(true)
			}
		}
	}
	return resp, err
}

// withHeaders returns req with h set (a clone when h is not empty).
func withHeaders(req *http.Request, h map[string]secret.Value) *http.Request {
	if len(h) == 0 {
		return req
	}
	req = req.Clone(req.Context())
	for k, v := range h {
		req.Header.Set(k, v.Reveal())
	}
	return req
}

// renewal is in the context of a header lookup made after the server answered 401 to the
// headers rejected, for a server whose headers can renew their credential (a client-credentials
// token, see [Pool.sharedHeaders]): the headerFunc renews it and sets renewed. For other
// servers the 401 stands (a user's OAuth token is refreshed by [Pool.Call] instead, typed
// credentials are marked failed).
type renewal struct {
	rejected map[string]secret.Value
	renewed  bool
}

type renewalKey struct{}

// renew returns req to send again with renewed headers after a 401, or nil when the headers
// cannot be renewed or the body cannot be sent again. A 401 means the server did not act on
// the request, so sending it once more is safe; it is done once, never again for the answer
// to the second try. An error is the renewal's (e.g. the authorization server refused).
func (t *headerTransport) renew(req *http.Request, sent map[string]secret.Value, nonceOnly bool) (*http.Request, error) {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return nil, nil
	}
	ctx := withRequest(req.Context(), t.request(req))
	r := &renewal{rejected: sent}
	if !nonceOnly {
		ctx = context.WithValue(ctx, renewalKey{}, r)
	}
	h, err := t.headers(ctx)
	if err != nil || (!nonceOnly && !r.renewed) {
		return nil, err
	}
	again := withHeaders(req, h)
	if req.GetBody != nil {
		if again == req {
			again = req.Clone(req.Context())
		}
		if again.Body, err = req.GetBody(); err != nil {
			return nil, nil
		}
	}
	return again, nil
}

// deliveryKey marks the context of one call with an *atomic.Bool that the HTTP transports set
// once the server accepted the call's POST (a 2xx answer). From then on the call may have run:
// it must not be sent again, even when the session breaks later — while its stream is being
// resumed, or because another stream of the session failed and the SDK retired every pending
// call with that stream's error (ErrSessionMissing from a restarted server included).
type deliveryKey struct{}

// withDelivery returns ctx marked as above, and the flag.
func withDelivery(ctx context.Context) (context.Context, *atomic.Bool) {
	d := new(atomic.Bool)
	return context.WithValue(ctx, deliveryKey{}, d), d
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

// streamRetries bounds how often the go-sdk reconnects one SSE stream (a call's, or the
// standalone one) without progress before it gives up and fails the session. A server may close
// a call's stream early (MCP 2025-11-25, with an SSE retry field); the SDK then reconnects with
// GET and Last-Event-ID, never by posting the call again. The first attempt waits the server's
// retry hint, the second the SDK's backoff (1.5–3 s): enough to ride out a closed stream or a
// dropped connection, while a server that is gone is reported as unreachable about 3 s after
// its hint, well inside the default 30 s call timeout (which bounds a call in any case, however
// long the hint). The SDK's default (5) would take up to ~25 s; -1 (no reconnection) lost every
// call whose stream a server closed early.
const streamRetries = 2

// transportFor builds the go-sdk transport of a server. env is the environment a stdio server's
// process starts with (the pack's env entries are added).
// The probe reads the tools' execution.taskSupport from tools/list results.
func transportFor(s *packs.Server, base http.RoundTripper, headers headerFunc, obs *observer, probe *taskProbe, env []string, stderr io.Writer) (mcpsdk.Transport, error) {
	ht := &headerTransport{base: base, headers: headers, obs: obs, renewable: s.MachineAuth()}
	client := &http.Client{Transport: ht}
	switch s.Transport {
	case packs.TransportStreamableHTTP:
		ht.probe = probe
		return &mcpsdk.StreamableClientTransport{Endpoint: s.URL, HTTPClient: client, MaxRetries: streamRetries}, nil
	case packs.TransportSSE:
		return &probeTransport{Transport: &mcpsdk.SSEClientTransport{Endpoint: s.URL, HTTPClient: client}, probe: probe}, nil
	case packs.TransportStdio:
		cmd := exec.Command(s.Command, s.Args...)
		cmd.Env = append([]string(nil), env...)
		for k, v := range s.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = stderr
		return &probeTransport{Transport: &mcpsdk.CommandTransport{Command: cmd}, probe: probe}, nil
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
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	case errors.Is(err, context.Canceled), errors.Is(err, ErrNeedsAuthentication), errors.Is(err, ErrClosed),
		errors.Is(err, ErrAuth): // a machine token the authorization server refused
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

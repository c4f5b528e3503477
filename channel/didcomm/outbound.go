package didcomm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/common/service"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/transport"
)

// Reasons a message could not be delivered: the label of the undelivered counter and the
// "reason" of the WARN line that reports it.
const (
	// ReasonNoRoute: the peer's DID document has no DIDComm v1 service packbot can use (no
	// endpoint, a scheme other than http(s)/ws(s), a routing key that cannot be read), or the
	// connection is unknown.
	ReasonNoRoute = "no_route"
	// ReasonRefused: the endpoint refused the connection, or could not be reached at all.
	ReasonRefused = "refused"
	// ReasonHTTPStatus: the endpoint answered with an HTTP status other than 2xx.
	ReasonHTTPStatus = "http_status"
	// ReasonTimeout: the endpoint did not answer in time.
	ReasonTimeout = "timeout"
	// ReasonError: anything else (packing, a WebSocket closed mid-message…).
	ReasonError = "error"
)

// ErrUndelivered is wrapped by the error of a send whose message did not reach the peer's
// endpoint (and was logged and counted as such).
var ErrUndelivered = errors.New("message not delivered")

// messageType is the @type of an outbound message struct, for logs.
func messageType(msg any) string {
	if h, ok := msg.(interface{ messageType() string }); ok {
		return h.messageType()
	}
	return fmt.Sprintf("%T", msg)
}

// deliveryTimeout bounds one delivery attempt (connect, send, and an HTTP answer).
const deliveryTimeout = 20 * time.Second

// deliveryError says why an envelope did not reach an endpoint. Its text carries a marker that
// survives afgo's error wrapping as a string (afgo's DID exchange reports a failed response
// only as text): see parseUndelivered.
type deliveryError struct {
	Endpoint string
	Reason   string
	Err      error
}

const undeliveredMarker = "[undelivered "

func (e *deliveryError) Error() string {
	return fmt.Sprintf("%sreason=%s endpoint=%s] %v", undeliveredMarker, e.Reason, e.Endpoint, e.Err)
}

func (e *deliveryError) Unwrap() error { return e.Err }

// parseUndelivered finds the reason and endpoint of a deliveryError in an error's text.
func parseUndelivered(s string) (reason, endpoint string, ok bool) {
	_, rest, found := strings.Cut(s, undeliveredMarker)
	if !found {
		return "", "", false
	}
	fields, _, found := strings.Cut(rest, "]")
	if !found {
		return "", "", false
	}
	for _, f := range strings.Fields(fields) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "reason":
			reason = v
		case "endpoint":
			endpoint = v
		}
	}
	return reason, endpoint, reason != ""
}

// undeliveredReason classifies an error returned while sending.
func undeliveredReason(err error) (reason, endpoint string) {
	var de *deliveryError
	if errors.As(err, &de) {
		return de.Reason, de.Endpoint
	}
	if reason, endpoint, ok := parseUndelivered(err.Error()); ok {
		return reason, endpoint
	}
	return ReasonError, ""
}

// outboundTransport delivers packed envelopes to a service endpoint over HTTP(S) or WebSocket,
// chosen by the endpoint's scheme (afgo's own HTTP transport knows no WebSocket, and reports
// every failure alike). Forward wrapping for mediated recipients happens before, in afgo's
// dispatcher, with keys our DID documents give it (see routing.go).
//
// Each envelope sent over WebSocket gets its own connection, closed with a close handshake
// once written: a Credo mediator closes a socket as soon as a message on it asks for no return
// route (every forward), so a reused socket would swallow the next message unnoticed.
type outboundTransport struct {
	client *http.Client
	life   context.Context
	log    *slog.Logger
}

func newOutboundTransport(life context.Context, client *http.Client, log *slog.Logger) *outboundTransport {
	return &outboundTransport{client: client, life: life, log: log}
}

// Start implements transport.OutboundTransport.
func (t *outboundTransport) Start(transport.Provider) error { return nil }

// AcceptRecipient implements transport.OutboundTransport: no connection is kept per recipient.
func (t *outboundTransport) AcceptRecipient([]string) bool { return false }

// Accept implements transport.OutboundTransport.
func (t *outboundTransport) Accept(endpoint string) bool { return supportedScheme(endpoint) }

func supportedScheme(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
		return u.Host != ""
	}
	return false
}

// Send implements transport.OutboundTransport.
func (t *outboundTransport) Send(data []byte, dest *service.Destination) (string, error) {
	endpoint, err := dest.ServiceEndpoint.URI()
	if err != nil || endpoint == "" {
		return "", &deliveryError{Endpoint: endpoint, Reason: ReasonNoRoute, Err: errors.New("no service endpoint")}
	}
	if !supportedScheme(endpoint) {
		return "", &deliveryError{Endpoint: endpoint, Reason: ReasonNoRoute, Err: errors.New("unsupported endpoint scheme")}
	}
	ctx, cancel := context.WithTimeout(t.life, deliveryTimeout)
	defer cancel()
	if strings.HasPrefix(endpoint, "ws://") || strings.HasPrefix(endpoint, "wss://") {
		return "", t.sendWS(ctx, endpoint, data)
	}
	return "", t.sendHTTP(ctx, endpoint, data)
}

func (t *outboundTransport) sendHTTP(ctx context.Context, endpoint string, data []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(data))
	if err != nil {
		return &deliveryError{Endpoint: endpoint, Reason: ReasonNoRoute, Err: err}
	}
	req.Header.Set("Content-Type", "application/didcomm-envelope-enc")
	resp, err := t.client.Do(req)
	if err != nil {
		return &deliveryError{Endpoint: endpoint, Reason: networkReason(err), Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &deliveryError{Endpoint: endpoint, Reason: ReasonHTTPStatus, Err: fmt.Errorf("HTTP %d", resp.StatusCode)}
	}
	return nil
}

// sendWS dials the endpoint, writes the envelope as one binary message, and closes the
// connection with a close handshake, which returns once the peer has read what was written.
func (t *outboundTransport) sendWS(ctx context.Context, endpoint string, data []byte) error {
	// The handshake uses a client without a total timeout; ctx bounds the whole exchange.
	c, resp, err := websocket.Dial(ctx, endpoint, &websocket.DialOptions{HTTPClient: &http.Client{Transport: t.client.Transport}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		reason := networkReason(err)
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			reason = ReasonHTTPStatus
			err = fmt.Errorf("WebSocket handshake: HTTP %d", resp.StatusCode)
		}
		return &deliveryError{Endpoint: endpoint, Reason: reason, Err: err}
	}
	defer func() { _ = c.CloseNow() }()
	c.SetReadLimit(64 << 10)
	if err := c.Write(ctx, websocket.MessageBinary, data); err != nil {
		return &deliveryError{Endpoint: endpoint, Reason: networkReason(err), Err: err}
	}
	// A peer that closes first (as Credo's mediator does once the message is in) is fine too.
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil && websocket.CloseStatus(err) == -1 && !errors.Is(err, net.ErrClosed) {
		t.log.DebugContext(ctx, "didcomm WebSocket close", "endpoint", endpointHost(endpoint), "err", err)
	}
	return nil
}

// networkReason classifies a transport error.
func networkReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH):
		return ReasonRefused
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	if errors.As(err, &dnsErr) || (errors.As(err, &opErr) && opErr.Op == "dial") {
		return ReasonRefused
	}
	return ReasonError
}

var _ transport.OutboundTransport = (*outboundTransport)(nil)

package didcomm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync/atomic"

	"github.com/hyperledger/aries-framework-go/pkg/didcomm/transport"
)

// DefaultMaxBodyBytes is the largest inbound envelope accepted unless configured otherwise.
const DefaultMaxBodyBytes = 1 << 20

// errNotAccepted: the bot did not accept an inbound event (see channel.Handler).
var errNotAccepted = errors.New("didcomm: event not accepted")

// inboundTransport receives envelopes on packbot's own HTTP server (afgo's HTTP transport
// opens its own listener and exits the process when the port is taken). It is an afgo
// InboundTransport whose ServeHTTP is mounted on the bot's mux: Start gives it the framework's
// packager and inbound handler; before that, and after Stop, it answers 503.
type inboundTransport struct {
	endpoint string
	maxBody  int64
	log      *slog.Logger
	prov     atomic.Pointer[transport.Provider]
	// received, when set (a wallet's agent), takes each well-formed envelope as soon as it is
	// read: the sender is answered 202 at once, and receive unpacks and handles it afterwards,
	// in arrival order. For a sender that writes down what was delivered when it gets its 202
	// (packbot's outbox), the time in which its crash makes it send the message again is then
	// the 202's way back, not the receiver's work. The bot's own agent answers only once the
	// event is committed (nil): its 202 is a promise that nothing is lost.
	received chan []byte
}

// Start implements transport.InboundTransport.
func (t *inboundTransport) Start(prov transport.Provider) error {
	t.prov.Store(&prov)
	return nil
}

// Stop implements transport.InboundTransport.
func (t *inboundTransport) Stop() error {
	t.prov.Store(nil)
	return nil
}

// Endpoint implements transport.InboundTransport.
func (t *inboundTransport) Endpoint() string { return t.endpoint }

// mediaTypes DIDComm v1 senders use for envelopes.
var envelopeMediaTypes = map[string]bool{
	"application/didcomm-envelope-enc": true,
	"application/ssi-agent-wire":       true,
	"application/json":                 true,
	"":                                 true,
}

// ServeHTTP unpacks one envelope and hands it to the framework. Bad input is answered with a
// 4xx and a logged reason; it never reaches the protocol code.
func (t *inboundTransport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := t.prov.Load()
	if p == nil {
		http.Error(w, "agent not running", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Header.Get("Content-Type") != "" && (err != nil || !envelopeMediaTypes[ct]) {
		t.log.WarnContext(r.Context(), "didcomm inbound refused", "reason", "content type", "content_type", r.Header.Get("Content-Type"))
		http.Error(w, "unsupported content type", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, t.maxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		t.log.WarnContext(r.Context(), "didcomm inbound refused", "reason", "too large", "limit", t.maxBody)
		http.Error(w, fmt.Sprintf("envelope larger than %d bytes", t.maxBody), http.StatusRequestEntityTooLarge)
		return
	case err != nil:
		t.log.WarnContext(r.Context(), "didcomm inbound refused", "reason", "read body", "err", err)
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	case len(body) == 0:
		http.Error(w, "empty body", http.StatusBadRequest)
		return
	}
	t.log.DebugContext(r.Context(), "didcomm inbound", "bytes", len(body))
	// An RFC 0019 envelope is a JSON object. afgo's packager also tries other encodings, and
	// panics on some of them (a body of one quote), so nothing else reaches it.
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		t.log.WarnContext(r.Context(), "didcomm inbound refused", "reason", "not a JSON envelope", "bytes", len(body))
		http.Error(w, "not a DIDComm v1 envelope", http.StatusBadRequest)
		return
	}
	if t.received != nil {
		select {
		case t.received <- body:
			w.WriteHeader(http.StatusAccepted)
		default:
			http.Error(w, "receiver busy; send it again", http.StatusServiceUnavailable)
		}
		return
	}
	if code, reason := t.handle(r.Context(), *p, body); code != http.StatusAccepted {
		http.Error(w, reason, code)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// handle unpacks body and hands it to the framework; it returns the HTTP status that answers
// it and, for a refusal, why.
func (t *inboundTransport) handle(ctx context.Context, p transport.Provider, body []byte) (int, string) {
	env, err := p.Packager().UnpackMessage(body)
	if err != nil {
		t.log.WarnContext(ctx, "didcomm inbound refused", "reason", "unpack", "err", err, "bytes", len(body))
		return http.StatusBadRequest, "cannot unpack envelope"
	}
	if err := p.InboundMessageHandler()(env); err != nil {
		if errors.Is(err, errNotAccepted) || errors.Is(err, errNotRunning) {
			// The bot could not commit the event (its store is unreachable): not acknowledged.
			t.log.WarnContext(ctx, "didcomm inbound message not accepted", "err", err)
			return http.StatusServiceUnavailable, "message not accepted; send it again"
		}
		t.log.WarnContext(ctx, "didcomm inbound message not handled", "err", err)
		return http.StatusBadRequest, "message not handled"
	}
	return http.StatusAccepted, ""
}

// receiveQueue bounds the envelopes a receiver (see inboundTransport.received) holds unhandled
// — and so its memory: at most receiveQueue × maxBody (32 MiB by default) — beyond it, senders
// are answered 503 and send again later. Handling an envelope takes milliseconds: the queue
// only absorbs bursts.
const receiveQueue = 32

// receive handles the envelopes ServeHTTP took (t.received), in the order they arrived, until
// ctx ends.
func (t *inboundTransport) receive(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case body := <-t.received:
			p := t.prov.Load()
			if p == nil {
				t.log.WarnContext(ctx, "didcomm inbound dropped", "reason", "agent stopped", "bytes", len(body))
				continue
			}
			if code, reason := t.handle(ctx, *p, body); code != http.StatusAccepted {
				t.log.WarnContext(ctx, "didcomm inbound dropped after it was accepted", "reason", reason, "bytes", len(body))
			}
		}
	}
}

var _ transport.InboundTransport = (*inboundTransport)(nil)

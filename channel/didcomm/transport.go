package didcomm

import (
	"bytes"
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
	env, err := (*p).Packager().UnpackMessage(body)
	if err != nil {
		t.log.WarnContext(r.Context(), "didcomm inbound refused", "reason", "unpack", "err", err, "bytes", len(body))
		http.Error(w, "cannot unpack envelope", http.StatusBadRequest)
		return
	}
	if err := (*p).InboundMessageHandler()(env); err != nil {
		if errors.Is(err, errNotAccepted) || errors.Is(err, errNotRunning) {
			// The bot could not commit the event (its store is unreachable): not acknowledged.
			t.log.WarnContext(r.Context(), "didcomm inbound message not accepted", "err", err)
			http.Error(w, "message not accepted; send it again", http.StatusServiceUnavailable)
			return
		}
		t.log.WarnContext(r.Context(), "didcomm inbound message not handled", "err", err)
		http.Error(w, "message not handled", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

var _ transport.InboundTransport = (*inboundTransport)(nil)

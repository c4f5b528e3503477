package didcomm

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hyperledger/aries-framework-go/pkg/common/model"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/common/service"
)

// TestDeliveryRetriesHungConnect: a connect that hangs (its SYN lost) is given up after one
// attempt's bound and made again on a new connection; the envelope is delivered once.
func TestDeliveryRetriesHungConnect(t *testing.T) {
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	var attempts atomic.Int32
	d := &net.Dialer{}
	dial := retryingDialer{attempt: 50 * time.Millisecond, dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if attempts.Add(1) == 1 { // the first SYN is lost: nothing answers until the attempt ends
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return d.DialContext(ctx, network, addr)
	}}
	tr := &http.Transport{DialContext: dial.DialContext}
	defer tr.CloseIdleConnections()
	out := newOutboundTransport(t.Context(), &http.Client{Transport: tr}, slog.New(slog.DiscardHandler))
	dest := &service.Destination{ServiceEndpoint: model.NewDIDCommV1Endpoint(srv.URL)}
	if _, err := out.Send([]byte(`{}`), dest); err != nil {
		t.Fatalf("send: %v", err)
	}
	if attempts.Load() != 2 || got.Load() != 1 {
		t.Errorf("connect attempts %d, envelopes received %d; want 2 and 1", attempts.Load(), got.Load())
	}
}

// TestDialRefusedNotRetried: a refusal is an answer; it is returned at once.
func TestDialRefusedNotRetried(t *testing.T) {
	var attempts atomic.Int32
	dial := retryingDialer{attempt: time.Minute, dial: func(context.Context, string, string) (net.Conn, error) {
		attempts.Add(1)
		return nil, syscall.ECONNREFUSED
	}}
	if _, err := dial.DialContext(t.Context(), "tcp", "127.0.0.1:1"); !errors.Is(err, syscall.ECONNREFUSED) || attempts.Load() != 1 {
		t.Errorf("dial = %v after %d attempts; want ECONNREFUSED after 1", err, attempts.Load())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	hang := retryingDialer{attempt: time.Minute, dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	if _, err := hang.DialContext(ctx, "tcp", "127.0.0.1:1"); !errors.Is(err, context.Canceled) {
		t.Errorf("dial after the caller gave up = %v, want context.Canceled", err)
	}
}

package didcomm

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// connectAttempt bounds one TCP connect of a delivery; deliveryTimeout bounds them all.
const connectAttempt = 5 * time.Second

// retryingDialer connects to an endpoint, giving each attempt at most attempt and trying again
// on a new connection (a new source port) while ctx lasts. A connect that hangs is one whose
// SYN, or the answer to it, was lost — by a NAT that forgot the flow, a bridge in a container
// network — and retransmitting on the same flow rarely mends it, where a new flow does.
// Nothing has been sent on a connection that did not open, so trying again never repeats a
// message. Refusals and other errors are returned at once.
type retryingDialer struct {
	attempt time.Duration
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (d retryingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, d.attempt)
		c, err := d.dial(actx, network, addr)
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		if err == nil || ctx.Err() != nil || !timedOut {
			return c, err
		}
	}
}

// newHTTPClient is the default client of deliveries: the standard transport, with connects
// retried (retryingDialer), and a bound on the whole exchange.
func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	tr.DialContext = retryingDialer{attempt: connectAttempt, dial: d.DialContext}.DialContext
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

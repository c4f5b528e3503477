package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/packbot/packbot/channel/vsagent"
)

// Environment variables of the listeners and the webhook secret.
const (
	envHTTPAddr      = "PACKBOT_HTTP_ADDR"
	envWebhookAddr   = "PACKBOT_WEBHOOK_ADDR"
	envAdminAddr     = "PACKBOT_ADMIN_ADDR"
	envWebhookSecret = "PACKBOT_WEBHOOK_SECRET"
	// envWebhookOpen lets the VS Agent's webhooks listen beyond loopback without a secret.
	envWebhookOpen = "PACKBOT_WEBHOOK_ALLOW_UNAUTHENTICATED"
	// envConnsPerClient caps the connections of one address on the public listener.
	envConnsPerClient = "PACKBOT_PUBLIC_CONNS_PER_CLIENT"
)

// defaultHTTPAddr is where serve listens when neither --http nor PACKBOT_HTTP_ADDR says.
const defaultHTTPAddr = "127.0.0.1:8080"

// endpoint is one HTTP listener of serve, the routes that mount on it and its server, with its
// limits: [publicHTTPLimits] for the public one, [defaultHTTPLimits] for the others.
type endpoint struct {
	name   string // public, webhooks, admin
	setBy  string // what names its address, for messages
	addr   string
	limits httpLimits
	log    *slog.Logger
	ln     net.Listener
	mux    *http.ServeMux
	srv    *http.Server
	served bool // ln is the server's to close
	// check, when set, vets the address the listener is bound to: an error closes it.
	check func(e *endpoint) error
}

// listen opens the endpoint's listener, with the connection cap.
func (e *endpoint) listen(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", e.addr)
	if err != nil {
		return fmt.Errorf("listen on %s (set %s): %w", e.addr, e.setBy, err)
	}
	e.ln = limitListener(ln, e.limits, e.overLimit())
	if e.check != nil {
		if err := e.check(e); err != nil {
			return errors.Join(err, e.ln.Close())
		}
	}
	return nil
}

func (e *endpoint) close(context.Context) error {
	if e.served || e.ln == nil { // the server closed it
		return nil
	}
	return e.ln.Close()
}

func (e *endpoint) newServer(ctx context.Context) error {
	e.srv = newHTTPServer(ctx, e.mux, e.limits)
	return nil
}

// serve serves HTTP until ctx ends, then shuts the server down (at most 10 s).
func (e *endpoint) serve(ctx context.Context) error {
	e.served = true
	errc := make(chan error, 1)
	go func() { errc <- e.srv.Serve(e.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// url is http:// and the address the endpoint listens on.
func (e *endpoint) url() string { return "http://" + e.ln.Addr().String() }

// endpoints are serve's listeners: public (the DIDComm endpoint, the invitation, OAuth
// callbacks), webhooks (the VS Agent's events) and admin (/healthz, /readyz, /metrics). The
// webhooks and admin endpoints are the public one unless PACKBOT_WEBHOOK_ADDR and
// PACKBOT_ADMIN_ADDR name addresses of their own.
type endpoints struct {
	public, webhooks, admin *endpoint
	all                     []*endpoint // the distinct ones, public first
}

// planEndpoints reads the addresses and the public listener's limit per client. A webhook
// address is for the vsagent channel only: with another one it is ignored, with a warning.
func planEndpoints(ctx context.Context, a *app, httpFlag, kind string) (endpoints, error) {
	perClient := defaultConnsPerClient
	if v := a.getenv(envConnsPerClient); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return endpoints{}, fmt.Errorf("%s=%q: want a number of connections (0: no limit per client)", envConnsPerClient, v)
		}
		perClient = n
	}
	pub := &endpoint{name: "public", setBy: "--http or " + envHTTPAddr, addr: firstNonEmpty(httpFlag, a.getenv(envHTTPAddr), defaultHTTPAddr),
		limits: publicHTTPLimits(perClient), log: a.logger}
	eps := endpoints{public: pub, webhooks: pub, admin: pub, all: []*endpoint{pub}}
	own := func(name, env string) *endpoint {
		addr := a.getenv(env)
		if addr == "" || addr == pub.addr && !strings.HasSuffix(addr, ":0") { // ":0" is a port of its own each time
			return pub
		}
		e := &endpoint{name: name, setBy: env, addr: addr, limits: defaultHTTPLimits(), log: a.logger}
		eps.all = append(eps.all, e)
		return e
	}
	if kind == "vsagent" {
		eps.webhooks = own("webhooks", envWebhookAddr)
	} else if a.getenv(envWebhookAddr) != "" {
		a.logger.WarnContext(ctx, envWebhookAddr+" is ignored: the "+kind+" channel receives no webhooks")
	}
	eps.admin = own("admin", envAdminAddr)
	return eps, nil
}

// overLimit logs, at most once a minute, that a client holds as many connections of the
// listener as it may (its new ones are closed).
func (e *endpoint) overLimit() func(net.Addr) {
	var last atomic.Int64
	return func(addr net.Addr) {
		now := time.Now().UnixNano()
		prev := last.Load()
		if now-prev < int64(time.Minute) || !last.CompareAndSwap(prev, now) {
			return
		}
		host, _, _ := net.SplitHostPort(addr.String())
		e.log.Warn("a client holds as many connections as it may: its new ones are closed", slog.String("listener", e.name),
			slog.String("client", host), slog.Int("limit", e.limits.MaxConnsPerClient),
			slog.String("fix", "behind a reverse proxy every connection is the proxy's: raise "+envConnsPerClient+" above its connection pool, or 0"))
	}
}

// webhookSecret is PACKBOT_WEBHOOK_SECRET, checked.
func webhookSecret(a *app) (string, error) {
	v := a.getenv(envWebhookSecret)
	if v == "" {
		return "", nil
	}
	if err := vsagent.CheckWebhookSecret(v); err != nil {
		return "", fmt.Errorf("%s: %v (fix: set it to %d or more letters, digits, '-', '_', '.' or '~', such as the output of "+
			"'openssl rand -hex 24', and give the VS Agent EVENTS_BASE_URL=http://<packbot>/hooks/<the secret>)", envWebhookSecret, err, vsagent.MinSecretLen)
	}
	return v, nil
}

// webhookGuard is the check of the VS Agent's webhooks listener: without a secret, it must be
// bound to loopback, unless the deployer allowed it (PACKBOT_WEBHOOK_ALLOW_UNAUTHENTICATED):
// whoever reaches the port could post events as any connection, a forged proof submission
// logging them in as anyone.
func webhookGuard(secret string, allowOpen bool) func(*endpoint) error {
	return func(e *endpoint) error {
		if secret != "" || allowOpen || onLoopback(e.ln.Addr()) {
			return nil
		}
		return fmt.Errorf("the VS Agent's webhooks would listen on %s, beyond loopback, without %s: anyone who reaches it could post "+
			"events as any connection, and log in as anyone with a forged proof (fix: set %s, and EVENTS_BASE_URL=http://<packbot>/hooks/<secret> "+
			"on the VS Agent; or set %s to a loopback address; or, when a private network keeps everyone but the VS Agent out, set %s=true)",
			e.ln.Addr(), envWebhookSecret, envWebhookSecret, e.setBy, envWebhookOpen)
	}
}

// onLoopback reports whether addr is a loopback address.
func onLoopback(addr net.Addr) bool {
	host, _, err := net.SplitHostPort(addr.String())
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}

// webhookOpen is PACKBOT_WEBHOOK_ALLOW_UNAUTHENTICATED, checked.
func webhookOpen(a *app) (bool, error) {
	v := a.getenv(envWebhookOpen)
	if v == "" {
		return false, nil
	}
	allow, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", envWebhookOpen, v)
	}
	return allow, nil
}

// warnOpenWebhooks warns when the VS Agent's webhooks listen beyond loopback without a secret
// (the deployer allowed it): whoever reaches the port can post events as any connection.
func warnOpenWebhooks(ctx context.Context, log *slog.Logger, webhooks *endpoint, secret string) {
	if secret != "" || onLoopback(webhooks.ln.Addr()) {
		return
	}
	log.WarnContext(ctx, "VS Agent webhooks listen on a non-loopback address without a secret ("+envWebhookOpen+"): anyone who reaches it can post events as any connection",
		slog.String("addr", webhooks.ln.Addr().String()),
		slog.String("fix", "set "+envWebhookSecret+" (and EVENTS_BASE_URL=http://<packbot>/hooks/<secret> on the VS Agent), or "+envWebhookAddr+" to a private address"))
}

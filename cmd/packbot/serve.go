package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

type serveOptions struct {
	pack    string
	http    string
	store   storeOptions
	channel channelOptions
}

func newServeCmd(a *app) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the bot",
		Long: `Run the bot: load the agent pack, open the store (applying migrations), and serve
/healthz, /readyz and /metrics (Prometheus) on the HTTP address. Stops cleanly on SIGINT or
SIGTERM.

With no flags and no environment it runs the embedded demo pack on SQLite under ./data.`,
		Example: `  packbot serve
  packbot serve --pack packs/wise-corporate --database-url postgres://packbot@localhost/packbot
  AGENT_PACK_PATH=./agent-packs DATABASE_URL=postgres://… packbot serve --log-format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runServe(ctx, a, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.pack, "pack", "", "agent pack file or folder (env AGENT_PACK_PATH, default ./agent-packs, else the embedded demo)")
	f.StringVar(&o.http, "http", "", "HTTP listen address (env PACKBOT_HTTP_ADDR, default 127.0.0.1:8080)")
	o.store.bind(f)
	o.channel.bind(f)
	return cmd
}

// runServe runs until ctx is done, then shuts down and returns nil.
func runServe(ctx context.Context, a *app, o serveOptions) error {
	log := a.logger
	p, err := a.loadPack(o.pack, a.stderr)
	if err != nil {
		return err
	}
	for _, w := range p.Warnings {
		log.WarnContext(ctx, "agent pack", slog.String("problem", w.String()))
	}
	if problem := channelProblem(p, o.channel.resolve(a)); problem != "" {
		return errors.New(problem)
	}
	log.InfoContext(ctx, "agent pack loaded", slog.String("source", p.Source), slog.String("id", p.Metadata.ID),
		slog.Int("mcp_servers", len(p.MCP.Servers)))

	st, scfg, err := o.store.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.ErrorContext(ctx, "close store", slog.Any("err", err))
		}
	}()
	kr := checkKeyring(ctx, a, p)

	addr := firstNonEmpty(o.http, a.getenv("PACKBOT_HTTP_ADDR"), "127.0.0.1:8080")
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (set --http or PACKBOT_HTTP_ADDR): %w", addr, err)
	}
	serving := false
	defer func() {
		if !serving { // Shutdown closes it once the server runs
			_ = ln.Close()
		}
	}()
	publicURL := firstNonEmpty(o.channel.publicURL, a.getenv("PACKBOT_PUBLIC_URL"))
	if publicURL == "" {
		publicURL = defaultPublicURL(ln.Addr())
		if host, _, _ := net.SplitHostPort(ln.Addr().String()); net.ParseIP(host).IsUnspecified() {
			log.WarnContext(ctx, "listening on all interfaces without PACKBOT_PUBLIC_URL: wallets are told "+publicURL+
				", which only this machine can reach; set --public-url or PACKBOT_PUBLIC_URL")
		}
	}

	kind := o.channel.resolve(a)
	open, ok := channelFactories[kind]
	if !ok {
		return fmt.Errorf("unknown channel %q (--channel, PACKBOT_CHANNEL): use didcomm or vsagent", kind)
	}
	maxBody, err := o.channel.maxBodyBytes(a)
	if err != nil {
		return err
	}
	undelivered := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "packbot_didcomm_undelivered_total",
		Help: "DIDComm messages that could not be delivered to a wallet (or its mediator), by reason.",
	}, []string{"reason"})
	oc, err := open(ctx, channelDeps{app: a, pack: p, records: st, storeKind: scfg.kind, dataDir: o.store.dir(a), publicURL: publicURL,
		maxBody: maxBody, undelivered: func(reason string) { undelivered.WithLabelValues(reason).Inc() }})
	if err != nil {
		return err
	}
	defer func() {
		if err := oc.close(); err != nil {
			log.ErrorContext(ctx, "close channel", slog.Any("err", err))
		}
	}()

	mux, reg := newHTTPHandler(st, p, log, undelivered)
	if m, ok := oc.ch.(channel.HTTPMounter); ok {
		m.Mount(mux)
	}
	notices := &notifier{log: log}
	model, err := newModel(ctx, a, p)
	if err != nil {
		return err
	}
	pool, oauthManager, err := openMCP(ctx, a, p, st, kr, publicURL, mux, notices, model)
	if err != nil {
		return err
	}
	defer pool.Close()
	b, appr, err := newBot(ctx, a, p, st, kr, pool, oauthManager, oc.ch, notices, model)
	if err != nil {
		return err
	}
	notices.set(b)
	registerBotMetrics(reg, b.Stats())
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	// The channel and the conversation run until ctx is done; they start before the server, so
	// that no inbound message or webhook arrives before the channel runs.
	runCtx, stopRun := context.WithCancel(ctx)
	poolDone := make(chan struct{})
	poolCtx, stopPool := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPool()
	go func() { defer close(poolDone); _ = pool.Run(poolCtx) }()
	botCtx, stopBot := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBot()
	botDone := make(chan struct{})
	go func() { defer close(botDone); _ = b.Run(botCtx) }()
	apprDone := make(chan struct{})
	go func() { defer close(apprDone); _ = appr.Run(botCtx) }()
	chErr := make(chan error, 1)
	go func() { chErr <- oc.ch.Run(runCtx, b) }()

	errc := make(chan error, 1)
	serving = true
	go func() { errc <- srv.Serve(ln) }()
	log.InfoContext(ctx, "packbot serving", slog.String("http", "http://"+ln.Addr().String()), slog.String("channel", kind),
		slog.String("public_url", publicURL))
	if oc.invitation != nil {
		if err := printInvitation(ctx, a, oc.invitation); err != nil {
			log.ErrorContext(ctx, "invitation", slog.Any("err", err))
		}
	}

	var runErr error
	channelReturned := false
	select {
	case err := <-errc:
		runErr = fmt.Errorf("http server: %w", err)
	case err := <-chErr:
		// Run also returns when ctx ends (its context derives from it): only an early return,
		// or an error, is a failure.
		channelReturned = true
		if err == nil && ctx.Err() == nil {
			err = errors.New("returned before shutdown")
		}
		if err != nil {
			runErr = fmt.Errorf("channel %s stopped: %w", kind, err)
		}
	case <-ctx.Done():
	}
	log.InfoContext(ctx, "shutting down")
	stopRun()
	if !channelReturned {
		if err := <-chErr; err != nil && runErr == nil {
			runErr = fmt.Errorf("channel %s: %w", kind, err)
		}
	}
	// The channel has stopped delivering: let the bot finish what it queued, then stop the pool.
	stopBot()
	<-botDone
	<-apprDone
	stopPool()
	<-poolDone
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && runErr == nil {
		runErr = fmt.Errorf("http shutdown: %w", err)
	}
	if runErr == nil {
		log.InfoContext(ctx, "stopped")
	}
	return runErr
}

// defaultPublicURL is http:// and the listen address, with an unspecified host (0.0.0.0, ::)
// replaced by 127.0.0.1.
func defaultPublicURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// printInvitation prints the channel's invitation as a URL and a terminal QR code on stdout.
// The QR code holds the short form, <public URL>/invitation, which wallets fetch the
// invitation from (RFC 0434 short URL): it fits an 80-column terminal, where the whole
// invitation would not.
func printInvitation(ctx context.Context, a *app, invitation func(context.Context) (string, error)) error {
	u, err := invitation(ctx)
	if err != nil {
		return err
	}
	short, _, _ := strings.Cut(u, "?")
	fmt.Fprintf(a.stdout, "\nConnect a wallet with this invitation (or run: packbot wallet --invitation '%s'):\n\n%s\n\n", u, u)
	fmt.Fprintf(a.stdout, "Or scan this QR code with a wallet app (it opens %s; as an image: %s?format=png):\n\n", short, short)
	return didcomm.WriteQR(a.stdout, short)
}

// newHTTPHandler serves the operational endpoints; the wallet channel (the DIDComm inbound
// endpoint, the VS Agent webhooks) and later OAuth callbacks mount on the same mux.
func newHTTPHandler(st store.Store, p *packs.Pack, log *slog.Logger, metrics ...prometheus.Collector) (*http.ServeMux, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics...)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "packbot_build_info",
			Help:        "Always 1; labels give the packbot version and the loaded pack.",
			ConstLabels: prometheus.Labels{"version": version(), "pack": p.Metadata.ID},
		}, func() float64 { return 1 }),
	)
	ready := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "packbot_readyz_checks_total", Help: "Readiness checks by result.",
	}, []string{"result"})
	reg.MustRegister(ready)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := st.Ping(ctx); err != nil {
			ready.WithLabelValues("not_ready").Inc()
			log.WarnContext(ctx, "not ready", slog.Any("err", err))
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: store unreachable or migrations not applied")
			return
		}
		ready.WithLabelValues("ready").Inc()
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux, reg
}

// registerBotMetrics exposes the event pipeline's counters.
func registerBotMetrics(reg *prometheus.Registry, s *bot.Stats) {
	counters := []struct {
		name, help string
		v          *atomic.Int64
	}{
		{"packbot_events_accepted_total", "Inbound events committed to the inbox (then acknowledged).", &s.Accepted},
		{"packbot_events_duplicate_total", "Inbound events recognised as redeliveries (acknowledged, not stored again).", &s.Duplicates},
		{"packbot_events_refused_total", "Inbound events not accepted (the store was unreachable): not acknowledged.", &s.Refused},
		{"packbot_events_completed_total", "Events handled and committed with their effects.", &s.Completed},
		{"packbot_events_retries_total", "Event handlings put off because the store was unreachable.", &s.Retries},
		{"packbot_events_failures_total", "Event handlings that failed (a panic, an error) and will be retried.", &s.Failures},
		{"packbot_events_parked_total", "Events parked after too many failures (packbot events parked).", &s.Parked},
		{"packbot_connection_leases_taken_total", "Connection leases this replica took.", &s.Takeovers},
	}
	for _, c := range counters {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help}, func() float64 { return float64(c.v.Load()) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "packbot_connection_workers",
		Help: "Connections this replica is handling now."}, func() float64 { return float64(s.Workers.Load()) }))
}

// checkKeyring returns the keyring of MCP_CONFIG_ENCRYPTION_KEY, or says at start why per-user
// MCP configuration is unavailable (a warning when the pack has user-controlled servers, a note
// otherwise) and returns nil.
func checkKeyring(ctx context.Context, a *app, p *packs.Pack) *secret.Keyring {
	kr, err := secret.KeyringFromEnv(a.env)
	if err == nil {
		return kr
	}
	needed := false
	for i := range p.MCP.Servers {
		needed = needed || p.MCP.Servers[i].UserControlled()
	}
	level := slog.LevelInfo
	if needed {
		level = slog.LevelWarn
	}
	msg := "user-controlled MCP configuration is unavailable"
	if errors.Is(err, secret.ErrNoKey) {
		a.logger.Log(ctx, level, msg, slog.String("reason", secret.EnvKey+" is not set"), slog.String("fix", "packbot keys gen"))
		return nil
	}
	a.logger.Log(ctx, max(level, slog.LevelWarn), msg, slog.Any("err", err))
	return nil
}

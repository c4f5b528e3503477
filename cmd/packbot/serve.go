package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

type serveOptions struct {
	pack  string
	http  string
	store storeOptions
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
	log.InfoContext(ctx, "agent pack loaded", slog.String("source", p.Source), slog.String("id", p.Metadata.ID),
		slog.Int("mcp_servers", len(p.MCP.Servers)))

	st, _, err := o.store.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.ErrorContext(ctx, "close store", slog.Any("err", err))
		}
	}()

	checkKeyring(ctx, a, p)

	addr := firstNonEmpty(o.http, a.getenv("PACKBOT_HTTP_ADDR"), "127.0.0.1:8080")
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (set --http or PACKBOT_HTTP_ADDR): %w", addr, err)
	}
	srv := &http.Server{
		Handler:           newHTTPHandler(st, p, log),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.InfoContext(ctx, "packbot serving", slog.String("http", "http://"+ln.Addr().String()))

	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.InfoContext(ctx, "shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	log.InfoContext(ctx, "stopped")
	return nil
}

// newHTTPHandler serves the operational endpoints. Later parts of the bot (the DIDComm inbound
// endpoint, the VS Agent webhooks, OAuth callbacks) mount on the same mux.
func newHTTPHandler(st store.Store, p *packs.Pack, log *slog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
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
	return mux
}

// checkKeyring says at start when per-user MCP configuration is unavailable: a warning when the
// pack has user-controlled servers, a note otherwise.
func checkKeyring(ctx context.Context, a *app, p *packs.Pack) {
	_, err := secret.KeyringFromEnv(a.env)
	if err == nil {
		return
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
		return
	}
	a.logger.Log(ctx, max(level, slog.LevelWarn), msg, slog.Any("err", err))
}

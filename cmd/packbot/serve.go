package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/audit"
	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rollout"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/telemetry"
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
	file, data, p, err := a.readPack(o.pack, a.stderr)
	if err != nil {
		return err
	}
	for _, w := range p.Warnings {
		a.logger.WarnContext(ctx, "agent pack", slog.String("problem", w.String()))
	}
	kind := o.channel.resolve(a)
	if problem := channelProblem(p, kind); problem != "" {
		return errors.New(problem)
	}
	open, ok := channelFactories[kind]
	if !ok {
		return fmt.Errorf("unknown channel %q (--channel, PACKBOT_CHANNEL): use didcomm or vsagent", kind)
	}
	maxBody, err := o.channel.maxBodyBytes(a)
	if err != nil {
		return err
	}
	hookSecret, err := webhookSecret(a)
	if err != nil {
		return err
	}
	hooksOpen, err := webhookOpen(a)
	if err != nil {
		return err
	}
	packWatch, err := durationEnv(a, envPackWatch, 2*time.Second)
	if err != nil {
		return err
	}
	if hookSecret != "" && kind != "vsagent" {
		a.logger.WarnContext(ctx, envWebhookSecret+" is ignored: the "+kind+" channel receives no webhooks")
	}
	a.logger.InfoContext(ctx, "agent pack loaded", slog.String("source", p.Source), slog.String("id", p.Metadata.ID),
		slog.Int("mcp_servers", len(p.MCP.Servers)))
	eps, err := planEndpoints(ctx, a, o.http, kind)
	if err != nil {
		return err
	}
	s := &services{app: a, opts: o, pack: p, file: file, fileData: data, kind: kind, openChannel: open, maxBody: maxBody, secret: hookSecret,
		eps: eps, packWatch: packWatch, sampler: &rollout.SamplerSwitch{}}
	if kind == "vsagent" {
		s.eps.webhooks.check = webhookGuard(hookSecret, hooksOpen)
	}
	lc := &lifecycle{log: a.logger, parts: s.components()}
	if err := lc.run(ctx, s.started); err != nil {
		return err
	}
	a.logger.InfoContext(ctx, "stopped")
	return nil
}

// services are the parts serve runs, filled in as the lifecycle provisions them.
type services struct {
	app         *app
	opts        serveOptions
	pack        *packs.Pack // the pack serve starts with (a swap changes the parts, not this)
	kind        string
	openChannel channelFactory
	maxBody     int64
	secret      string // PACKBOT_WEBHOOK_SECRET
	eps         endpoints
	// file is the pack file serve was started with (fileData its content at start); replica
	// is this serve in the rollout of packs (packswap.go).
	file      rollout.File
	fileData  []byte
	replica   *rollout.Replica
	packWatch time.Duration // PACKBOT_PACK_WATCH
	sampler   *rollout.SamplerSwitch

	st        store.Store
	scfg      storeConfig
	kr        *secret.Keyring
	publicURL string
	ch        channel.Channel
	bot       *bot.Bot
	model     *agent.Model
	pool      *mcp.Pool
	oauth     *oauth.Manager
	approvals *approvals.Service
}

// components are serve's parts in dependency order. The channel and the conversation run
// before the servers, so that no inbound message or webhook arrives before the channel runs;
// they stop in reverse: the servers, then the channel's deliveries, then the bot (it lets what
// it queued finish), and only then the MCP pool its events use. Each listener (public, and
// webhooks and admin when they have addresses of their own) is a part, and so is its server.
func (s *services) components() []component {
	parts := []component{
		{name: "store", provision: s.openStore, stop: func(context.Context) error { return s.st.Close() }},
		// the audit's sealer and checkpoints stop after everything that writes the audit: their
		// last seal and checkpoint take all
		{name: "audit sealer", run: func(ctx context.Context) error {
			return audit.NewSealer(s.st, &audit.SealerOptions{Logger: s.app.logger.With("component", "audit")}).Run(ctx)
		}},
		s.auditCheckpoints(),
		{name: "telemetry", provision: s.openTelemetry, stop: s.closeTelemetry},
		{name: "public listener", provision: s.listen, stop: s.eps.public.close},
	}
	for _, e := range s.eps.all[1:] {
		parts = append(parts, component{name: e.name + " listener", provision: e.listen, stop: e.close})
	}
	parts = append(parts, []component{
		{name: "channel", provision: s.openWalletChannel, stop: func(context.Context) error { return s.ch.Close() }},
		{name: "mcp pool", provision: s.openMCP, run: func(ctx context.Context) error { return s.pool.Run(ctx) },
			stop: func(context.Context) error { s.pool.Close(); return nil }},
		{name: "bot", provision: s.provisionBot, run: func(ctx context.Context) error { return s.bot.Run(ctx) }},
		{name: "approvals sweeper", run: func(ctx context.Context) error { return s.approvals.Run(ctx, s.bot.RefreshMenus) }},
		{name: "pack watcher", run: s.watchPack},
		{name: "channel " + s.kind, run: func(ctx context.Context) error { return s.ch.Run(ctx, s.bot) }},
	}...)
	for _, e := range s.eps.all {
		name := "http server"
		if e != s.eps.public {
			name = e.name + " http server"
		}
		parts = append(parts, component{name: name, provision: e.newServer, run: e.serve})
	}
	return parts
}

// auditKey is the key of the audit records the store seals after their commit, derived from
// PACKBOT_DIDCOMM_KEY; nil (records chained as they are written) without that variable: the
// data folder's key file is each host's own, and a replica would set aside as forged the
// records of replicas holding another key.
func (s *services) auditKey() ([]byte, error) {
	if s.app.getenv(EnvDIDCommKey) == "" {
		return nil, nil
	}
	master, _, err := didcommKey(s.app, s.opts.store.dir(s.app), "")
	if err != nil {
		return nil, err
	}
	return audit.MACKeyFromMaster(master)
}

func (s *services) openStore(ctx context.Context) error {
	auditKey, err := s.auditKey()
	if err != nil {
		return err
	}
	if s.st, s.scfg, err = s.opts.store.openWith(ctx, s.app, auditKey); err != nil {
		return err
	}
	s.replica = s.newReplica()
	p, err := s.replica.Adopt(ctx, s.fileData)
	if err != nil {
		_ = s.st.Close()
		return err
	}
	if p != nil {
		s.pack = p
	}
	s.fileData = nil
	if s.kr, err = checkKeyring(ctx, s.app, s.pack); err != nil {
		_ = s.st.Close()
		return err
	}
	return nil
}

// listen opens the public listener (its address is the default public URL) and builds the muxes
// the channel, the OAuth callback and the operational endpoints mount on.
func (s *services) listen(ctx context.Context) error {
	a := s.app
	pub := s.eps.public
	if err := pub.listen(ctx); err != nil {
		return err
	}
	s.publicURL = firstNonEmpty(s.opts.channel.publicURL, a.getenv("PACKBOT_PUBLIC_URL"))
	if err := checkPublicURL(s.publicURL); err != nil {
		_ = pub.ln.Close()
		return err
	}
	if s.publicURL == "" {
		s.publicURL = defaultPublicURL(pub.ln.Addr())
		if host, _, _ := net.SplitHostPort(pub.ln.Addr().String()); net.ParseIP(host).IsUnspecified() {
			a.logger.WarnContext(ctx, "listening on all interfaces without PACKBOT_PUBLIC_URL: wallets are told "+s.publicURL+
				", which only this machine can reach; set --public-url or PACKBOT_PUBLIC_URL")
		}
	}
	for _, e := range s.eps.all {
		e.mux = http.NewServeMux()
	}
	s.eps.admin.mux = newHTTPHandler(s.st, a.logger, a.tel, s.replica.Detail)
	return nil
}

// openWalletChannel opens the wallet channel, mounts its endpoints and builds the bot that
// handles its events (its flows come once the MCP pool is there: see provisionBot).
func (s *services) openWalletChannel(ctx context.Context) error {
	a := s.app
	ch, err := s.openChannel(ctx, channelDeps{app: a, pack: s.pack, records: s.st, storeKind: s.scfg.kind, dataDir: s.opts.store.dir(a),
		publicURL: s.publicURL, maxBody: s.maxBody, webhookSecret: s.secret, undelivered: a.tel.Undelivered})
	if err != nil {
		return err
	}
	s.ch = ch
	if m, ok := ch.(channel.HTTPMounter); ok {
		mux := s.eps.public.mux // the DIDComm endpoint and invitation
		if s.kind == "vsagent" {
			mux = s.eps.webhooks.mux
		}
		m.Mount(mux)
	}
	s.bot, err = bot.New(bot.Config{Channel: ch, Store: s.st, Logger: a.logger, Keyring: s.kr,
		Observer: a.tel.Bot(s.kind), Notified: s.replica.Notified})
	if err != nil {
		return errors.Join(err, ch.Close()) // a failed provision is not stopped
	}
	if err := a.tel.BotStats(s.bot.Stats()); err != nil {
		return errors.Join(err, ch.Close())
	}
	return nil
}

// openMCP builds the language model (when one is configured) and the MCP pool, whose notices go
// to the bot.
func (s *services) openMCP(ctx context.Context) error {
	var err error
	if s.model, err = newModel(ctx, s.app, s.pack); err != nil {
		return err
	}
	s.sampler.SetSampler(samplerOf(s.model))
	s.pool, s.oauth, err = openMCP(ctx, s.app, s.pack, s.st, s.kr, s.publicURL, s.eps.public.mux, s.bot, s.sampler)
	return err
}

// provisionBot gives the bot its flows, and builds the approvals service they use.
func (s *services) provisionBot(context.Context) error {
	signer, err := receiptSigner(s.app, s.opts.store.dir(s.app), s.scfg.kind)
	if err != nil {
		return err
	}
	appr, err := newApprovals(s.app, s.pack, s.st, s.pool, s.bot, signer)
	if err != nil {
		return err
	}
	s.app.logger.Info("receipts of approved calls are signed by this bot", slog.String("issuer", signer.Issuer()))
	engine, err := newEngine(s.app, s.pack, s.st, s.kr, s.pool, s.oauth, s.bot, s.model, appr)
	if err != nil {
		return err
	}
	s.bot.SetFlows(engine, s.replica.Running().Version)
	s.approvals = appr
	return nil
}

// started says where serve listens, and prints the channel's invitation when it has one.
func (s *services) started(ctx context.Context) {
	log := s.app.logger
	attrs := []any{slog.String("http", s.eps.public.url())}
	for _, e := range s.eps.all[1:] {
		attrs = append(attrs, slog.String(e.name, e.url()))
	}
	log.InfoContext(ctx, "packbot serving", append(attrs, slog.String("channel", s.kind), slog.String("public_url", s.publicURL))...)
	if s.kind == "vsagent" {
		warnOpenWebhooks(ctx, log, s.eps.webhooks, s.secret)
	}
	if inv, ok := s.ch.(channel.Inviter); ok {
		if err := printInvitation(ctx, s.app, inv); err != nil {
			log.ErrorContext(ctx, "invitation", slog.Any("err", err))
		}
	}
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

// printInvitation prints the channel's invitation as a URL and, when it has a short form, a
// terminal QR code of that (the whole invitation would not fit an 80-column terminal) on stdout.
func printInvitation(ctx context.Context, a *app, ch channel.Inviter) error {
	inv, err := ch.ConnectionInvitation(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nConnect a wallet with this invitation (or run: packbot wallet --invitation '%s'):\n\n%s\n\n", inv.URL, inv.URL)
	if inv.ShortURL == "" {
		return nil
	}
	fmt.Fprintf(a.stdout, "Or scan this QR code with a wallet app (it opens %s; as an image: %s?format=png):\n\n", inv.ShortURL, inv.ShortURL)
	return didcomm.WriteQR(a.stdout, inv.ShortURL)
}

// newHTTPHandler serves the operational endpoints (the admin listener's routes); on the single
// default listener the wallet channel (the DIDComm inbound endpoint, the VS Agent webhooks) and
// OAuth callbacks mount on the same mux.
func newHTTPHandler(st store.Store, log *slog.Logger, tel *telemetry.Telemetry, detail func() string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		err := st.Ping(ctx)
		tel.Ready(err == nil)
		if err != nil {
			log.WarnContext(ctx, "not ready", slog.Any("err", err))
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: store unreachable or migrations not applied")
			return
		}
		fmt.Fprintln(w, "ready")
		if detail != nil {
			fmt.Fprintln(w, detail())
		}
	})
	mux.Handle("GET /metrics", tel.Handler())
	return mux
}

// checkKeyring returns the keyring of MCP_CONFIG_ENCRYPTION_KEY. Without the key it says at
// start that per-user MCP configuration is unavailable (a warning when the pack has
// user-controlled servers, a note otherwise) and returns nil; a malformed key (current or old)
// is an error naming the variable and the fix: serve does not start with it.
func checkKeyring(ctx context.Context, a *app, p *packs.Pack) (*secret.Keyring, error) {
	kr, err := secret.KeyringFromEnv(a.env)
	switch {
	case err == nil:
		return kr, nil
	case !errors.Is(err, secret.ErrNoKey):
		return nil, fmt.Errorf("%w (fix: 'packbot keys gen' prints a new key; or unset %s to turn per-user MCP configuration off)",
			err, secret.EnvKey)
	}
	level := slog.LevelInfo
	for i := range p.MCP.Servers {
		if p.MCP.Servers[i].UserControlled() {
			level = slog.LevelWarn
		}
	}
	a.logger.Log(ctx, level, "user-controlled MCP configuration is unavailable",
		slog.String("reason", secret.EnvKey+" is not set"), slog.String("fix", "packbot keys gen"))
	return nil, nil
}

// checkPublicURL refuses a public URL wallets and browsers could not use ("" is no URL: the
// listener's address is used).
func checkPublicURL(v string) error {
	if v == "" {
		return nil
	}
	const fix = "(fix: the URL where wallets reach this server, such as https://bot.example.com)"
	u, err := url.Parse(v)
	if err != nil {
		// Not quoted: a malformed value may still hold a credential.
		return fmt.Errorf("PACKBOT_PUBLIC_URL (--public-url): not a URL %s", fix)
	}
	var problem string
	switch {
	case u.User != nil:
		problem = "holds user info, which invitations would publish"
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "":
		problem = "not an absolute http(s) URL without query or fragment"
	default:
		return nil
	}
	return fmt.Errorf("PACKBOT_PUBLIC_URL (--public-url) %q: %s %s", u.Redacted(), problem, fix)
}

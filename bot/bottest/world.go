package bottest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/telemetry"
)

// Key is the MCP_CONFIG_ENCRYPTION_KEY of the worlds.
const Key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// Options describe a world. Pack, Store and Channel are required.
type Options struct {
	// Pack is the agent pack's YAML; Env its ${…} placeholders.
	Pack string
	Env  map[string]string
	// Store is the bot's store (the caller picks the backend and closes it).
	Store store.Store
	// Channel runs with the bot; BotChannel, when set, is what the bot sends through (a
	// wrapper of Channel that watches or changes it).
	Channel, BotChannel channel.Channel
	// LLMURL is the scripted model's base URL ("" : no language model).
	LLMURL string
	Logger *slog.Logger
	// Model, when set, wraps the language model the flows use.
	Model func(flows.Model) flows.Model
	// Sampler lets the MCP servers sample the language model.
	Sampler bool
	// Authorizer and OAuth sign users in to OAuth MCP servers (mcp/oauth's Manager).
	Authorizer mcp.Authorizer
	OAuth      flows.OAuthStarter
	// ElicitTimeout is the flows' (0: their default).
	ElicitTimeout time.Duration
	// Telemetry, when set, observes the model, the pool, the approvals and the bot.
	Telemetry *telemetry.Telemetry
	// OnResourceUpdated hears each resource an MCP server reported updated (mcp.Config's).
	OnResourceUpdated func(server, identity, uri string)
	// Receipts signs the receipts of approved executions (approvals.Config's).
	Receipts approvals.ReceiptSigner
	// Bot holds the bot's settings (MaxAttempts, Idle…): Channel, Store, Flows, Logger and
	// Keyring are the world's.
	Bot bot.Config
}

// World is a bot and what it talks to.
type World struct {
	Pack      *packs.Pack
	Catalog   *i18n.Catalog
	Keyring   *secret.Keyring
	Pool      *mcp.Pool
	Approvals *approvals.Service
	// Deps are the flows engine's (a test builds another engine from them).
	Deps flows.Deps
	Bot  *bot.Bot
	// Offset moves the approvals' clock (expiry).
	Offset atomic.Int64

	ch  channel.Channel
	env map[string]string
	// stop stops the bot, the pool and the channel; safe to call more than once.
	stop func()
}

// New builds the world of o; Run starts it.
func New(t testing.TB, o Options) *World {
	t.Helper()
	w := &World{ch: o.Channel, env: o.Env, stop: func() {}}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := t.TempDir()
	fatal(t, "write the pack", os.WriteFile(filepath.Join(dir, "agent-pack.yaml"), []byte(o.Pack), 0o600))
	var err error
	w.Pack, err = packs.Load(packs.Options{Path: dir, Env: packs.MapEnv(o.Env)})
	fatal(t, "load the pack", err)
	w.Catalog, err = i18n.New(w.Pack)
	fatal(t, "build the catalog", err)
	key, err := secret.ParseKey(Key)
	fatal(t, "parse the key", err)
	w.Keyring, err = secret.NewKeyring(key)
	fatal(t, "build the keyring", err)
	model := w.model(t, o, log)
	pcfg := mcp.Config{Servers: w.Pack.MCP.Servers, Credentials: o.Store, Keyring: w.Keyring, Logger: log, Authorizer: o.Authorizer,
		OnResourceUpdated: o.OnResourceUpdated}
	if o.Sampler && model != nil {
		pcfg.Sampler = flows.NewSampler(model)
	}
	if o.Telemetry != nil {
		pcfg.Observer = o.Telemetry
	}
	w.Pool, err = mcp.New(pcfg)
	fatal(t, "open the MCP pool", err)
	acfg := approvals.Config{Store: o.Store, Pack: w.Pack, MCP: w.Pool, Logger: log, Receipts: o.Receipts,
		Now:  func() time.Time { return time.Now().Add(time.Duration(w.Offset.Load())) },
		Kick: func(id string) { w.Bot.Kick(id) }}
	if o.Telemetry != nil {
		acfg.Observer = o.Telemetry
	}
	w.Approvals, err = approvals.New(acfg)
	fatal(t, "open the approvals", err)
	w.Deps = flows.Deps{Pack: w.Pack, Catalog: w.Catalog, Store: o.Store, MCP: w.Pool, Keyring: w.Keyring,
		Channel: channel.CapabilitiesOf(o.Channel), Logger: log, Approvals: w.Approvals, OAuth: o.OAuth, ElicitTimeout: o.ElicitTimeout}
	if model != nil {
		w.Deps.Model = model
	}
	if o.Model != nil {
		w.Deps.Model = o.Model(w.Deps.Model)
	}
	engine, err := flows.New(w.Deps)
	fatal(t, "build the flows", err)
	cfg := o.Bot
	cfg.Channel, cfg.Store, cfg.Flows, cfg.Logger, cfg.Keyring = o.Channel, o.Store, engine, log, w.Keyring
	if o.BotChannel != nil {
		cfg.Channel = o.BotChannel
	}
	if o.Telemetry != nil {
		cfg.Observer = o.Telemetry.Bot(o.Channel.Name())
	}
	w.Bot, err = bot.New(cfg)
	fatal(t, "build the bot", err)
	return w
}

// model is the scripted language model on the real provider client (nil without LLMURL).
func (w *World) model(t testing.TB, o Options, log *slog.Logger) *agent.Model {
	if o.LLMURL == "" {
		return nil
	}
	cfg := agent.Config{Provider: agent.ProviderOpenAI, Model: "scripted", BaseURL: o.LLMURL, Logger: log}
	if o.Telemetry != nil {
		cfg.Observer = o.Telemetry
	}
	m, err := agent.New(cfg)
	fatal(t, "open the scripted model", err)
	return m
}

// Run runs the pool, the bot and the channel until the test ends or Stop. Stop stops the bot
// before the channel's wallets close (a test's cleanups run in reverse order of registration:
// wallets connected later close first), so that it does not drain its outbox to closed wallets.
func (w *World) Run(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Pool.Run(ctx) })
	wg.Go(func() { _ = w.Bot.Run(ctx) })
	wg.Go(func() { _ = w.ch.Run(ctx, w.Bot) })
	w.stop = sync.OnceFunc(func() { cancel(); wg.Wait(); w.Pool.Close() })
	t.Cleanup(w.stop)
}

// Stop stops what Run started; safe to call more than once.
func (w *World) Stop() { w.stop() }

// WaitTools waits until the pool knows the tools of server.
func (w *World) WaitTools(t testing.TB, server string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		cat, changed := w.Pool.Catalog()
		if len(cat.Server(server)) > 0 {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the pool never listed the tools of %s", server)
		}
	}
}

// Engine builds a flows engine for another pack (src, with the world's placeholders) over the
// world's pool, store and approvals.
func (w *World) Engine(t testing.TB, src string) *flows.Engine {
	t.Helper()
	p, err := packs.Parse("swapped.yaml", []byte(src), packs.MapEnv(w.env))
	fatal(t, "parse the pack", err)
	d := w.Deps
	d.Pack = p
	d.Catalog, err = i18n.New(p)
	fatal(t, "build the catalog", err)
	e, err := flows.New(d)
	fatal(t, "build the flows", err)
	return e
}

func fatal(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

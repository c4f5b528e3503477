package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// newApprovals builds the approvals service of pack p, whose notices go to bot b (its sweeper's
// badge changes too: see serve), and whose receipts receipts signs.
func newApprovals(a *app, p *packs.Pack, st store.Store, pool *mcp.Pool, b *bot.Bot, receipts approvals.ReceiptSigner) (*approvals.Service, error) {
	sweepEvery, err := durationEnv(a, "PACKBOT_APPROVAL_SWEEP", 15*time.Second)
	if err != nil {
		return nil, err
	}
	acfg := approvals.Config{Store: st, Pack: p, MCP: pool, Logger: a.logger, Kick: b.Kick, SweepEvery: sweepEvery,
		Receipts: receipts}
	if a.tel != nil {
		acfg.Observer = a.tel
	}
	return approvals.New(acfg)
}

// newEngine builds the conversation's logic of pack p for bot b: the i18n catalog and the flows
// engine over the pool, the approvals service and the model.
func newEngine(a *app, p *packs.Pack, st store.Store, kr *secret.Keyring, pool *mcp.Pool, om *oauth.Manager, b *bot.Bot,
	model *agent.Model, appr *approvals.Service) (*flows.Engine, error) {
	cat, err := i18n.New(p)
	if err != nil {
		return nil, err
	}
	elicitTimeout, err := durationEnv(a, "PACKBOT_ELICITATION_TIMEOUT", flows.DefaultElicitTimeout)
	if err != nil {
		return nil, err
	}
	d := flows.Deps{Pack: p, Catalog: cat, Store: st, MCP: pool, Model: model, Keyring: kr, Channel: b.Capabilities(), Logger: a.logger,
		Approvals: appr, ElicitTimeout: elicitTimeout}
	if om != nil {
		d.OAuth = om
	}
	return flows.New(d)
}

// newModel builds the pack's LLM client; nil (and a warning) when none is configured.
func newModel(ctx context.Context, a *app, p *packs.Pack) (*agent.Model, error) {
	log := a.logger
	cfg, ok, err := agent.FromPack(p.LLM, a.getenv)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		log.WarnContext(ctx, "no language model configured: the bot answers commands only",
			slog.String("fix", "set OPENAI_API_KEY (or llm.baseUrl), ANTHROPIC_API_KEY or OLLAMA_ENDPOINT for the pack's llm.provider "+p.LLM.Provider))
		return nil, nil
	}
	cfg.Logger = log
	if a.tel != nil {
		cfg.Observer = a.tel
	}
	model, err := agent.New(cfg)
	if err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "language model", slog.String("provider", cfg.Provider), slog.String("model", cfg.Model))
	return model, nil
}

// durationEnv reads a duration variable (default def when unset).
func durationEnv(a *app, name string, def time.Duration) (time.Duration, error) {
	v := a.getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 15s", name, v)
	}
	return d, nil
}

package main

import (
	"context"
	"log/slog"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// newBot builds the conversation: the i18n catalog, the LLM (when one is configured), the flows
// engine and the bot's event loop on channel ch.
func newBot(ctx context.Context, a *app, p *packs.Pack, st store.Store, kr *secret.Keyring, pool *mcp.Pool, om *oauth.Manager, ch channel.Channel) (*bot.Bot, error) {
	log := a.logger
	cat, err := i18n.New(p)
	if err != nil {
		return nil, err
	}
	var model *agent.Model
	cfg, ok, err := agent.FromPack(p.LLM, a.getenv)
	switch {
	case err != nil:
		return nil, err
	case ok:
		cfg.Logger = log
		if model, err = agent.New(cfg); err != nil {
			return nil, err
		}
		log.InfoContext(ctx, "language model", slog.String("provider", cfg.Provider), slog.String("model", cfg.Model))
	default:
		log.WarnContext(ctx, "no language model configured: the bot answers commands only",
			slog.String("fix", "set OPENAI_API_KEY (or llm.baseUrl), ANTHROPIC_API_KEY or OLLAMA_ENDPOINT for the pack's llm.provider "+p.LLM.Provider))
	}
	_, canProof := ch.(channel.ProofRequester)
	d := flows.Deps{Pack: p, Catalog: cat, Store: st, MCP: pool, Model: model, Keyring: kr, CanRequestProof: canProof, Logger: log}
	if om != nil {
		d.OAuth = om
	}
	engine, err := flows.New(d)
	if err != nil {
		return nil, err
	}
	return bot.New(bot.Config{Channel: ch, Store: st, Flows: engine, Logger: log})
}

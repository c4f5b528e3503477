package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/flows"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// openMCP builds the MCP pool of the pack and, when the pack has OAuth servers and the bot can
// seal tokens, the OAuth manager whose callback mounts on mux; when the pack has
// client_credentials servers, the machine client that gets packbot's own tokens for them (it
// reads their private key files, and a key it cannot use stops serve). It does no network I/O:
// the pool connects when it runs.
func openMCP(ctx context.Context, a *app, p *packs.Pack, st store.Store, kr *secret.Keyring, publicURL string, mux *http.ServeMux, n *notifier, model *agent.Model) (*mcp.Pool, *oauth.Manager, error) {
	log := a.logger
	cfg := mcp.Config{Servers: p.MCP.Servers, Logger: log, ClientName: "packbot", ClientVersion: version(),
		OnRejected: func(identity, server string) {
			n.notify(context.WithoutCancel(ctx), identity, bot.Notice{Key: "MCP_CREDENTIAL_REJECTED", Args: []string{"server", server}})
		}}
	if model != nil {
		cfg.Sampler = flows.NewSampler(model) // only servers whose pack entry allows sampling use it
	}
	var manager *oauth.Manager
	if kr != nil {
		cfg.Credentials, cfg.Keyring = st, kr
	}
	if anyServer(p, (*packs.Server).OAuth) {
		if kr == nil {
			log.WarnContext(ctx, "OAuth sign-in to MCP servers is unavailable: tokens cannot be sealed without "+secret.EnvKey,
				slog.String("fix", "packbot keys gen"))
		} else {
			m, err := oauth.New(oauth.Config{
				Credentials: st, Records: st, Keyring: kr, Servers: p.MCP.Servers, Logger: log,
				CallbackURL:       strings.TrimSuffix(publicURL, "/") + oauth.DefaultCallbackPath,
				ClientMetadataURL: strings.TrimSuffix(publicURL, "/") + oauth.DefaultClientMetadataPath,
				OnAuthorized: func(ctx context.Context, identity, server string) {
					n.notify(ctx, identity, bot.Notice{Key: "MCP_CONFIG_OAUTH_DONE", Args: []string{"server", server}})
				},
				OnFailed: func(ctx context.Context, identity, server string, _ error) {
					n.notify(ctx, identity, bot.Notice{Key: "MCP_CONFIG_OAUTH_FAILED", Args: []string{"server", server}})
				},
			})
			if err != nil {
				log.WarnContext(ctx, "OAuth sign-in to MCP servers is unavailable", slog.Any("err", err),
					slog.String("fix", "set PACKBOT_PUBLIC_URL to the bot's https URL"))
			} else {
				cfg.Authorizer, manager = m, m
				mux.Handle("GET "+oauth.DefaultCallbackPath, m.CallbackHandler())
				mux.Handle("GET "+oauth.DefaultClientMetadataPath, m.ClientMetadataHandler())
			}
		}
	}
	if anyServer(p, (*packs.Server).ClientCredentials) {
		m, err := oauth.NewMachine(oauth.MachineConfig{Servers: p.MCP.Servers, Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("%w (fix the server's authentication in %s)", err, p.Source)
		}
		cfg.Machine = m
	}
	pool, err := mcp.New(cfg)
	return pool, manager, err
}

// notifier forwards notices from the MCP pool and the OAuth callback, which are built before
// the bot, to the bot's outbox once it exists.
type notifier struct {
	log *slog.Logger
	mu  sync.Mutex
	b   *bot.Bot
}

func (n *notifier) set(b *bot.Bot) {
	n.mu.Lock()
	n.b = b
	n.mu.Unlock()
}

func (n *notifier) notify(ctx context.Context, identity string, notice bot.Notice) {
	n.mu.Lock()
	b := n.b
	n.mu.Unlock()
	if b == nil {
		return
	}
	if err := b.Notify(ctx, identity, notice); err != nil {
		n.log.WarnContext(ctx, "notice not queued", slog.String("key", notice.Key), slog.Any("err", err))
	}
}

// anyServer reports whether an enabled server of the pack is one that is.
func anyServer(p *packs.Pack, is func(*packs.Server) bool) bool {
	for i := range p.MCP.Servers {
		if p.MCP.Servers[i].Enabled && is(&p.MCP.Servers[i]) {
			return true
		}
	}
	return false
}

// kick asks the bot to deliver identity's outbox now.
func (n *notifier) kick(identity string) {
	n.mu.Lock()
	b := n.b
	n.mu.Unlock()
	if b != nil {
		b.Kick(identity)
	}
}

// badgesChanged re-sends the menus of identities.
func (n *notifier) badgesChanged(ctx context.Context, identities []string) {
	n.mu.Lock()
	b := n.b
	n.mu.Unlock()
	if b != nil {
		b.RefreshMenus(ctx, identities)
	}
}

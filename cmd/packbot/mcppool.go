package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// openMCP builds the MCP pool of the pack and, when the pack has OAuth servers and the bot can
// seal tokens, the OAuth manager whose callback mounts on mux. It does no I/O: the pool connects
// when it runs.
func openMCP(ctx context.Context, a *app, p *packs.Pack, st store.Store, kr *secret.Keyring, publicURL string, mux *http.ServeMux) (*mcp.Pool, error) {
	log := a.logger
	cfg := mcp.Config{Servers: p.MCP.Servers, Logger: log, ClientName: "packbot", ClientVersion: version()}
	if kr != nil {
		cfg.Credentials, cfg.Keyring = st, kr
	}
	if hasOAuth(p) {
		if kr == nil {
			log.WarnContext(ctx, "OAuth sign-in to MCP servers is unavailable: tokens cannot be sealed without "+secret.EnvKey,
				slog.String("fix", "packbot keys gen"))
		} else {
			m, err := oauth.New(oauth.Config{
				Credentials: st, Records: st, Keyring: kr, Servers: p.MCP.Servers, Logger: log,
				CallbackURL: strings.TrimSuffix(publicURL, "/") + oauth.DefaultCallbackPath,
			})
			if err != nil {
				log.WarnContext(ctx, "OAuth sign-in to MCP servers is unavailable", slog.Any("err", err),
					slog.String("fix", "set PACKBOT_PUBLIC_URL to the bot's https URL"))
			} else {
				cfg.Authorizer = m
				mux.Handle("GET "+oauth.DefaultCallbackPath, m.CallbackHandler())
			}
		}
	}
	return mcp.New(cfg)
}

func hasOAuth(p *packs.Pack) bool {
	for i := range p.MCP.Servers {
		if p.MCP.Servers[i].Enabled && p.MCP.Servers[i].OAuth() {
			return true
		}
	}
	return false
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/packbot/packbot/bot"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// openMCP builds the MCP pool of the pack and, when the pack has OAuth servers and the bot can
// seal tokens, the OAuth manager whose callback mounts on mux; when the pack has
// client_credentials servers, the machine client that gets packbot's own tokens for them (it
// reads their private key files, and a key it cannot use stops serve). The pool's and the
// manager's notices go to bot b (nil: nowhere). It does no network I/O: the pool connects when
// it runs.
func openMCP(ctx context.Context, a *app, p *packs.Pack, st store.Store, kr *secret.Keyring, publicURL string, mux *http.ServeMux, b *bot.Bot, sampler mcp.Sampler) (*mcp.Pool, *oauth.Manager, error) {
	log := a.logger
	cfg := mcp.Config{Servers: p.MCP.Servers, Logger: log, ClientName: "packbot", ClientVersion: version()}
	if b != nil {
		cfg.OnRejected = b.CredentialRejected
	}
	if a.tel != nil {
		cfg.Observer = a.tel
	}
	if sampler != nil {
		cfg.Sampler = sampler // only servers whose pack entry allows sampling use it
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
			ocfg := oauth.Config{
				Credentials: st, Records: st, Keyring: kr, Servers: p.MCP.Servers, Logger: log,
				CallbackURL:       strings.TrimSuffix(publicURL, "/") + oauth.DefaultCallbackPath,
				ClientMetadataURL: strings.TrimSuffix(publicURL, "/") + oauth.DefaultClientMetadataPath,
			}
			if b != nil {
				ocfg.OnAuthorized, ocfg.OnFailed = b.OAuthAuthorized, b.OAuthFailed
			}
			m, err := oauth.New(ocfg)
			if err != nil {
				log.WarnContext(ctx, "OAuth sign-in to MCP servers is unavailable", slog.Any("err", err),
					slog.String("fix", "set PACKBOT_PUBLIC_URL to the bot's https URL"))
			} else {
				cfg.Authorizer, manager = m, m
				mux.Handle("GET "+oauth.DefaultCallbackPath, m.CallbackHandler())
				mux.Handle("GET "+oauth.DefaultClientMetadataPath, m.ClientMetadataHandler())
				mux.Handle("GET "+oauth.DefaultNativeClientMetadataPath, oauth.NativeClientMetadataHandler(
					strings.TrimSuffix(publicURL, "/")+oauth.DefaultNativeClientMetadataPath, "packbot"))
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

// anyServer reports whether an enabled server of the pack is one that is.
func anyServer(p *packs.Pack, is func(*packs.Server) bool) bool {
	for i := range p.MCP.Servers {
		if p.MCP.Servers[i].Enabled && is(&p.MCP.Servers[i]) {
			return true
		}
	}
	return false
}

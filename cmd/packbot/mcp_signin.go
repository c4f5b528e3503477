package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/store/sqlstore"
)

// signInPrompt starts the line that carries the authorization URL, alone on its line on
// stderr, so that a wrapper script can pick it up.
const signInPrompt = "Open this URL to sign in: "

// signInOptions are mcp smoke's flags for an OAuth sign-in.
type signInOptions struct {
	clientID          string
	clientSecret      string
	clientMetadataURL string
	dataDir           string
	timeout           time.Duration
	callbackPort      int
}

func (o *signInOptions) bind(f *pflag.FlagSet) {
	f.StringVar(&o.clientID, "client-id", "", "OAuth: a client registered at the authorization server with redirect URI http://127.0.0.1/callback (default: the pack's clientId, else dynamic registration)")
	f.StringVar(&o.clientSecret, "client-secret", "", "OAuth: the secret of --client-id, if it has one")
	f.StringVar(&o.clientMetadataURL, "client-metadata-url", "", "OAuth: a Client ID Metadata Document describing this client (redirect URI http://127.0.0.1/callback), used as client_id where the authorization server supports them (default: the pack's clientMetadataUrl, else the one serve publishes at PACKBOT_PUBLIC_URL)")
	f.StringVar(&o.dataDir, "data-dir", "", "OAuth: keep the tokens in this folder's SQLite store, sealed under "+secret.EnvKey+", for the next run (default: forgotten at exit)")
	f.DurationVar(&o.timeout, "sign-in-timeout", oauth.DefaultLoopbackWait, "OAuth: how long to wait for the browser to come back")
	f.IntVar(&o.callbackPort, "callback-port", 0, "OAuth: port of the redirect listener on 127.0.0.1 (default: a free one)")
}

// check refuses sign-in flags that would be ignored or cannot work.
func (o *signInOptions) check(s packs.Server) error {
	if !s.OAuth() {
		for _, f := range []struct {
			name  string
			given bool
		}{{"client-id", o.clientID != ""}, {"client-secret", o.clientSecret != ""}, {"client-metadata-url", o.clientMetadataURL != ""}, {"data-dir", o.dataDir != ""},
			{"callback-port", o.callbackPort != 0}, {"sign-in-timeout", o.timeout != oauth.DefaultLoopbackWait}} {
			if f.given {
				return fmt.Errorf("--%s applies to a server with authentication.mode: oauth2, and %s has none", f.name, s.Name)
			}
		}
	}
	switch {
	case o.clientSecret != "" && o.clientID == "":
		return errors.New("--client-secret goes with --client-id")
	case o.callbackPort < 0 || o.callbackPort > 65535:
		return fmt.Errorf("--callback-port %d: want 0 (a free port) to 65535", o.callbackPort)
	case o.timeout <= 0:
		return fmt.Errorf("--sign-in-timeout %s: want a positive duration", o.timeout)
	}
	return nil
}

// smokeSignIn is mcp smoke's OAuth sign-in to one server, over a store that lasts as long as
// the user asked: the run (a temporary folder) or --data-dir.
type smokeSignIn struct {
	*oauth.Loopback
	opts  signInOptions
	close func() error
}

// openSignIn prepares the sign-in to s: the store and keyring, and the loopback. The
// authorization URL is printed on a's stderr when a browser is needed.
func openSignIn(ctx context.Context, a *app, o signInOptions, s packs.Server) (_ *smokeSignIn, err error) {
	st, kr, closeStore, err := openSignInStore(ctx, a, o.dataDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, closeStore())
		}
	}()
	if o.clientID != "" {
		auth := *s.Authentication
		auth.ClientID, auth.ClientSecret = o.clientID, o.clientSecret
		s.Authentication = &auth
	}
	l, err := oauth.NewLoopback(oauth.LoopbackConfig{
		Credentials: st, Records: st, Keyring: kr, Server: s, Logger: a.logger,
		ListenAddr:        net.JoinHostPort("127.0.0.1", strconv.Itoa(o.callbackPort)),
		Wait:              o.timeout,
		ClientName:        "packbot mcp smoke",
		ClientMetadataURL: firstNonEmpty(o.clientMetadataURL, publishedClientMetadata(ctx, a)),
		Prompt: func(_ context.Context, authURL string) error {
			_, err := fmt.Fprintln(a.stderr, signInPrompt+authURL)
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	return &smokeSignIn{Loopback: l, opts: o, close: closeStore}, nil
}

// publishedClientMetadata returns the URL of the command-line Client ID Metadata Document that
// 'packbot serve' publishes at PACKBOT_PUBLIC_URL, when it answers there with a document that
// names itself; "" otherwise (dynamic registration then).
func publishedClientMetadata(ctx context.Context, a *app) string {
	base := a.getenv("PACKBOT_PUBLIC_URL")
	if base == "" {
		return ""
	}
	u := strings.TrimSuffix(base, "/") + oauth.DefaultNativeClientMetadataPath
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.logger.DebugContext(ctx, "no client metadata document at PACKBOT_PUBLIC_URL", slog.Any("err", err))
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	var doc struct {
		ClientID string `json:"client_id"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&doc) != nil || doc.ClientID != u {
		return ""
	}
	return u
}

// openSignInStore opens the SQLite store of dataDir with the keyring of MCP_CONFIG_ENCRYPTION_KEY,
// as serve does; without dataDir, a store in a temporary folder with a random key, both gone
// when close returns.
func openSignInStore(ctx context.Context, a *app, dataDir string) (st store.Store, kr *secret.Keyring, closeStore func() error, err error) {
	if dataDir != "" {
		opts := &sqlstore.Options{Logger: a.logger.With("component", "store")}
		if kr, err = secret.KeyringFromEnv(a.env); err != nil {
			return nil, nil, nil, fmt.Errorf("--data-dir keeps the tokens sealed: %w (packbot keys gen makes one)", err)
		}
		if st, err = storeBackends["sqlite"](ctx, filepath.Join(dataDir, "packbot.db"), opts); err != nil {
			return nil, nil, nil, fmt.Errorf("open the token store in %s (--data-dir): %w", dataDir, err)
		}
		return st, kr, st.Close, nil
	}
	key, err := secret.GenerateKey(nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("make a key for the tokens: %w", err)
	}
	if kr, err = secret.NewKeyring(key); err != nil {
		return nil, nil, nil, fmt.Errorf("make a key for the tokens: %w", err)
	}
	dir, err := os.MkdirTemp("", "packbot-smoke-*")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("make a folder for the tokens: %w", err)
	}
	// Its migrations are of no interest: the store is gone at exit.
	st, err = storeBackends["sqlite"](ctx, filepath.Join(dir, "packbot.db"), &sqlstore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, nil, errors.Join(fmt.Errorf("open a store for the tokens: %w", err), os.RemoveAll(dir))
	}
	return st, kr, func() error { return errors.Join(st.Close(), os.RemoveAll(dir)) }, nil
}

// signInReason says in plain words why the sign-in failed.
func signInReason(err error, o signInOptions) string {
	var ae *oauth.AuthorizationError
	switch {
	case errors.As(err, &ae):
		return "the authorization server did not grant access (" + ae.Error() + ")"
	case errors.Is(err, oauth.ErrSignInTimeout):
		return fmt.Sprintf("nobody signed in within %s (--sign-in-timeout): open the URL above in a browser on this machine\n  %v", o.timeout, err)
	case errors.Is(err, context.Canceled):
		return "sign-in interrupted"
	}
	return "sign-in: " + err.Error()
}

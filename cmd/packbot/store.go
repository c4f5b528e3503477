package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
)

// storeOptions are the flags every command that opens the store shares.
type storeOptions struct {
	dataDir     string
	databaseURL string
}

func (o *storeOptions) bind(f *pflag.FlagSet) {
	f.StringVar(&o.dataDir, "data-dir", "", "folder for the embedded SQLite store (env PACKBOT_DATA_DIR, default ./data)")
	f.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL URL (env DATABASE_URL, or POSTGRES_HOST/PORT/USER/PASSWORD/DB_NAME); empty: SQLite")
}

// storeConfig is the chosen backend and where it lives.
type storeConfig struct {
	kind   string // a key of storeBackends
	target string // DSN or file path; may hold a password: never log it, use describe
}

// describe is the config with any password removed, for logs.
func (c storeConfig) describe() string {
	if c.kind != "postgres" {
		return c.kind + " " + c.target
	}
	if u, err := url.Parse(c.target); err == nil && u.Host != "" {
		u.User = url.User(u.User.Username())
		u.RawQuery = ""
		return "postgres " + u.String()
	}
	return "postgres (connection string)"
}

// storeBackends maps a backend name to its opener (explicit, no init registration).
var storeBackends = map[string]func(ctx context.Context, target string, opts *sqlstore.Options) (store.Store, error){
	"postgres": func(ctx context.Context, t string, o *sqlstore.Options) (store.Store, error) {
		return sqlstore.OpenPostgres(ctx, t, o)
	},
	"sqlite": func(ctx context.Context, t string, o *sqlstore.Options) (store.Store, error) {
		return sqlstore.OpenSQLite(ctx, t, o)
	},
}

// resolve picks the backend: --database-url, DATABASE_URL, the Hologram POSTGRES_* variables,
// else SQLite in --data-dir / PACKBOT_DATA_DIR / ./data.
func (o *storeOptions) resolve(a *app) storeConfig {
	if dsn := firstNonEmpty(o.databaseURL, a.getenv("DATABASE_URL")); dsn != "" {
		return storeConfig{kind: "postgres", target: dsn}
	}
	if host := a.getenv("POSTGRES_HOST"); host != "" {
		u := url.URL{
			Scheme: "postgres",
			User:   url.UserPassword(firstNonEmpty(a.getenv("POSTGRES_USER"), "postgres"), a.getenv("POSTGRES_PASSWORD")),
			Host:   net.JoinHostPort(host, firstNonEmpty(a.getenv("POSTGRES_PORT"), "5432")),
			Path:   "/" + firstNonEmpty(a.getenv("POSTGRES_DB_NAME"), "postgres"),
		}
		return storeConfig{kind: "postgres", target: u.String()}
	}
	return storeConfig{kind: "sqlite", target: filepath.Join(o.dir(a), "packbot.db")}
}

// dir is the data folder: the SQLite store and local key files live there.
func (o *storeOptions) dir(a *app) string {
	return firstNonEmpty(o.dataDir, a.getenv("PACKBOT_DATA_DIR"), "data")
}

// open opens and migrates the configured store.
func (o *storeOptions) open(ctx context.Context, a *app) (store.Store, storeConfig, error) {
	return o.openWith(ctx, a, nil)
}

// openWith opens and migrates the configured store, which writes audit records to be sealed
// after their commit when auditKey is set (serve's; see sqlstore.Options.AuditKey).
func (o *storeOptions) openWith(ctx context.Context, a *app, auditKey []byte) (store.Store, storeConfig, error) {
	cfg := o.resolve(a)
	st, err := storeBackends[cfg.kind](ctx, cfg.target, &sqlstore.Options{Logger: a.logger.With("component", "store"), AuditKey: auditKey})
	if err != nil {
		return nil, cfg, fmt.Errorf("open store (%s): %w", cfg.describe(), err)
	}
	a.logger.InfoContext(ctx, "store open", slog.String("backend", cfg.describe()))
	return st, cfg, nil
}

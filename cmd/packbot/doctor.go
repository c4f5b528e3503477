package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/packs/namecheck"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

type doctorOptions struct {
	pack    string
	store   storeOptions
	channel channelOptions
	timeout time.Duration
}

func newDoctorCmd(a *app) *cobra.Command {
	var o doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check a deployment from its environment, one line per check",
		Long: `Check what serve would use, from the same flags and environment, and print one line per
check: "ok", "warn" or "FAIL", what was checked, and for a problem the fix.

  pack     the agent pack loads and validates
  store    the store is reachable and migrated (opening it applies pending migrations, as serve does)
  keys     MCP_CONFIG_ENCRYPTION_KEY (and the old keys) parse, and open every sealed credential
  audit    the audit's last records and checkpoints verify (packbot audit verify; a problem warns)
  llm      the pack's language model answers a one-word prompt
  mcp      each enabled admin-controlled MCP server passes the smoke test (initialize, list tools)
  public   PACKBOT_PUBLIC_URL answers HTTP from this machine

Exits 1 when a check fails, 0 otherwise (warnings included).`,
		Example: `  packbot doctor
  DATABASE_URL=postgres://… MCP_CONFIG_ENCRYPTION_KEY=… packbot doctor --pack ./agent-packs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runDoctor(ctx, a, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.pack, "pack", "", "agent pack file or folder (default: as serve finds it)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "time limit of each network check")
	o.store.bind(f)
	o.channel.bind(f)
	return cmd
}

// checkResult is one line of the doctor's report.
type checkResult struct {
	level  string // "ok", "warn" or "FAIL"
	name   string
	detail string
}

// doctor collects the results of the checks it runs.
type doctor struct {
	a       *app
	timeout time.Duration
	results []checkResult
}

func (d *doctor) report(level, name, format string, args ...any) {
	r := checkResult{level: level, name: name, detail: fmt.Sprintf(format, args...)}
	d.results = append(d.results, r)
	fmt.Fprintf(d.a.stdout, "%-4s  %-7s %s\n", r.level, r.name, r.detail)
}

// bounded is ctx limited to one check's time.
func (d *doctor) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.timeout)
}

func runDoctor(ctx context.Context, a *app, o doctorOptions) error {
	d := &doctor{a: a, timeout: o.timeout}
	p, err := packs.Load(packs.Options{Path: o.pack, Env: a.env})
	if err != nil {
		d.report("FAIL", "pack", "%v (fix: 'packbot pack validate' lists every problem with its file:line)", err)
		return d.exit()
	}
	d.report("ok", "pack", "%s (%s), %d MCP server(s), %d warning(s)", p.Metadata.ID, p.Source, len(p.MCP.Servers), len(p.Warnings))

	kr, keyErr := secret.KeyringFromEnv(a.env)
	st := d.checkStore(ctx, a, o)
	d.checkKeys(ctx, st, kr, keyErr)
	d.checkAudit(ctx, st, o)
	if st != nil {
		_ = st.Close() // read-only use; a close error says nothing about the deployment
	}
	d.checkLLM(ctx, a, p)
	d.checkMCP(ctx, p)
	d.checkPublicURL(ctx, a, o)
	return d.exit()
}

// exit is the command's outcome: exit status 1 when a check failed.
func (d *doctor) exit() error {
	for _, r := range d.results {
		if r.level == "FAIL" {
			return exitError{code: 1}
		}
	}
	return nil
}

func (d *doctor) checkStore(ctx context.Context, a *app, o doctorOptions) store.Store {
	if cfg := o.store.resolve(a); cfg.kind == "sqlite" {
		if _, err := os.Stat(cfg.target); errors.Is(err, fs.ErrNotExist) {
			// Not created here: a doctor run from the wrong folder would leave an empty store.
			d.report("warn", "store", "sqlite %s does not exist yet (serve creates it; fix: run from the folder serve uses, or set PACKBOT_DATA_DIR)", cfg.target)
			return nil
		}
	}
	cctx, cancel := d.bounded(ctx)
	defer cancel()
	st, cfg, err := o.store.open(cctx, a)
	if err != nil {
		d.report("FAIL", "store", "%v (fix: check DATABASE_URL or POSTGRES_*, that the database runs and accepts this role)", err)
		return nil
	}
	detail := cfg.describe()
	if v, ok := st.(interface {
		SchemaVersion(context.Context) (int, error)
	}); ok {
		n, err := v.SchemaVersion(cctx)
		if err != nil {
			d.report("FAIL", "store", "%s: schema version: %v", detail, err)
			return st
		}
		detail += fmt.Sprintf(", schema version %d", n)
	}
	d.report("ok", "store", "%s", detail)
	return st
}

// checkKeys checks the keys parse and open every sealed credential in the store.
func (d *doctor) checkKeys(ctx context.Context, st store.Store, kr *secret.Keyring, keyErr error) {
	switch {
	case errors.Is(keyErr, secret.ErrNoKey):
		d.report("warn", "keys", "%s is not set: per-user MCP configuration is off (fix: 'packbot keys gen')", secret.EnvKey)
		return
	case keyErr != nil:
		d.report("FAIL", "keys", "%v (fix: 'packbot keys gen' prints a valid key)", keyErr)
		return
	case st == nil:
		d.report("warn", "keys", "keys parse; stored credentials not checked (no store)")
		return
	}
	var rows, failed int
	var first error
	after := store.CredentialKey{}
	for {
		page, err := st.ListCredentials(ctx, store.CredentialQuery{After: after, Limit: 500})
		if err != nil {
			d.report("FAIL", "keys", "list stored credentials: %v", err)
			return
		}
		for _, c := range page {
			k := store.CredentialKey{Identity: c.Identity, Server: c.Server, Kind: c.Kind}
			rows++
			if _, err := kr.Open(k, c.Secret); err != nil {
				failed++
				if first == nil {
					first = err
				}
			}
			after = k
		}
		if len(page) < 500 {
			break
		}
	}
	if failed > 0 {
		d.report("FAIL", "keys", "%d of %d stored credential(s) cannot be opened: %v (fix: set the key they were sealed with as %s or in %s)",
			failed, rows, first, secret.EnvKey, secret.EnvOldKeys)
		return
	}
	d.report("ok", "keys", "current key %s opens all %d stored credential(s)", kr.CurrentKeyID(), rows)
}

func (d *doctor) checkLLM(ctx context.Context, a *app, p *packs.Pack) {
	cfg, ok, err := agent.FromPack(p.LLM, a.getenv)
	switch {
	case err != nil:
		d.report("FAIL", "llm", "%v", err)
		return
	case !ok:
		d.report("warn", "llm", "no language model configured: the bot answers commands only (fix: set OPENAI_API_KEY, ANTHROPIC_API_KEY or OLLAMA_ENDPOINT for %s)", p.LLM.Provider)
		return
	}
	cfg.Logger = a.logger
	m, err := agent.New(cfg)
	if err != nil {
		d.report("FAIL", "llm", "%s %s: %v", cfg.Provider, cfg.Model, err)
		return
	}
	cctx, cancel := d.bounded(ctx)
	defer cancel()
	start := time.Now()
	if _, _, err := m.Complete(cctx, "", []agent.Message{{Role: agent.RoleUser, Content: "Answer with one word: ready?"}}, 5); err != nil {
		d.report("FAIL", "llm", "%s %s does not answer: %v (fix: check the provider's URL, key and model name)", cfg.Provider, cfg.Model, err)
		return
	}
	d.report("ok", "llm", "%s %s answered in %v", cfg.Provider, cfg.Model, time.Since(start).Round(time.Millisecond))
}

// checkMCP smoke-tests each enabled admin-controlled server with the pack's own headers, or
// packbot's own token (client_credentials, workload_identity) as serve gets it. User-controlled
// servers need a user's credentials; they are listed, not contacted.
func (d *doctor) checkMCP(ctx context.Context, p *packs.Pack) {
	machine, merr := machineFor(d.a, p)
	for i := range p.MCP.Servers {
		s := p.MCP.Servers[i]
		name := "mcp " + s.Name
		switch {
		case !s.Enabled:
			d.report("ok", name, "disabled")
			continue
		case s.UserControlled():
			d.report("ok", name, "user-controlled: each user's credentials are tested when they give them")
			continue
		case s.MachineAuth() && merr != nil:
			d.report("FAIL", name, "%v", merr)
			continue
		case s.Authentication != nil && !s.MachineAuth():
			d.report("warn", name, "authenticates with %s: not smoke-tested by doctor (fix: 'packbot mcp smoke --server %s')", s.Authentication.Mode, s.Name)
			continue
		}
		cctx, cancel := d.bounded(ctx)
		rep, err := mcp.Smoke(cctx, s, mcp.SmokeOptions{Logger: d.a.logger, Machine: machineOrNil(machine)})
		cancel()
		if err != nil {
			d.report("FAIL", name, "%s %s: %s: %v (fix: 'packbot mcp smoke --server %s' shows each step)", s.Transport, target(s), mcp.Classify(err), err, s.Name)
			continue
		}
		d.report("ok", name, "%s %s: %d tool(s) listed, %d offered", s.Transport, target(s), rep.Listed, len(rep.Tools))
		for _, f := range namecheck.Check(&s, rep.Offered()) {
			level := "warn"
			if f.Blocking {
				level = "FAIL"
			}
			d.report(level, name, "mcp.servers[%d].%s: %s (fix: correct the name in %s)", i, f.Field, findingMessage(f), p.Source)
		}
	}
}

// checkPublicURL checks that the public URL answers HTTP (any status: a wallet reaching it
// gets an answer).
func (d *doctor) checkPublicURL(ctx context.Context, a *app, o doctorOptions) {
	u := firstNonEmpty(o.channel.publicURL, a.getenv("PACKBOT_PUBLIC_URL"))
	if u == "" {
		d.report("warn", "public", "PACKBOT_PUBLIC_URL is not set: wallets are told the listen address, which only this machine reaches")
		return
	}
	if err := checkPublicURL(u); err != nil {
		d.report("FAIL", "public", "%v", err)
		return
	}
	cctx, cancel := d.bounded(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, strings.TrimSuffix(u, "/")+"/invitation", nil)
	if err == nil {
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			_ = resp.Body.Close()
			d.report("ok", "public", "%s answers (HTTP %d)", u, resp.StatusCode)
			return
		}
	}
	d.report("FAIL", "public", "%s is not reachable from here: %v (fix: start serve, or set PACKBOT_PUBLIC_URL to where it listens)", u, err)
}

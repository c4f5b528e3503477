package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/audit"
	"github.com/packbot/packbot/store"
)

type auditOptions struct {
	store  storeOptions
	q      store.AuditQuery
	since  string
	until  string
	calls  bool
	json   bool
	follow bool
	every  time.Duration
	signer string
	last   int
}

func newAuditCmd(a *app) *cobra.Command {
	var o auditOptions
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit: tool calls and approval steps, with each approval's story",
		Long: `Every tool call (allowed, denied, approval-gated, executed, failed) and every step of an approval
request (created, each vote, cancelled, expired) is recorded by the store in the transaction of
what caused it, on every replica. 'audit' lists the newest records, oldest first, each call of an
approval request followed by the request's story (requester, terms, every vote with its approver
and time, outcome, result fingerprint); --follow then prints the records every replica appends.
Argument values, results and secrets are never printed: only their fingerprints.

Records are hash-chained and the chains' heads signed by the bot's key at checkpoints:
'audit verify' checks them. See docs/audit.md.`,
		Example: `  packbot audit --tool send_money --since 24h
  packbot audit --approval 3f2a9c1e…
  packbot audit --json --follow --database-url postgres://… >> siem.jsonl
  packbot audit verify`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runAudit(ctx, a, o)
		},
	}
	f := cmd.Flags()
	o.store.bind(f)
	f.StringVar(&o.q.Identity, "identity", "", "only this user's records (their identity attribute)")
	f.StringVar(&o.q.Server, "server", "", "only this MCP server's")
	f.StringVar(&o.q.Tool, "tool", "", "only this tool's")
	f.StringVar(&o.q.Decision, "decision", "", "only calls so decided: allow, deny, approval (votes: approve, reject)")
	f.StringVar(&o.q.Outcome, "outcome", "", "only calls with this outcome: executed, failed, denied, pending")
	f.StringVar(&o.q.ApprovalID, "approval", "", "only this approval request's records")
	f.StringVar(&o.since, "since", "", "from this time on: RFC 3339 (2026-11-28T09:00:00Z) or a duration ago (24h)")
	f.StringVar(&o.until, "until", "", "before this time: RFC 3339 or a duration ago")
	f.IntVar(&o.q.Limit, "limit", 100, "the newest this many records")
	f.BoolVar(&o.calls, "calls", false, "tool calls only, no approval steps")
	f.BoolVar(&o.json, "json", false, "one JSON object per line (for a SIEM)")
	f.BoolVar(&o.follow, "follow", false, "then print the records appended, until interrupted")
	f.DurationVar(&o.every, "every", time.Second, "with --follow: how often to look for new records")
	cmd.AddCommand(newAuditVerifyCmd(a))
	return cmd
}

func runAudit(ctx context.Context, a *app, o auditOptions) (err error) {
	now := time.Now()
	if o.q.Since, err = parseWhen(o.since, now); err != nil {
		return fmt.Errorf("--since: %w", err)
	}
	if o.q.Until, err = parseWhen(o.until, now); err != nil {
		return fmt.Errorf("--until: %w", err)
	}
	if o.every <= 0 {
		return errors.New("--every: want a positive duration such as 1s")
	}
	o.q.Events = !o.calls
	st, _, err := o.store.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	rd := audit.NewReader(st)
	entries, cur, err := rd.List(ctx, o.q)
	if err != nil {
		return err
	}
	print := printEntry(a.stdout, o.json)
	for _, e := range entries {
		if err := print(e); err != nil {
			return err
		}
	}
	if !o.follow {
		if len(entries) == 0 && !o.json {
			_, err := fmt.Fprintln(a.stdout, "no audit records")
			return err
		}
		return nil
	}
	return rd.Follow(ctx, o.q, cur, o.every, print)
}

// parseWhen reads a time: RFC 3339, or a duration ago; "" is zero.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-11-28T09:00:00Z) nor a duration (24h)", s)
	}
	return t, nil
}

// printEntry prints entries to w, as JSON lines or text.
func printEntry(w io.Writer, asJSON bool) func(audit.Entry) error {
	if asJSON {
		enc := json.NewEncoder(w)
		return func(e audit.Entry) error { return enc.Encode(e) }
	}
	return func(e audit.Entry) error {
		_, err := io.WriteString(w, entryText(e))
		return err
	}
}

// entryText is one record on a line, and the story of its approval under a tool call.
func entryText(e audit.Entry) string {
	r := e.Record
	var b strings.Builder
	fmt.Fprintf(&b, "%s  #%d  %s", r.At.UTC().Format("2006-01-02T15:04:05.000Z"), r.ID, firstNonEmpty(r.Identity, "-"))
	if len(r.Roles) > 0 {
		fmt.Fprintf(&b, " [%s]", strings.Join(r.Roles, ","))
	}
	fmt.Fprintf(&b, "  %s/%s  ", r.Server, r.Tool)
	switch {
	case r.Event != "":
		fmt.Fprintf(&b, "%s %s→ %s", r.Event, suffix(r.Decision, " "), r.Outcome)
	default:
		fmt.Fprintf(&b, "%s → %s  %s", r.Decision, r.Outcome, r.Latency.Round(time.Microsecond))
	}
	if r.ArgsFingerprint != "" {
		fmt.Fprintf(&b, "  args %s", short(r.ArgsFingerprint))
	}
	if r.ResultFingerprint != "" {
		fmt.Fprintf(&b, "  result %s", short(r.ResultFingerprint))
	}
	if r.ApprovalID != "" {
		fmt.Fprintf(&b, "  approval %s", r.ApprovalID)
	}
	for _, s := range []string{r.Error, r.Detail} {
		if s != "" {
			fmt.Fprintf(&b, "  (%s)", s)
		}
	}
	b.WriteString("\n")
	if s := e.Story; s != nil && r.Event == "" {
		b.WriteString(storyText(s))
	}
	return b.String()
}

// storyText is an approval's story, indented under the record.
func storyText(s *audit.Story) string {
	var b strings.Builder
	at := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
	fmt.Fprintf(&b, "    approval %s: %s asked at %s; quorum %d of [%s], expires %s; %s", s.ID, firstNonEmpty(s.RequesterName, s.Requester),
		at(s.CreatedAt), s.Quorum, strings.Join(s.ApproverRoles, ","), at(s.ExpiresAt), s.Status)
	if s.ResolvedBy != "" {
		fmt.Fprintf(&b, " by %s", s.ResolvedBy)
	}
	if s.ResolvedAt != nil {
		fmt.Fprintf(&b, " at %s", at(*s.ResolvedAt))
	}
	if s.Execution != "" {
		fmt.Fprintf(&b, "; execution %s", s.Execution)
	}
	if s.ResultFingerprint != "" {
		fmt.Fprintf(&b, ", result %s", short(s.ResultFingerprint))
	}
	b.WriteString("\n")
	for _, v := range s.Votes {
		fmt.Fprintf(&b, "      vote: %s %s at %s\n", v.Approver, v.Decision, at(v.At))
	}
	return b.String()
}

// short is a fingerprint's first 12 characters.
func short(fp string) string { return fp[:min(12, len(fp))] }

func suffix(s, sep string) string {
	if s == "" {
		return ""
	}
	return s + sep
}

func newAuditVerifyCmd(a *app) *cobra.Command {
	var o auditOptions
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check that no audit record was changed, removed, inserted or reordered",
		Long: `Verify walks every chain of the audit: each record must follow the one before it, with the hash
of its content and place; each checkpoint must be signed by the bot's key and name the one
before it, and the records it signed must be there unchanged. It prints what it checked and
exits 0, or prints every problem, the first record changed, removed, inserted or reordered first,
and exits 1.

The bot's key comes from PACKBOT_DIDCOMM_KEY (or the data folder's didcomm.key), as serve's
does; --signer names its did:key instead. Without either, any signature counts, and checkpoints
signed by more than one key are a problem.`,
		Example: `  packbot audit verify
  PACKBOT_DIDCOMM_KEY=… packbot audit verify --database-url postgres://…`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAuditVerify(cmd.Context(), a, o)
		},
	}
	o.store.bind(cmd.Flags())
	cmd.Flags().StringVar(&o.signer, "signer", "", "the did:key checkpoints must be signed by (default: the bot's, from PACKBOT_DIDCOMM_KEY)")
	cmd.Flags().IntVar(&o.last, "last", 0, "check only the last this many records of each chain (0: all)")
	return cmd
}

func runAuditVerify(ctx context.Context, a *app, o auditOptions) (err error) {
	vo, source, err := auditKeys(a, o)
	if err != nil {
		return err
	}
	vo.Last = o.last
	st, _, err := o.store.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	rep, err := audit.Verify(ctx, st, vo)
	if err != nil {
		return err
	}
	if !rep.OK() {
		fmt.Fprintf(a.stdout, "FAIL  %s\n", rep.Problems[0])
		for _, p := range rep.Problems[1:] {
			fmt.Fprintf(a.stdout, "      %s\n", p)
		}
		return exitError{code: 1}
	}
	fmt.Fprintf(a.stdout, "ok    %d records in %d chains, %d checkpoints signed by %s (%s)\n", rep.Records, rep.Lanes, rep.Checkpoints,
		firstNonEmpty(strings.Join(rep.Signers, ", "), "nobody yet"), source)
	if rep.Uncovered > 0 {
		fmt.Fprintf(a.stdout, "      %d records appended since the last checkpoint are not signed yet\n", rep.Uncovered)
	}
	if rep.Pending > 0 {
		fmt.Fprintf(a.stdout, "      %d records not sealed yet, their MACs right\n", rep.Pending)
	}
	if rep.Unchecked > 0 {
		fmt.Fprintf(a.stdout, "      %d records not sealed yet, their MACs not checked (no key: set %s)\n", rep.Unchecked, EnvDIDCommKey)
	}
	return nil
}

// auditKeys are the keys verification uses, and where the signer came from. The DID
// checkpoints must be signed by: --signer, else the bot's key (PACKBOT_DIDCOMM_KEY, else the
// data folder's key file — read, never created), else "" (any signer). The audit key that
// checks the MACs of records not sealed yet: from the same master key, when there is one.
func auditKeys(a *app, o auditOptions) (audit.Options, string, error) {
	master, source, err := masterKeyIfAny(a, o.store.dir(a))
	if err != nil {
		return audit.Options{}, "", err
	}
	var vo audit.Options
	if master != nil {
		if vo.MACKey, err = audit.MACKeyFromMaster(master); err != nil {
			return audit.Options{}, "", err
		}
	}
	if o.signer != "" {
		if _, err := audit.PublicKey(o.signer); err != nil {
			return audit.Options{}, "", fmt.Errorf("--signer: %w", err)
		}
		vo.Signer = o.signer
		return vo, "--signer", nil
	}
	if master == nil {
		return vo, "no key to pin: any signature counts (set " + EnvDIDCommKey + ")", nil
	}
	k, err := audit.KeyFromMaster(master)
	if err != nil {
		return audit.Options{}, "", err
	}
	vo.Signer = k.DID()
	return vo, "the bot's key, from " + source, nil
}

// masterKeyIfAny is the DIDComm master key serve would use, when there is one: nil when
// neither PACKBOT_DIDCOMM_KEY nor the data folder's key file exists.
func masterKeyIfAny(a *app, dataDir string) ([]byte, string, error) {
	if a.getenv(EnvDIDCommKey) != "" {
		return didcommKey(a, dataDir, "")
	}
	path := filepath.Join(dataDir, "didcomm.key")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	k, err := keyFile(path)
	return k, "the key file " + path, err
}

// auditCheckpoints is serve's part that signs the audit's checkpoints with the bot's key, every
// PACKBOT_AUDIT_CHECKPOINT (default 1m), and once more when serve stops.
func (s *services) auditCheckpoints() component {
	var cp *audit.Checkpointer
	return component{name: "audit checkpoints",
		provision: func(context.Context) error {
			every, err := durationEnv(s.app, "PACKBOT_AUDIT_CHECKPOINT", time.Minute)
			if err != nil {
				return err
			}
			master, source, err := didcommKey(s.app, s.opts.store.dir(s.app), "")
			if err != nil {
				return err
			}
			if s.scfg.kind == "postgres" && source != EnvDIDCommKey {
				s.app.logger.Warn("audit checkpoints are signed with a key from a file in the data folder: replicas sharing the database "+
					"need the same "+EnvDIDCommKey+", or 'packbot audit verify' finds checkpoints signed by several keys", slog.String("key", source))
			}
			key, err := audit.KeyFromMaster(master)
			if err != nil {
				return err
			}
			cp = audit.NewCheckpointer(s.st, key, &audit.CheckpointOptions{Every: every, Logger: s.app.logger.With("component", "audit")})
			return nil
		},
		run: func(ctx context.Context) error { return cp.Run(ctx) },
	}
}

// checkAudit is doctor's check of the audit: the last 10,000 records of each chain and the last
// checkpoints verified, within the check's time; a problem is a warning (the deployment runs).
func (d *doctor) checkAudit(ctx context.Context, st store.Store, o doctorOptions) {
	if st == nil {
		return
	}
	vo, _, err := auditKeys(d.a, auditOptions{store: o.store})
	if err != nil {
		d.report("warn", "audit", "%v", err)
		return
	}
	cctx, cancel := d.bounded(ctx)
	defer cancel()
	vo.Last = 10_000
	rep, err := audit.Verify(cctx, st, vo)
	switch {
	case err != nil:
		d.report("warn", "audit", "not verified: %v", err)
	case !rep.OK():
		d.report("warn", "audit", "%s (%d problems; fix: 'packbot audit verify' lists them, docs/audit.md says what to do)", rep.Problems[0], len(rep.Problems))
	case rep.Uncovered > 0 && rep.LastCheckpoint.Seq == 0:
		d.report("warn", "audit", "%d records and no signed checkpoint yet (serve signs one every PACKBOT_AUDIT_CHECKPOINT)", rep.Uncovered)
	default:
		d.report("ok", "audit", "the last %d records verified, %d not signed yet; last checkpoint %s", rep.Records, rep.Uncovered,
			checkpointAge(rep.LastCheckpoint))
	}
}

func checkpointAge(c store.AuditCheckpoint) string {
	if c.Seq == 0 {
		return "none"
	}
	return fmt.Sprintf("#%d, %s ago", c.Seq, time.Since(c.At).Round(time.Second))
}

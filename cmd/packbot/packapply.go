package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rollout"
)

type applyOptions struct {
	store   storeOptions
	channel channelOptions
	wait    time.Duration
	strict  bool
}

func newPackApplyCmd(a *app) *cobra.Command {
	var o applyOptions
	cmd := &cobra.Command{
		Use:   "apply PATH",
		Short: "Swap a new pack into the running bot (every replica), without a restart",
		Long: `Validate the pack at PATH (as 'pack validate' does, for the channel serve runs) and make
it the pack in force: it is stored, with the next version number, in the store serve uses
(DATABASE_URL, or the SQLite file under --data-dir), and every running 'packbot serve' on that
store switches to it for the next event of each conversation — on PostgreSQL at once (LISTEN/
NOTIFY), otherwise within PACKBOT_PACK_WATCH. An invalid pack is refused with its problems
(exit status 1) and nothing changes. A pack identical to the one in force changes nothing.

The pack's ${NAME} placeholders are stored unexpanded: each replica fills them from its own
environment, and a replica that cannot run the pack keeps the previous one and says why
('packbot pack status', its /readyz and log, packbot_pack_refused).

With --wait, wait until every live replica runs the new version (exit status 1 when one
refused it, or the wait ran out).

The pack's warnings (an unknown key such as 'temprature', with a "did you mean") are printed;
with --strict a pack with warnings is refused like an invalid one.`,
		Example: `  packbot pack apply packs/wise-corporate --wait 30s
  packbot pack apply --strict ./agent-pack.yaml
  DATABASE_URL=postgres://packbot@db/packbot packbot pack apply ./agent-pack.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPackApply(cmd.Context(), a, args[0], o)
		},
	}
	f := cmd.Flags()
	o.store.bind(f)
	f.StringVar(&o.channel.kind, "channel", "", "the wallet channel serve runs: didcomm or vsagent (default as serve)")
	f.DurationVar(&o.wait, "wait", 0, "wait this long for every live replica to run the new version (0: do not wait)")
	f.BoolVar(&o.strict, "strict", false, "refuse a pack that has warnings (unknown keys, unset placeholders in texts…)")
	return cmd
}

func runPackApply(ctx context.Context, a *app, path string, o applyOptions) error {
	source, data, err := packs.Locate(path, a.env)
	if err != nil {
		return err
	}
	if abs, err := filepath.Abs(source); err == nil {
		source = abs // the replicas' logs name it
	}
	p, err := a.loadPack(path, a.stdout)
	if err != nil {
		return err
	}
	for _, w := range p.Warnings {
		fmt.Fprintln(a.stdout, w)
	}
	kind := o.channel.resolve(a)
	if problem := channelProblem(p, kind); problem != "" {
		fmt.Fprintln(a.stdout, problem)
		fmt.Fprintf(a.stdout, "%s: invalid on the %s channel: not applied\n", source, kind)
		return exitError{code: 1}
	}
	if o.strict && len(p.Warnings) > 0 {
		fmt.Fprintf(a.stdout, "%s: %d warning(s) and --strict: not applied\n", source, len(p.Warnings))
		return exitError{code: 1}
	}
	if err := refuseUnknownNames(ctx, a, p, source); err != nil {
		return err
	}
	st, _, err := o.store.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	reg := rollout.NewRegistry(st, nil)
	v, created, err := reg.Apply(ctx, data, source, rollout.OriginApply)
	if err != nil {
		return err
	}
	if !created {
		fmt.Fprintf(a.stdout, "%s: unchanged: %s already has this content\n", source, v.Label())
	} else {
		fmt.Fprintf(a.stdout, "%s: applied as %s\n", source, v.Label())
	}
	if o.wait > 0 {
		return waitReplicas(ctx, a, reg, v, o.wait)
	}
	if rs, err := reg.Replicas(ctx, time.Now().Add(-rollout.Live)); err == nil && len(rs) == 0 {
		// A mistyped --data-dir or DATABASE_URL makes a new store: say that nobody runs on it.
		fmt.Fprintf(a.stdout, "note: no serve runs on this store (none said what it runs in the last %s): the next one started on it takes this pack\n", rollout.Live)
	}
	return nil
}

// waitReplicas waits until every live replica runs v (or one refused it), then prints them.
func waitReplicas(ctx context.Context, a *app, reg *rollout.Registry, v rollout.Version, wait time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	rs, err := reg.Await(wctx, v)
	switch {
	case err == nil:
		return printReplicas(a.stdout, rs, v)
	case errors.Is(err, rollout.ErrRefused):
		_ = printReplicas(a.stdout, rs, v)
		return exitError{code: 1}
	case wctx.Err() != nil && ctx.Err() == nil:
		_ = printReplicas(a.stdout, rs, v)
		fmt.Fprintf(a.stdout, "not every replica runs %s after %s\n", v.Label(), wait)
		return exitError{code: 1}
	}
	return err
}

type statusOptions struct {
	store storeOptions
	json  bool
}

func newPackStatusCmd(a *app) *cobra.Command {
	var o statusOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the pack in force and the version each running replica runs",
		Long: `Show the pack in force (its version, digest, source and when it was applied) and, for each
'packbot serve' on the store that said what it runs in the last 45 s, the version it runs and
the newest one it refused, with why.`,
		Example: `  packbot pack status
  DATABASE_URL=postgres://packbot@db/packbot packbot pack status --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPackStatus(cmd.Context(), a, o)
		},
	}
	o.store.bind(cmd.Flags())
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON instead of text")
	return cmd
}

// packStatus is the JSON shape of `pack status`.
type packStatus struct {
	Current  *rollout.Version `json:"current"`
	Replicas []rollout.Report `json:"replicas"`
}

func runPackStatus(ctx context.Context, a *app, o statusOptions) error {
	st, _, err := o.store.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	reg := rollout.NewRegistry(st, nil)
	cur, ok, err := reg.Current(ctx)
	if err != nil {
		return err
	}
	rs, err := reg.Replicas(ctx, time.Now().Add(-rollout.Live))
	if err != nil {
		return err
	}
	out := packStatus{Replicas: rs}
	if ok {
		out.Current = &cur
	}
	if o.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if !ok {
		fmt.Fprintln(a.stdout, "no pack applied yet (serve applies its pack file when it starts)")
	} else {
		fmt.Fprintf(a.stdout, "pack in force: %s from %s (%s, %s)\n", cur.Label(), cur.Source, cur.Origin, cur.AppliedAt.Format(time.RFC3339))
	}
	return printReplicas(a.stdout, rs, cur)
}

// printReplicas prints one line per replica: what it runs, against cur.
func printReplicas(w io.Writer, rs []rollout.Report, cur rollout.Version) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintf(w, "no replica running (none said what it runs in the last %s)\n", rollout.Live)
		return err
	}
	slices.SortFunc(rs, func(a, b rollout.Report) int { return strings.Compare(a.Replica, b.Replica) })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tHOST\tPID\tRUNS\tSTATE")
	for _, r := range rs {
		state := "up to date"
		switch {
		case r.Problem != "":
			state = "refused " + r.Problem
		case !r.Runs(cur):
			state = "switching"
		}
		runs := r.Running().Label()
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Replica, r.Host, r.PID, runs, state)
	}
	return tw.Flush()
}

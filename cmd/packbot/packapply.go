package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
)

// replicaLive is how recently a replica must have said what it runs to count as running.
const replicaLive = 3 * replicaSeenEvery

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
	st, _, err := o.store.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	v, created, err := recordPack(ctx, st, data, source, originApply, time.Now())
	if err != nil {
		return err
	}
	if !created {
		fmt.Fprintf(a.stdout, "%s: unchanged: %s already has this content\n", source, v.label())
	} else {
		fmt.Fprintf(a.stdout, "%s: applied as %s\n", source, v.label())
	}
	if o.wait > 0 {
		return waitReplicas(ctx, a, st, v, o.wait)
	}
	if rs, err := replicas(ctx, st, time.Now().Add(-replicaLive)); err == nil && len(rs) == 0 {
		// A mistyped --data-dir or DATABASE_URL makes a new store: say that nobody runs on it.
		fmt.Fprintf(a.stdout, "note: no serve runs on this store (none said what it runs in the last %s): the next one started on it takes this pack\n", replicaLive)
	}
	return nil
}

// waitReplicas waits until every live replica runs v (or refused it), then prints them.
func waitReplicas(ctx context.Context, a *app, st store.Store, v appliedPack, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	for {
		rs, err := replicas(ctx, st, time.Now().Add(-replicaLive))
		if err != nil {
			return err
		}
		done, refused := len(rs) > 0, false
		for _, r := range rs {
			switch {
			case r.Refused >= v.Version:
				refused = true
			case r.Version != v.Version:
				done = false
			}
		}
		if done || refused {
			if err := printReplicas(a.stdout, rs, v); err != nil {
				return err
			}
			if refused {
				return exitError{code: 1}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			_ = printReplicas(a.stdout, rs, v)
			fmt.Fprintf(a.stdout, "not every replica runs %s after %s\n", v.label(), wait)
			return exitError{code: 1}
		case <-poll.C:
		}
	}
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
	Current  *appliedPack    `json:"current"`
	Replicas []replicaStatus `json:"replicas"`
}

func runPackStatus(ctx context.Context, a *app, o statusOptions) error {
	st, _, err := o.store.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	cur, ok, err := currentPack(ctx, st)
	if err != nil {
		return err
	}
	rs, err := replicas(ctx, st, time.Now().Add(-replicaLive))
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
		fmt.Fprintf(a.stdout, "pack in force: %s from %s (%s, %s)\n", cur.label(), cur.Source, cur.Origin, cur.AppliedAt.Format(time.RFC3339))
	}
	return printReplicas(a.stdout, rs, cur)
}

// printReplicas prints one line per replica: what it runs, against cur.
func printReplicas(w io.Writer, rs []replicaStatus, cur appliedPack) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "no replica running (none said what it runs in the last 45 s)")
		return err
	}
	slices.SortFunc(rs, func(a, b replicaStatus) int { return strings.Compare(a.Replica, b.Replica) })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tHOST\tPID\tRUNS\tSTATE")
	for _, r := range rs {
		state := "up to date"
		switch {
		case r.Problem != "":
			state = "refused " + r.Problem
		case r.Version != cur.Version:
			state = "switching"
		}
		runs := appliedPack{Version: r.Version, Digest: r.Digest}.label()
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Replica, r.Host, r.PID, runs, state)
	}
	return tw.Flush()
}

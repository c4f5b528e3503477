package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/store"
)

func newEventsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List and replay parked inbound events",
		Long: `Every inbound event (a message, a menu choice, an answer) is committed to the store's inbox
before the wallet channel acknowledges it, and removed only when everything it caused is
committed. An event whose handling failed ` + strconv.Itoa(bot.DefaultMaxAttempts) + ` times (a panic, an error) is parked: the user
got an apology, the connection's later events went on, and the event waits here for an operator.
'parked' lists them with the reason; 'replay' makes them pending again (the bot handles them at
once, in order with their connection's events).`,
	}
	cmd.AddCommand(newEventsParkedCmd(a), newEventsReplayCmd(a))
	return cmd
}

type eventsOptions struct {
	store storeOptions
	conn  string
	json  bool
	limit int
}

func newEventsParkedCmd(a *app) *cobra.Command {
	var o eventsOptions
	cmd := &cobra.Command{
		Use:     "parked",
		Short:   "List parked events, oldest first",
		Example: `  packbot events parked --database-url postgres://…`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEventsParked(cmd.Context(), a, o)
		},
	}
	o.store.bind(cmd.Flags())
	cmd.Flags().StringVar(&o.conn, "connection", "", "only this connection's events")
	cmd.Flags().BoolVar(&o.json, "json", false, "one JSON object per line")
	cmd.Flags().IntVar(&o.limit, "limit", 100, "at most this many")
	return cmd
}

// parkedEvent is what `events parked --json` prints of an event (never its payload, which may
// hold a credential the user typed).
type parkedEvent struct {
	ID         int64     `json:"id"`
	Connection string    `json:"connection"`
	Kind       string    `json:"kind"`
	Attempts   int       `json:"attempts"`
	Reason     string    `json:"reason"`
	AcceptedAt time.Time `json:"acceptedAt"`
	ParkedAt   time.Time `json:"parkedAt"`
}

func runEventsParked(ctx context.Context, a *app, o eventsOptions) (err error) {
	st, _, err := o.store.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	evs, err := st.ListParked(ctx, store.ParkedQuery{ConnectionID: o.conn, Limit: o.limit})
	if err != nil {
		return fmt.Errorf("events parked: %w", err)
	}
	if o.json {
		enc := json.NewEncoder(a.stdout)
		for _, ev := range evs {
			if err := enc.Encode(parkedEvent{ID: ev.ID, Connection: ev.ConnectionID, Kind: ev.Kind, Attempts: ev.Attempts,
				Reason: ev.LastError, AcceptedAt: ev.AcceptedAt, ParkedAt: ev.DoneAt}); err != nil {
				return err
			}
		}
		return nil
	}
	if len(evs) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no parked events")
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCONNECTION\tKIND\tATTEMPTS\tPARKED\tREASON")
	for _, ev := range evs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", ev.ID, ev.ConnectionID, ev.Kind, ev.Attempts,
			ev.DoneAt.UTC().Format(time.RFC3339), ev.LastError)
	}
	return tw.Flush()
}

func newEventsReplayCmd(a *app) *cobra.Command {
	var o eventsOptions
	cmd := &cobra.Command{
		Use:   "replay ID...",
		Short: "Make parked events pending again",
		Long: `Replay makes each parked event pending again, with its attempts reset: the replica that holds
its connection (or the first to notice) handles it, in order with the connection's events.`,
		Example: `  packbot events replay 1842 --database-url postgres://…`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEventsReplay(cmd.Context(), a, o, args)
		},
	}
	o.store.bind(cmd.Flags())
	return cmd
}

func runEventsReplay(ctx context.Context, a *app, o eventsOptions, args []string) (err error) {
	ids := make([]int64, len(args))
	for i, arg := range args {
		if ids[i], err = strconv.ParseInt(arg, 10, 64); err != nil || ids[i] <= 0 {
			return fmt.Errorf("events replay: %q is not an event id (see packbot events parked)", arg)
		}
	}
	st, _, err := o.store.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	var bus store.Bus
	if bp, ok := st.(store.BusProvider); ok {
		bus, _ = bp.Bus()
	}
	var failed error
	for _, id := range ids {
		ev, err := st.ReplayParked(ctx, id, time.Now())
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = fmt.Errorf("event %d is not parked (see packbot events parked)", id)
			}
			failed = errors.Join(failed, err)
			continue
		}
		if bus != nil { // a replica that holds the connection looks now rather than when it is idle
			if err := bus.Publish(ctx, store.Notification{Topic: store.TopicWake, Payload: ev.ConnectionID}); err != nil {
				a.logger.WarnContext(ctx, "wake the replicas", "err", err)
			}
		}
		fmt.Fprintf(a.stdout, "event %d of connection %s is pending again\n", id, ev.ConnectionID)
	}
	if failed != nil {
		return fmt.Errorf("events replay: %w", failed)
	}
	return nil
}

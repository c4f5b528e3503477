package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/channel"
)

type inviteOptions struct {
	pack    string
	http    string
	store   storeOptions
	channel channelOptions
}

func newInviteCmd(a *app) *cobra.Command {
	var o inviteOptions
	cmd := &cobra.Command{
		Use:   "invite",
		Short: "Print the bot's invitation as a URL and a terminal QR code",
		Long: `Print the embedded DIDComm agent's reusable invitation, the one 'serve' prints at start. Give
the same store, data folder, key and public URL as 'serve' (flags or environment), so that the
invitation is the bot's own.`,
		Example: `  packbot invite
  PACKBOT_PUBLIC_URL=https://bot.example packbot invite --database-url postgres://…`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runInvite(cmd.Context(), a, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.pack, "pack", "", "agent pack file or folder (as for serve)")
	f.StringVar(&o.http, "http", "", "the HTTP address serve listens on (env PACKBOT_HTTP_ADDR, default 127.0.0.1:8080), for the default public URL")
	o.store.bind(f)
	o.channel.bind(f)
	return cmd
}

func runInvite(ctx context.Context, a *app, o inviteOptions) (err error) {
	p, err := a.loadPack(o.pack, a.stderr)
	if err != nil {
		return err
	}
	st, scfg, err := o.store.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	publicURL := firstNonEmpty(o.channel.publicURL, a.getenv("PACKBOT_PUBLIC_URL"),
		"http://"+firstNonEmpty(o.http, a.getenv(envHTTPAddr), defaultHTTPAddr))
	if err := checkPublicURL(publicURL); err != nil {
		return err
	}
	ch, err := openDIDComm(ctx, channelDeps{app: a, pack: p, records: st, storeKind: scfg.kind, dataDir: o.store.dir(a), publicURL: publicURL})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ch.Close()) }()
	inv, ok := ch.(channel.Inviter)
	if !ok {
		return fmt.Errorf("channel %s has no invitation of its own", ch.Name())
	}
	return printInvitation(ctx, a, inv)
}

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

func newKeysCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Make encryption keys and re-encrypt stored credentials",
		Long: `Per-user MCP credentials are sealed with AES-256-GCM under MCP_CONFIG_ENCRYPTION_KEY (64 hex
characters). Each row records the id of its key; keys listed in MCP_CONFIG_ENCRYPTION_KEYS_OLD
(comma-separated) can still open rows.

To rotate: 'packbot keys gen', set the new key as MCP_CONFIG_ENCRYPTION_KEY and the old one in
MCP_CONFIG_ENCRYPTION_KEYS_OLD, run 'packbot keys rotate', then drop the old key.`,
	}
	cmd.AddCommand(newKeysGenCmd(a), newKeysRotateCmd(a))
	return cmd
}

func newKeysGenCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "gen",
		Short: "Print a new random key (64 hex characters) for MCP_CONFIG_ENCRYPTION_KEY or PACKBOT_DIDCOMM_KEY",
		Long: `Print a new random 256-bit key as 64 hexadecimal characters, alone on standard output, so
that it can be captured as it is; its key id (the id stored with each row sealed under it) goes
to standard error.`,
		Example: `  export MCP_CONFIG_ENCRYPTION_KEY=$(packbot keys gen)
  echo "PACKBOT_DIDCOMM_KEY=$(packbot keys gen)" >> .env`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := secret.GenerateKey(nil)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintln(a.stdout, k.Hex()); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "new key, id %s (for %s, or %s)\n", k.ID(), secret.EnvKey, EnvDIDCommKey)
			return nil
		},
	}
}

func newKeysRotateCmd(a *app) *cobra.Command {
	var o storeOptions
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Re-encrypt every stored credential under the current key",
		Long: `Rotate opens every credential row not sealed under MCP_CONFIG_ENCRYPTION_KEY with the key
it was sealed with (which must be the current key or one in MCP_CONFIG_ENCRYPTION_KEYS_OLD) and
seals it again under the current key. Each row is rewritten in its own transaction, so it is safe
while the bot runs and can be run again after an interruption.`,
		Example: `  MCP_CONFIG_ENCRYPTION_KEY=<new> MCP_CONFIG_ENCRYPTION_KEYS_OLD=<old> packbot keys rotate --database-url postgres://…`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runKeysRotate(cmd.Context(), a, o)
		},
	}
	o.bind(cmd.Flags())
	return cmd
}

func runKeysRotate(ctx context.Context, a *app, o storeOptions) (err error) {
	kr, err := secret.KeyringFromEnv(a.env)
	if errors.Is(err, secret.ErrNoKey) {
		return fmt.Errorf("keys rotate: %w: set it to the new key (packbot keys gen) and the old key in %s", err, secret.EnvOldKeys)
	}
	if err != nil {
		return fmt.Errorf("keys rotate: %w", err)
	}
	st, cfg, err := o.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	stats, err := store.RotateCredentials(ctx, st, kr)
	fmt.Fprintf(a.stdout, "%s: %d credential row(s) re-sealed under key %s, %d already under it\n",
		cfg.describe(), stats.Resealed, kr.CurrentKeyID(), stats.Current)
	if err != nil {
		return fmt.Errorf("keys rotate stopped: %w", err)
	}
	return nil
}

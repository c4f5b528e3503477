package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/telemetry"
)

// app is what every subcommand shares: the environment (process environment, then .env, then
// PACKBOT_SELF), the logger and the output streams. It is filled before a subcommand runs.
type app struct {
	lookup         func(string) (string, bool)
	env            packs.Env
	logger         *slog.Logger
	stdout, stderr io.Writer
	logLevel       string
	logFormat      string
	// tel observes serve's parts (metrics, traces): set by serve before it builds them, nil
	// in the other commands.
	tel *telemetry.Telemetry
}

// exitError carries an exit status for errors already reported to the user.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run executes the command line and returns the process exit status: 0 on success, 1 on a
// failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	return runApp(ctx, &app{lookup: lookup, stdout: stdout, stderr: stderr}, args)
}

// runApp is run with a (its lookup, stdout and stderr set).
func runApp(ctx context.Context, a *app, args []string) int {
	stdout, stderr := a.stdout, a.stderr
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case isUsageError(err):
		fmt.Fprintf(stderr, "packbot: %v\nRun 'packbot help' for usage.\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "packbot: %v\n", err)
	return 1
}

func isUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires at most", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "packbot",
		Short: "Credential-driven AI chat agents for wallet apps",
		Long: `packbot runs AI chat agents that people reach from a wallet app over DIDComm. A user
presents a verifiable credential; its attributes give their roles; the bot builds for them an
LLM agent holding only the MCP tools those roles allow. One file, the agent pack, describes an
agent; Hologram agent-pack.yaml files and environment variables work unchanged.

With no flags and no environment, 'packbot serve' runs the embedded demo pack on SQLite.`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.init()
		},
	}
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "", "log level: debug, info, warn, error (env PACKBOT_LOG_LEVEL, default info)")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", "", "log format: text or json (env PACKBOT_LOG_FORMAT, default text)")
	root.AddCommand(newServeCmd(a), newPackCmd(a), newKeysCmd(a), newCredentialCmd(a), newWalletCmd(a), newInviteCmd(a), newMCPCmd(a), newEventsCmd(a), newAuditCmd(a), newReceiptCmd(a), newDoctorCmd(a), newHealthCmd(a), newDevCmd(a), newVersionCmd(a))
	return root
}

// init reads .env, completes the environment and builds the logger.
func (a *app) init() error {
	env, err := packs.WithDotEnv(".env", a.lookup)
	if err != nil {
		return err
	}
	self := map[string]string{}
	if _, ok := env("PACKBOT_SELF"); !ok {
		if exe, err := os.Executable(); err == nil {
			self["PACKBOT_SELF"] = exe
		}
	}
	a.env = env.With(self)
	level := firstNonEmpty(a.logLevel, a.getenv("PACKBOT_LOG_LEVEL"), "info")
	format := firstNonEmpty(a.logFormat, a.getenv("PACKBOT_LOG_FORMAT"), "text")
	a.logger, err = newLogger(a.stderr, level, format)
	return err
}

// getenv returns a variable of the completed environment ("" when unset).
func (a *app) getenv(name string) string {
	if a.env == nil {
		return ""
	}
	v, _ := a.env(name)
	return strings.TrimSpace(v)
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// newLogger builds the process logger; secrets are redacted at their source (secret.Value).
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the packbot version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(a.stdout, "packbot", version())
			return err
		},
	}
}

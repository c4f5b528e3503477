package main

import (
	"context"
	"fmt"
	"net"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/agent/agenttest"
)

// defaultDevLLMAddr is where `packbot dev llm` listens unless told otherwise.
const defaultDevLLMAddr = "127.0.0.1:8090"

func newDevCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Tools for trying packbot on a laptop",
	}
	cmd.AddCommand(newDevLLMCmd(a))
	return cmd
}

func newDevLLMCmd(a *app) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "llm",
		Short: "Run a scripted OpenAI-compatible model, to try tools and approvals without an API key",
		Long: `Run the scripted OpenAI-compatible model packbot's own tests use, so that the LLM path
(tools, approvals) can be tried without a key. It is not an AI: a text that names one of the
user's tools calls it, with the JSON object written after the name as its arguments; a tool's
result is reported back; anything else is echoed with the list of the user's tools.

Point serve at it with OPENAI_BASE_URL (printed at start). It runs until Ctrl-C or SIGTERM.`,
		Example: `  packbot dev llm
  OPENAI_BASE_URL=http://127.0.0.1:8090/v1 packbot serve
  # then, in a logged-in wallet: get_exchange_rate {"from":"EUR","to":"USD"}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runDevLLM(ctx, a, addr)
		},
	}
	cmd.Flags().StringVar(&addr, "http", defaultDevLLMAddr, "listen address")
	return cmd
}

func runDevLLM(ctx context.Context, a *app, addr string) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dev llm: listen on %s: %w (another address: --http)", addr, err)
	}
	srv := agenttest.Listen(ln)
	defer srv.Close()
	srv.Script(agenttest.Dev)
	fmt.Fprintf(a.stdout, "scripted model (not an AI) listening; point packbot at it with:\nOPENAI_BASE_URL=%s\n", srv.URL)
	<-ctx.Done()
	fmt.Fprintf(a.stdout, "stopped after %d request(s)\n", srv.Calls())
	return nil
}

package demoserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/packbot/packbot/mcp/demoserver"
)

// runStdioEnv makes the test binary act as a stdio demo server, as `packbot mcp demo-server`
// does; the child exits when its standard input closes, so it cannot outlive the test.
const runStdioEnv = "DEMOSERVER_TEST_RUN_STDIO"

func TestMain(m *testing.M) {
	if os.Getenv(runStdioEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		err := demoserver.New(&demoserver.Options{Now: testNow, Logger: logger}).RunStdio(ctx, os.Stdin, os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestStdioSubprocess runs the server in a child process over its real standard streams and
// checks that it exits cleanly when the client closes the session.
func TestStdioSubprocess(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runStdioEnv+"=1")
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "demoserver-test", Version: "v0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to the child: %v", err)
	}
	var out struct{ Transfer demoserver.Transfer }
	callOK(t, cs, demoserver.ToolSendMoney, map[string]any{"recipient": "rcp-jane", "amount": 12.5, "currency": "EUR"}, &out)
	if out.Transfer.ID != "T-1005" {
		t.Errorf("send_money in the child = %+v, want T-1005", out.Transfer)
	}
	if got := stats(t, cs).SendMoneyExecutions; got != 1 {
		t.Errorf("sendMoneyExecutions in the child = %d, want 1", got)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close (the child's exit status): %v", err)
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

func newHealthCmd(a *app) *cobra.Command {
	var url string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 when a running serve is ready (for container healthchecks)",
		Long: `Ask a running serve whether it is ready: GET /readyz on its admin listener
(PACKBOT_ADMIN_ADDR, else PACKBOT_HTTP_ADDR, else 127.0.0.1:8080; an unspecified host such as
0.0.0.0 is asked on 127.0.0.1). Exits 0 on 200, 1 otherwise with the reason. The image has no
shell or curl: this is its healthcheck.`,
		Example: `  packbot health
  packbot health --url http://127.0.0.1:9090/readyz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				url = "http://" + localAddr(firstNonEmpty(a.getenv("PACKBOT_ADMIN_ADDR"), a.getenv(envHTTPAddr), defaultHTTPAddr)) + "/readyz"
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return checkHealth(ctx, a, url)
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "readiness URL (default: /readyz on the admin or HTTP address)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "time limit")
	return cmd
}

// localAddr is addr with an unspecified host (":8080", "0.0.0.0:8080", "[::]:8080") made the
// loopback address, where a process on the same machine reaches the listener.
func localAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func checkHealth(ctx context.Context, a *app, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health %s: HTTP %d: %s", url, resp.StatusCode, body)
	}
	fmt.Fprintf(a.stdout, "ready: %s\n", url)
	return nil
}

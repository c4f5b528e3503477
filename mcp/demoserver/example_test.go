package demoserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/packbot/packbot/mcp/demoserver"
)

// withToken sends a bearer token on every request of an HTTP client.
type withToken string

func (tok withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(tok))
	return http.DefaultTransport.RoundTrip(r)
}

// The wise-corporate pack's server: streamable HTTP at /mcp behind a static token, here on a
// test listener; `packbot mcp demo-server --http 127.0.0.1:8091 --token dev-wise-token` serves
// the same with [demoserver.Server.RunHTTP].
func Example() {
	ctx := context.Background()
	srv := demoserver.New(&demoserver.Options{
		Token: "dev-wise-token",
		Now:   func() time.Time { return time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC) },
	})
	defer func() { _ = srv.Close() }()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: withToken("dev-wise-token")},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = cs.Close() }()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_money", Arguments: map[string]any{
		"recipient": "Globex Corporation", "amount": 250, "currency": "USD", "reference": "PO 7",
	}})
	if err != nil {
		log.Fatal(err)
	}
	var out struct {
		Transfer demoserver.Transfer
		Balance  demoserver.Balance
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		log.Fatal(err)
	}
	t := out.Transfer
	fmt.Printf("%s: %.2f %s to %s = %.2f %s, %s\n", t.ID, t.SourceAmount, t.SourceCurrency, t.RecipientName, t.TargetAmount, t.TargetCurrency, t.Status)
	fmt.Printf("left: %.2f %s\n", out.Balance.Amount, out.Balance.Currency)

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_money", Arguments: map[string]any{
		"recipient": "Globex Corporation", "amount": 1_000_000, "currency": "USD",
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tool error:", res.IsError)
	fmt.Println("send_money executions:", srv.Stats().SendMoneyExecutions)
	// Output:
	// T-1005: 250.00 USD to Globex Corporation = 230.43 EUR, processing
	// left: 119750.00 USD
	// tool error: true
	// send_money executions: 1
}

// The demo pack's server runs as a subprocess speaking MCP on its standard input and output:
// `packbot mcp demo-server` calls RunStdio(ctx, os.Stdin, os.Stdout). Here two pipes stand in
// for the process's streams.
func ExampleServer_RunStdio() {
	ctx := context.Background()
	srv := demoserver.New(nil)
	stdin, toServer := io.Pipe()
	fromServer, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- srv.RunStdio(ctx, stdin, stdout)
		_ = stdout.Close()
	}()

	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: fromServer, Writer: toServer}, nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_exchange_rate", Arguments: map[string]any{"from": "EUR", "to": "GBP"}})
	if err != nil {
		log.Fatal(err)
	}
	var rate demoserver.ExchangeRate
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &rate); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("1 %s = %.4f %s\n", rate.From, rate.Rate, rate.To)

	_ = cs.Close() // closes the server's input: RunStdio returns nil
	fmt.Println("RunStdio:", <-done)
	// Output:
	// 1 EUR = 0.8560 GBP
	// RunStdio: <nil>
}

// Tests of catalog refresh add and remove tools while clients are connected; each change sends
// notifications/tools/list_changed to every session.
func ExampleServer_AddTool() {
	srv := demoserver.New(nil)
	srv.AddTool(demoserver.Tool{
		Name:        "ping_bank",
		Description: "Answer pong.",
		Handler:     func(context.Context, map[string]any) (string, error) { return "pong", nil },
	})
	srv.RemoveTools("get_stats", "create_invoice")
	fmt.Println(srv.ToolNames())
	// Output:
	// [get_balances get_exchange_rate get_transfer_status list_profiles list_recipients list_transfers ping_bank send_money]
}

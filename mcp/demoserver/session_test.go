package demoserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/packbot/packbot/mcp/demoserver"
)

// TestListChanged checks that a connected client hears notifications/tools/list_changed when a
// tool is added and when it is removed, and sees the new catalog when it lists again.
func TestListChanged(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			srv := newServer(t, tr)
			changed := make(chan struct{}, 1)
			cs := tr.dial(t, srv, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
					select {
					case changed <- struct{}{}:
					default: // one pending signal is enough
					}
				},
			})
			echo := demoserver.Tool{Name: "echo", Description: "Echo the arguments."}
			// The client's notification stream (GET stream, subscriptions/listen) opens in the
			// background after Connect returns, so the first change is repeated until one
			// notification gets through. Re-adding a tool notifies again each time.
			srv.AddTool(echo)
			for retry := time.NewTicker(20 * time.Millisecond); ; {
				select {
				case <-changed:
					retry.Stop()
				case <-retry.C:
					srv.AddTool(echo)
					continue
				case <-t.Context().Done():
					t.Fatal("test ended before list_changed arrived")
				}
				break
			}
			if names := listTools(t, cs); !slices.Contains(names, "echo") {
				t.Fatalf("after AddTool: tools %v, want echo", names)
			}
			res := call(t, cs, "echo", map[string]any{"hello": "world"})
			if res.IsError || text(res) != `{"hello":"world"}` {
				t.Errorf("echo = %v %q", res.IsError, text(res))
			}

			// The stream is known to work now: one change, one notification.
			for len(changed) > 0 {
				<-changed
			}
			srv.RemoveTools("echo", demoserver.ToolSendMoney)
			<-changed
			names := listTools(t, cs)
			if slices.Contains(names, "echo") || slices.Contains(names, demoserver.ToolSendMoney) {
				t.Errorf("after RemoveTools: tools %v still hold echo or send_money", names)
			}
			if got := srv.ToolNames(); !slices.Equal(got, names) {
				t.Errorf("ToolNames() = %v, client lists %v", got, names)
			}
		})
	}
}

func listTools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// TestSessionsShareLedger sends money in one session and sees it from sessions on the other
// transports of the same server.
func TestSessionsShareLedger(t *testing.T) {
	srv := newServer(t, transport{})
	var sessions []*mcp.ClientSession
	for _, tr := range transports {
		if !tr.stateless {
			sessions = append(sessions, tr.dial(t, srv, nil))
		}
	}
	want := 120_000.0
	for i, sender := range sessions {
		callOK(t, sender, demoserver.ToolSendMoney, map[string]any{"recipient": "rcp-umbrella", "amount": 500, "currency": "USD"}, new(any))
		want -= 500
		for j, cs := range sessions {
			if got := balance(t, cs, "acme-treasury", demoserver.USD); got != want {
				t.Errorf("after send %d, session %d sees %v USD, want %v", i, j, got, want)
			}
			if got := stats(t, cs).SendMoneyExecutions; got != i+1 {
				t.Errorf("after send %d, session %d sees %d send_money executions", i, j, got)
			}
		}
	}
}

// TestConcurrentSends races many sends over two sessions for more than the balance holds:
// exactly the affordable ones succeed, and the stats count exactly those.
func TestConcurrentSends(t *testing.T) {
	srv := newServer(t, transport{})
	a := dialStreamable(t, srv, nil)
	b := dialSSE(t, srv, nil)
	// alex-morgan holds 350.00 USD: 7 sends of 50 fit, 13 are refused.
	var wg sync.WaitGroup
	for i := range 20 {
		cs := a
		if i%2 == 1 {
			cs = b
		}
		wg.Go(func() {
			_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: demoserver.ToolSendMoney, Arguments: map[string]any{
				"recipient": "rcp-umbrella", "amount": 50, "currency": "USD", "profileId": "alex-morgan",
			}})
			if err != nil {
				t.Errorf("send %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	st := srv.Stats()
	if st.SendMoneyExecutions != 7 || st.ToolErrors[demoserver.ToolSendMoney] != 13 {
		t.Errorf("stats = %d sent, %d refused; want 7 and 13", st.SendMoneyExecutions, st.ToolErrors[demoserver.ToolSendMoney])
	}
	if got := balance(t, a, "alex-morgan", demoserver.USD); got != 0 {
		t.Errorf("alex-morgan USD = %v, want 0", got)
	}
}

// TestRunStdioContext checks that RunStdio returns ctx's error when ctx ends first.
func TestRunStdioContext(t *testing.T) {
	srv := demoserver.New(nil)
	in, keepOpen := io.Pipe()
	defer func() { _ = keepOpen.Close() }()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.RunStdio(ctx, in, io.Discard) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("RunStdio after cancel = %v, want context.Canceled", err)
	}
}

// TestRunHTTP serves on a real listener and checks that cancelling ctx ends open sessions and
// returns nil.
func TestRunHTTP(t *testing.T) {
	ln, cancel, done := runHTTP(t)
	base := "http://" + ln.Addr().String()
	streamable := connect(t, &mcp.StreamableClientTransport{Endpoint: base + demoserver.PathStreamable, HTTPClient: bearerClient(testToken), MaxRetries: -1}, nil)
	sse := connect(t, &mcp.SSEClientTransport{Endpoint: base + demoserver.PathSSE, HTTPClient: bearerClient(testToken)}, nil)
	for _, cs := range []*mcp.ClientSession{streamable, sse} {
		if err := cs.Ping(t.Context(), nil); err != nil {
			t.Fatalf("ping: %v", err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunHTTP after cancel = %v, want nil", err)
	}
	_ = sse.Wait() // returns once the server ended the stream; the error only says how
	if _, err := streamable.ListTools(t.Context(), nil); err == nil {
		t.Error("streamable session still answers after RunHTTP returned")
	}
}

// TestRunHTTPSpareConnection: a client's connection that never sent a request (a spare dial
// kept by its transport) does not turn a shutdown into an error.
func TestRunHTTPSpareConnection(t *testing.T) {
	ln, cancel, done := runHTTP(t)
	spare, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = spare.Close() }()
	// A request on another connection shows the server has accepted the spare one too.
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + demoserver.PathStreamable, HTTPClient: bearerClient(testToken), MaxRetries: -1}, nil)
	if err := cs.Ping(t.Context(), nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunHTTP after cancel with a spare connection open = %v, want nil", err)
	}
}

// runHTTP serves a demo server with RunHTTP on a loopback listener until cancel; done receives
// what RunHTTP returned.
func runHTTP(t *testing.T) (ln net.Listener, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	srv := demoserver.New(&demoserver.Options{Token: testToken})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	ended := make(chan error, 1)
	go func() { ended <- srv.RunHTTP(ctx, ln) }()
	return ln, cancel, ended
}

package agent_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/agent/agenttest"
)

func TestRunProviderError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resp   agenttest.Response
		status int
	}{
		{"500", agenttest.Response{Status: http.StatusInternalServerError, Text: "boom"}, 500},
		{"401 echoing the key", agenttest.Response{Status: http.StatusUnauthorized, Text: "Incorrect API key provided: " + testKey}, 401},
		{"429", agenttest.Response{Status: http.StatusTooManyRequests}, 429},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := agenttest.New(t)
			srv.Script(func(agenttest.Request) agenttest.Response { return tc.resp })
			m := newModel(t, srv, agent.Config{})

			reply, err := m.Run(t.Context(), agent.Turn{User: "x"}, nil)
			if !errors.Is(err, agent.ErrProvider) || errors.Is(err, agent.ErrTimeout) {
				t.Fatalf("err = %v, want ErrProvider only", err)
			}
			var pe *agent.ProviderError
			if !errors.As(err, &pe) || pe.StatusCode != tc.status || pe.Provider != agent.ProviderOpenAI {
				t.Errorf("ProviderError = %+v, want status %d", pe, tc.status)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error contains the API key: %v", err)
			}
			if reply.LLMCalls != 1 {
				t.Errorf("LLMCalls = %d, want 1", reply.LLMCalls)
			}
		})
	}
}

func TestRunBadResponseIsProviderError(t *testing.T) {
	// A server that answers 200 with something that is no completion.
	srv := http.NewServeMux()
	srv.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[]}`))
	})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	m, err := agent.New(agent.Config{BaseURL: hs.URL + "/v1", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(t.Context(), agent.Turn{User: "x"}, nil); !errors.Is(err, agent.ErrProvider) {
		t.Errorf("err = %v, want ErrProvider", err)
	}
}

func TestRunUnreachableIsProviderError(t *testing.T) {
	hs := httptest.NewServer(http.NotFoundHandler())
	m, err := agent.New(agent.Config{BaseURL: hs.URL + "/v1", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	hs.Close() // nothing listens there any more
	_, err = m.Run(t.Context(), agent.Turn{User: "x"}, nil)
	if !errors.Is(err, agent.ErrProvider) || errors.Is(err, agent.ErrTimeout) {
		t.Errorf("err = %v, want ErrProvider", err)
	}
}

// blockingServer returns a server whose script blocks until the test ends.
func blockingServer(t *testing.T) *agenttest.Server {
	srv := agenttest.New(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	srv.Script(func(agenttest.Request) agenttest.Response {
		<-release
		return agenttest.Response{Text: "too late"}
	})
	return srv
}

func TestRunTimeout(t *testing.T) {
	t.Run("ctx deadline", func(t *testing.T) {
		srv := blockingServer(t)
		m := newModel(t, srv, agent.Config{})
		// The server never answers before the test ends, so the deadline is what ends Run,
		// however long it is.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		reply, err := m.Run(ctx, agent.Turn{User: "x"}, nil)
		if !errors.Is(err, agent.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, agent.ErrProvider) {
			t.Errorf("err = %v, want ErrTimeout and context.DeadlineExceeded", err)
		}
		if reply.LLMCalls != 1 {
			t.Errorf("LLMCalls = %d, want 1", reply.LLMCalls)
		}
	})
	t.Run("ctx already expired", func(t *testing.T) {
		srv := agenttest.New(t)
		m := newModel(t, srv, agent.Config{})
		ctx, cancel := context.WithDeadline(t.Context(), time.Unix(0, 0))
		defer cancel()
		if _, err := m.Run(ctx, agent.Turn{User: "x"}, nil); !errors.Is(err, agent.ErrTimeout) {
			t.Errorf("err = %v, want ErrTimeout", err)
		}
	})
	t.Run("http client timeout", func(t *testing.T) {
		srv := blockingServer(t)
		m := newModel(t, srv, agent.Config{HTTPClient: &http.Client{Timeout: 20 * time.Millisecond}})
		_, err := m.Run(t.Context(), agent.Turn{User: "x"}, nil)
		if !errors.Is(err, agent.ErrTimeout) || errors.Is(err, agent.ErrProvider) {
			t.Errorf("err = %v, want ErrTimeout", err)
		}
		if strings.Contains(err.Error(), testKey) {
			t.Errorf("error contains the API key: %v", err)
		}
	})
}

func TestRunCanceled(t *testing.T) {
	srv := agenttest.New(t)
	m := newModel(t, srv, agent.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := m.Run(ctx, agent.Turn{User: "x"}, nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, agent.ErrTimeout) || errors.Is(err, agent.ErrProvider) {
		t.Errorf("err = %v, want context.Canceled only", err)
	}
}

// TestRunFillsMissingToolCallIDs: some OpenAI-compatible servers send tool calls without id
// (and type); Run gives them IDs so that the results can answer them.
func TestRunFillsMissingToolCallIDs(t *testing.T) {
	var (
		calls  atomic.Int32
		mu     sync.Mutex
		second []byte // the body of the second request
	)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			_, _ = w.Write([]byte(`{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"",
				"tool_calls":[{"function":{"name":"a","arguments":"{}"}},{"function":{"name":"b","arguments":"{}"}}]}}]}`))
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		second = body
		mu.Unlock()
		_, _ = w.Write([]byte(`{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"done"}}]}`))
	}))
	defer hs.Close()
	m, err := agent.New(agent.Config{BaseURL: hs.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	reply, err := m.Run(t.Context(), agent.Turn{User: "x", Tools: []agent.ToolDef{{Name: "a"}, {Name: "b"}}}, rec.exec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rec.calls) != 2 || rec.calls[0].ID == "" || rec.calls[0].ID == rec.calls[1].ID {
		t.Fatalf("executor calls = %+v, want two distinct IDs", rec.calls)
	}
	if reply.Messages[2].ToolCallID != rec.calls[0].ID || reply.Messages[3].ToolCallID != rec.calls[1].ID {
		t.Errorf("tool results answer %q, %q", reply.Messages[2].ToolCallID, reply.Messages[3].ToolCallID)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{`"tool_call_id":"` + rec.calls[1].ID + `"`, `"type":"function"`} {
		if !strings.Contains(string(second), want) {
			t.Errorf("second request lacks %s: %s", want, second)
		}
	}
}

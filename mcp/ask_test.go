//lint:file-ignore SA1019 sampling (deprecated from protocol 2026-07-28) is what these tests exercise

package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// testAsker answers elicitations with answer (after release is closed, when set) and records
// what it saw.
type testAsker struct {
	answer  mcp.ElicitResult
	release chan struct{}

	mu       sync.Mutex
	elicited []mcp.Elicitation
	progress []mcp.Progress
	sampled  []string
	onProg   func()
	onElicit func() // called before answering (the person opens the URL)
}

func (a *testAsker) Elicit(ctx context.Context, e mcp.Elicitation) (mcp.ElicitResult, error) {
	a.mu.Lock()
	a.elicited = append(a.elicited, e)
	a.mu.Unlock()
	if a.onElicit != nil {
		a.onElicit()
	}
	if a.release != nil {
		select {
		case <-a.release:
		case <-ctx.Done():
			return mcp.ElicitResult{}, ctx.Err()
		}
	}
	return a.answer, nil
}

func (a *testAsker) Progress(_ context.Context, p mcp.Progress) {
	a.mu.Lock()
	a.progress = append(a.progress, p)
	f := a.onProg
	a.mu.Unlock()
	if f != nil {
		f()
	}
}

func (a *testAsker) Sampled(_ context.Context, server string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sampled = append(a.sampled, server)
}

// askServer serves tools that talk back: "ask" elicits a form, "slow" reports progress and
// waits to be cancelled, "sample" asks the client's LLM.
func askServer(cancelled chan<- struct{}) func() *mcpsdk.Server {
	return func() *mcpsdk.Server {
		s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "ask", Version: "1"}, nil)
		obj := map[string]any{"type": "object"}
		s.AddTool(&mcpsdk.Tool{Name: "ask", InputSchema: obj}, func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, &mcpsdk.ElicitParams{Mode: "form", Message: "How many?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 1}}}})
			if err != nil {
				return nil, err
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: res.Action + ":" + strings.TrimSpace(toText(res.Content))}}}, nil
		})
		s.AddTool(&mcpsdk.Tool{Name: "slow", InputSchema: obj}, func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			_ = req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Message: "working", Progress: 1, Total: 4})
			<-ctx.Done()
			cancelled <- struct{}{}
			return nil, ctx.Err()
		})
		s.AddTool(&mcpsdk.Tool{Name: "sample", InputSchema: obj}, func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			res, err := req.Session.CreateMessage(ctx, &mcpsdk.CreateMessageParams{MaxTokens: 5000,
				Messages: []*mcpsdk.SamplingMessage{{Role: "user", Content: &mcpsdk.TextContent{Text: "summarise"}}}})
			if err != nil {
				return nil, err
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{res.Content}}, nil
		})
		return s
	}
}

func toText(m map[string]any) string {
	var b strings.Builder
	for k, v := range m {
		fmt.Fprintf(&b, "%s=%v", k, v)
	}
	return b.String()
}

// TestElicitationRouted: a server's question during a call reaches the call's asker; the call's
// own timeout is suspended while the person answers; without an asker it is declined.
func TestElicitationRouted(t *testing.T) {
	hs := serveHTTP(t, askServer(make(chan struct{}, 1)), nil)
	srv := httpServerDef("ask", packs.TransportStreamableHTTP, hs.url("/mcp"))
	srv.TimeoutMs = 200
	p := newPool(t, mcp.Config{Servers: []packs.Server{srv}})
	a := &testAsker{answer: mcp.ElicitResult{Action: mcp.ActionAccept, Content: map[string]any{"n": int64(3)}}, release: make(chan struct{})}
	// The person answers after three times the call's timeout.
	time.AfterFunc(600*time.Millisecond, func() { close(a.release) })
	res, err := p.Call(mcp.WithAsker(t.Context(), a), mcp.Call{Server: "ask", Tool: "ask"})
	if err != nil || res.IsError || res.Text != "accept:n=3" {
		t.Fatalf("call: %+v, %v", res, err)
	}
	if len(a.elicited) != 1 || a.elicited[0].Message != "How many?" || a.elicited[0].Server != "ask" || a.elicited[0].Tool != "ask" ||
		len(a.elicited[0].Fields) != 1 || a.elicited[0].Fields[0].Type != mcp.FieldInteger {
		t.Fatalf("elicited %+v", a.elicited)
	}
	res, err = p.Call(t.Context(), mcp.Call{Server: "ask", Tool: "ask"})
	if err != nil || res.Text != "decline:" {
		t.Fatalf("without an asker: %+v, %v", res, err)
	}
}

// TestProgressAndCancel: progress reaches the asker with the tool's name; cancelling the call's
// context sends notifications/cancelled (the tool's context ends on the server).
func TestProgressAndCancel(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	hs := serveHTTP(t, askServer(cancelled), nil)
	p := newPool(t, mcp.Config{Servers: []packs.Server{httpServerDef("ask", packs.TransportStreamableHTTP, hs.url("/mcp"))}})
	ctx, cancel := context.WithCancel(t.Context())
	a := &testAsker{onProg: cancel}
	_, err := p.Call(mcp.WithAsker(ctx, a), mcp.Call{Server: "ask", Tool: "slow"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if len(a.progress) != 1 || a.progress[0].Tool != "slow" || a.progress[0].Message != "working" || a.progress[0].Total != 4 {
		t.Fatalf("progress %+v", a.progress)
	}
	select {
	case <-cancelled:
	case <-t.Context().Done():
		t.Fatal("the server never saw the cancellation")
	}
}

type testSampler struct {
	mu  sync.Mutex
	got []mcp.SampleRequest
}

func (s *testSampler) Sample(_ context.Context, r mcp.SampleRequest) (mcp.SampleResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, r)
	return mcp.SampleResult{Text: "a summary", Model: "m"}, nil
}

// TestSampling: off unless the pack allows it; allowed, it runs on the sampler within the pack's
// token limit and the person is told.
func TestSampling(t *testing.T) {
	hs := serveHTTP(t, askServer(make(chan struct{}, 1)), nil)
	off := httpServerDef("off", packs.TransportStreamableHTTP, hs.url("/mcp"))
	on := httpServerDef("on", packs.TransportStreamableHTTP, hs.url("/mcp"))
	on.Sampling = &packs.Sampling{Enabled: true, MaxTokens: 100}
	sm := &testSampler{}
	p := newPool(t, mcp.Config{Servers: []packs.Server{off, on}, Sampler: sm})
	a := &testAsker{}
	ctx := mcp.WithAsker(t.Context(), a)
	if res, err := p.Call(ctx, mcp.Call{Server: "off", Tool: "sample"}); err == nil && !res.IsError {
		t.Fatalf("sampling without the pack's leave: %+v", res)
	}
	res, err := p.Call(ctx, mcp.Call{Server: "on", Tool: "sample"})
	if err != nil || res.Text != "a summary" {
		t.Fatalf("sampling: %+v, %v", res, err)
	}
	if len(sm.got) != 1 || sm.got[0].MaxTokens != 100 || sm.got[0].Messages[0].Text != "summarise" || len(a.sampled) != 1 {
		t.Fatalf("sampler saw %+v, asker %v", sm.got, a.sampled)
	}
}

// gatedServer serves "gated", which answers "URL elicitation required" (-32042) until granted
// is set (the person opened the URL), runs then, and counts the calls that ran.
func gatedServer(granted *atomic.Bool, ran *atomic.Int64) func() *mcpsdk.Server {
	return func() *mcpsdk.Server {
		s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "gated", Version: "1"}, nil)
		s.AddTool(&mcpsdk.Tool{Name: "gated", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			if !granted.Swap(false) {
				return nil, mcpsdk.URLElicitationRequiredError([]*mcpsdk.ElicitParams{{Mode: "url", ElicitationID: "e1",
					URL: "https://consent.example/grant", Message: "Grant access first"}})
			}
			ran.Add(1)
			// As server-everything does: the retried call asks its own question.
			res, err := req.Session.Elicit(ctx, &mcpsdk.ElicitParams{Mode: "url", ElicitationID: "e2", URL: "https://consent.example/confirm",
				Message: "Confirm"})
			if err != nil {
				return nil, err
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "done:" + res.Action}}}, nil
		})
		return s
	}
}

// TestURLElicitationRequired: a call the server answers -32042 did not run; the URL it names
// reaches the call's asker, and once the person accepted, the call is made again and runs once
// (what the server asks during the retry reaches the asker too).
// A person who declines gets a tool failure and nothing runs; without an asker the server's
// answer is a protocol error.
func TestURLElicitationRequired(t *testing.T) {
	var granted atomic.Bool
	var ran atomic.Int64
	hs := serveHTTP(t, gatedServer(&granted, &ran), nil)
	p := newPool(t, mcp.Config{Servers: []packs.Server{httpServerDef("gated", packs.TransportStreamableHTTP, hs.url("/mcp"))}})
	a := &testAsker{answer: mcp.ElicitResult{Action: mcp.ActionAccept}, onElicit: func() { granted.Store(true) }}
	res, err := p.Call(mcp.WithAsker(t.Context(), a), mcp.Call{Server: "gated", Tool: "gated"})
	if err != nil || res.IsError || res.Text != "done:accept" || ran.Load() != 1 {
		t.Fatalf("accepted: %+v, %v, ran %d", res, err, ran.Load())
	}
	if len(a.elicited) != 2 || a.elicited[0].Mode != mcp.ElicitURL || a.elicited[0].URL != "https://consent.example/grant" ||
		a.elicited[0].Tool != "gated" || a.elicited[0].Message != "Grant access first" || a.elicited[1].URL != "https://consent.example/confirm" {
		t.Fatalf("elicited %+v", a.elicited)
	}
	granted.Store(false) // the asker granted on the retry's question too
	decline := &testAsker{answer: mcp.ElicitResult{Action: mcp.ActionDecline}}
	res, err = p.Call(mcp.WithAsker(t.Context(), decline), mcp.Call{Server: "gated", Tool: "gated"})
	if err != nil || !res.IsError || !strings.Contains(res.Text, "did not open") || ran.Load() != 1 {
		t.Fatalf("declined: %+v, %v, ran %d", res, err, ran.Load())
	}
	var perr *mcp.ProtocolError
	if _, err = p.Call(t.Context(), mcp.Call{Server: "gated", Tool: "gated"}); !errors.As(err, &perr) || perr.Code != -32042 || ran.Load() != 1 {
		t.Fatalf("without an asker: %v, ran %d", err, ran.Load())
	}
}

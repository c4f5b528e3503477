package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// liveCall is a tool call in flight on a session slot: what the server's requests and
// notifications during the call are routed to.
type liveCall struct {
	ctx   context.Context // the call's: ends when the call does
	tool  string
	token string // the call's progress token
	asker Asker  // nil: nobody to ask
	timer *callTimer
}

// track registers a call in flight on c until the returned func is called.
func (c *conn) track(lc *liveCall) func() {
	c.callMu.Lock()
	if c.calls == nil {
		c.calls = map[string]*liveCall{}
	}
	c.calls[lc.token] = lc
	c.callMu.Unlock()
	return func() {
		c.callMu.Lock()
		delete(c.calls, lc.token)
		c.callMu.Unlock()
	}
}

// single returns the one call in flight on c, and how many there are. A server's request
// carries nothing that names the call it belongs to, so it is relayed to a person only when one
// call is in flight on the session: always so on a user's own session, which serves one
// conversation at a time; on a shared session, while calls of several users overlap, it is
// declined rather than risk asking the wrong person.
func (c *conn) single() (*liveCall, int) {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	if len(c.calls) != 1 {
		return nil, len(c.calls)
	}
	for _, lc := range c.calls {
		return lc, 1
	}
	return nil, 0
}

// elicit relays a server's elicitation to the person the call in flight is made for, with the
// call's timeout suspended while they answer.
func (c *conn) elicit(ctx context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
	lc, n := c.single()
	if lc == nil || lc.asker == nil {
		c.log().Warn("MCP server asked a question that nobody can answer; declined",
			slog.Int("calls_in_flight", n), slog.Bool("asker", lc != nil && lc.asker != nil))
		return &mcpsdk.ElicitResult{Action: ActionDecline}, nil
	}
	return c.elicitFor(ctx, lc, req.Params)
}

// elicitFor asks the person call lc is made for what p asks.
func (c *conn) elicitFor(ctx context.Context, lc *liveCall, p *mcpsdk.ElicitParams) (*mcpsdk.ElicitResult, error) {
	e := Elicitation{Server: c.srv.Name, Tool: lc.tool, Mode: p.Mode, Message: clip(p.Message, maxElicitMessage)}
	if e.Mode == "" {
		e.Mode = ElicitForm
		if p.URL != "" {
			e.Mode = ElicitURL
		}
	}
	switch e.Mode {
	case ElicitForm:
		fields, err := parseFields(p.RequestedSchema)
		if err != nil {
			return nil, &jsonrpc.Error{Code: codeInvalidParams, Message: err.Error()}
		}
		e.Fields = fields
	case ElicitURL:
		if err := checkElicitURL(p.URL); err != nil {
			return nil, &jsonrpc.Error{Code: codeInvalidParams, Message: err.Error()}
		}
		e.URL, e.ID = p.URL, p.ElicitationID
		done, forget := c.awaitCompletion(p.ElicitationID)
		defer forget()
		e.Done = done
	default:
		return nil, &jsonrpc.Error{Code: codeInvalidParams, Message: fmt.Sprintf("unsupported elicitation mode %q", e.Mode)}
	}
	lc.timer.pause()
	defer lc.timer.resume()
	ectx, cancel := context.WithCancel(lc.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel) // the server gave up, or the session ended
	defer stop()
	res, err := lc.asker.Elicit(ectx, e)
	if err != nil {
		if ectx.Err() != nil {
			return &mcpsdk.ElicitResult{Action: ActionCancel}, nil
		}
		return nil, fmt.Errorf("ask the user: %w", err)
	}
	out := &mcpsdk.ElicitResult{Action: res.Action}
	if res.Action == ActionAccept && e.Mode == ElicitForm {
		out.Content = res.Content
		if out.Content == nil {
			out.Content = map[string]any{}
		}
	}
	return out, nil
}

// awaitCompletion returns a channel closed when the server says URL elicitation id completed.
func (c *conn) awaitCompletion(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	if id == "" {
		return ch, func() {}
	}
	c.callMu.Lock()
	if c.completions == nil {
		c.completions = map[string]chan struct{}{}
	}
	c.completions[id] = ch
	c.callMu.Unlock()
	return ch, func() {
		c.callMu.Lock()
		if c.completions[id] == ch {
			delete(c.completions, id)
		}
		c.callMu.Unlock()
	}
}

func (c *conn) elicitationComplete(_ context.Context, req *mcpsdk.ElicitationCompleteNotificationRequest) {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	if ch, ok := c.completions[req.Params.ElicitationID]; ok {
		close(ch)
		delete(c.completions, req.Params.ElicitationID)
	}
}

// progress relays a progress notification to the call it names (by its token), and restarts
// the call's timeout: a server that reports progress is working.
func (c *conn) progress(ctx context.Context, req *mcpsdk.ProgressNotificationClientRequest) {
	token := tokenString(req.Params.ProgressToken)
	c.callMu.Lock()
	lc := c.calls[token]
	c.callMu.Unlock()
	if lc == nil {
		return
	}
	lc.timer.restart()
	if lc.asker != nil {
		lc.asker.Progress(lc.ctx, Progress{Server: c.srv.Name, Tool: lc.tool, Message: clip(req.Params.Message, maxProgressMessage),
			Progress: req.Params.Progress, Total: req.Params.Total})
	}
}

func tokenString(t any) string {
	switch t := t.(type) {
	case string:
		return t
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(t, 10)
	case int:
		return strconv.Itoa(t)
	}
	return fmt.Sprint(t)
}

// callTimer is a call's timeout that can be suspended while a person answers the server.
type callTimer struct {
	mu     sync.Mutex
	d      time.Duration
	t      *time.Timer
	paused int
	done   bool
}

func startCallTimer(d time.Duration, fire func()) *callTimer {
	return &callTimer{d: d, t: time.AfterFunc(d, fire)}
}

func (t *callTimer) pause() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paused++
	if t.paused == 1 && !t.done {
		t.t.Stop()
	}
}

func (t *callTimer) resume() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paused--
	if t.paused == 0 && !t.done {
		t.t.Reset(t.d)
	}
}

// restart starts the timeout again (unless suspended).
func (t *callTimer) restart() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.paused == 0 && !t.done && t.t.Stop() {
		t.t.Reset(t.d)
	}
}

func (t *callTimer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	t.t.Stop()
}

// urlRequired handles a server's answer "URL elicitation required" (-32042) to call lc: the
// tool did not run; each URL the answer names is shown to the person the call is made for, as
// a URL elicitation of the call, and once every one is done (accepted, and completed when the
// server says so) the call is made again, once (retry nil: it is not, and the answer stands).
// A person who declines or cancels gets the tool's failure, which says so.
func (c *conn) urlRequired(ctx context.Context, lc *liveCall, rpcErr *jsonrpc.Error, retry func() (Result, error)) (Result, error) {
	var data struct {
		Elicitations []*mcpsdk.ElicitParams `json:"elicitations"`
	}
	if len(rpcErr.Data) > 0 {
		if err := json.Unmarshal(rpcErr.Data, &data); err != nil {
			return Result{}, &ProtocolError{Code: rpcErr.Code, Message: "URL elicitation required, with unreadable data: " + err.Error()}
		}
	}
	if len(data.Elicitations) == 0 || retry == nil || lc.asker == nil {
		return Result{}, &ProtocolError{Code: rpcErr.Code, Message: clip(rpcErr.Message, maxElicitMessage)}
	}
	for _, p := range data.Elicitations {
		if p == nil || (p.Mode != "" && p.Mode != ElicitURL) || p.URL == "" {
			return Result{}, &ProtocolError{Code: rpcErr.Code, Message: "URL elicitation required, naming something else than a URL"}
		}
		p.Mode = ElicitURL
		res, err := c.elicitFor(ctx, lc, p)
		if err != nil {
			return Result{}, fmt.Errorf("URL elicitation required: %w", err)
		}
		if res.Action != ActionAccept {
			return Result{IsError: true, Text: "the user did not open " + p.URL + " (" + res.Action + "), which the server requires before this tool runs"}, nil
		}
	}
	return retry()
}

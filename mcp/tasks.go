package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Task support of a tool (MCP 2025-11-25, the tool's execution.taskSupport).
const (
	TaskForbidden = "forbidden" // the default: the tool is called as usual
	TaskOptional  = "optional"  // it may run as a task; packbot calls it as usual
	TaskRequired  = "required"  // it must run as a task: packbot does not offer it
)

// taskProbe reads execution.taskSupport from the tools/list results of one session slot. The
// go-sdk v1.8.0 drops the field (its mcp.Tool has no Execution), so the probe reads the raw
// results below the SDK: on the streamable HTTP transport from the HTTP response of a
// tools/list POST (the transport's connection cannot be wrapped: the SDK tells it about the
// session through an unexported method), on stdio and SSE by wrapping the connection.
//
// What it learns is kept per tool name for the slot's life, so that a list the SDK answers
// from its cache still finds it. It is safe for concurrent use.
type taskProbe struct {
	listing atomic.Int32 // lists in progress: HTTP responses are only read while one runs
	waiting atomic.Int32 // len(pending), read without the lock

	mu      sync.Mutex
	support map[string]string   // tool name → taskSupport, as last listed
	pending map[jsonrpc.ID]bool // tools/list requests sent on a wrapped connection
}

// beginList and endList bracket a tools/list (all pages).
func (p *taskProbe) beginList() { p.listing.Add(1) }
func (p *taskProbe) endList()   { p.listing.Add(-1) }

// supportOf returns a tool's taskSupport as last listed ("" when the server said nothing).
func (p *taskProbe) supportOf(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.support[name]
}

// record reads the tools of one tools/list result.
func (p *taskProbe) record(result json.RawMessage) {
	var r struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &r) != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.support == nil {
		p.support = make(map[string]string, len(r.Tools))
	}
	for _, t := range r.Tools {
		ts := ""
		if t.Execution != nil {
			ts = t.Execution.TaskSupport
		}
		p.support[t.Name] = ts
	}
}

// recordMessage reads a JSON-RPC response if it answers a tools/list.
func (p *taskProbe) recordMessage(data []byte) {
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(data, &m) == nil && len(m.Result) > 0 {
		p.record(m.Result)
	}
}

// capture wraps the HTTP response of a tools/list POST (while a list runs) so that its result
// is read as the SDK reads it. Other requests pass untouched, at the cost of an atomic load.
func (p *taskProbe) capture(req *http.Request, resp *http.Response) {
	if p.listing.Load() == 0 || req.Method != http.MethodPost || req.GetBody == nil ||
		resp.StatusCode != http.StatusOK || !isToolsList(req) {
		return
	}
	ct := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Type")))
	resp.Body = &listCapture{rc: resp.Body, probe: p, sse: strings.HasPrefix(ct, "text/event-stream")}
}

// maxListCapture bounds what one tools/list response may make the probe buffer.
const maxListCapture = 32 << 20

func isToolsList(req *http.Request) bool {
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	var m struct {
		Method string `json:"method"`
	}
	ok := json.NewDecoder(io.LimitReader(body, 1<<16)).Decode(&m) == nil && m.Method == "tools/list"
	if err := body.Close(); err != nil {
		return false
	}
	return ok
}

// listCapture passes a response body through, reading the JSON-RPC messages in it: the whole
// body for application/json (at EOF), each complete event for text/event-stream (as soon as it
// has gone through, so before the SDK has decoded it).
type listCapture struct {
	rc    io.ReadCloser
	probe *taskProbe
	sse   bool
	buf   []byte
	over  bool // gave up: the response is larger than maxListCapture
}

func (c *listCapture) Read(b []byte) (int, error) {
	n, err := c.rc.Read(b)
	if !c.over && n > 0 {
		c.buf = append(c.buf, b[:n]...)
		if len(c.buf) > maxListCapture {
			c.over, c.buf = true, nil
		}
	}
	if c.over {
		return n, err
	}
	if c.sse {
		c.events()
	} else if err == io.EOF {
		c.probe.recordMessage(c.buf)
		c.buf = nil
	}
	return n, err
}

// events reads the complete SSE events in the buffer and keeps the incomplete rest.
func (c *listCapture) events() {
	for {
		c.buf = bytes.ReplaceAll(c.buf, []byte("\r\n"), []byte("\n"))
		i := bytes.Index(c.buf, []byte("\n\n"))
		if i < 0 {
			return
		}
		var data []byte
		for line := range bytes.SplitSeq(c.buf[:i], []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			}
		}
		if len(data) > 0 {
			c.probe.recordMessage(data)
		}
		c.buf = c.buf[i+2:]
	}
}

func (c *listCapture) Close() error { return c.rc.Close() }

// probeTransport wraps the connection of a stdio or SSE transport to read tools/list results.
type probeTransport struct {
	mcpsdk.Transport
	probe *taskProbe
}

func (t *probeTransport) Connect(ctx context.Context) (mcpsdk.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &probeConn{Connection: conn, probe: t.probe}, nil
}

// forget drops a pending tools/list request and reports whether it was one.
func (p *taskProbe) forget(id jsonrpc.ID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	listed := p.pending[id]
	delete(p.pending, id)
	p.waiting.Store(int32(len(p.pending)))
	return listed
}

type probeConn struct {
	mcpsdk.Connection
	probe *taskProbe
}

func (c *probeConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.ID.IsValid() {
		c.probe.mu.Lock()
		if c.probe.pending == nil {
			c.probe.pending = make(map[jsonrpc.ID]bool)
		}
		c.probe.pending[req.ID] = true
		c.probe.waiting.Store(int32(len(c.probe.pending)))
		c.probe.mu.Unlock()
		if err := c.Connection.Write(ctx, msg); err != nil {
			c.probe.forget(req.ID)
			return err
		}
		return nil
	}
	return c.Connection.Write(ctx, msg)
}

func (c *probeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && c.probe.waiting.Load() > 0 {
		if c.probe.forget(resp.ID) && resp.Error == nil {
			c.probe.record(resp.Result)
		}
	}
	return msg, err
}

// Interface guards.
var (
	_ mcpsdk.Transport  = (*probeTransport)(nil)
	_ mcpsdk.Connection = (*probeConn)(nil)
	_ io.ReadCloser     = (*listCapture)(nil)
)

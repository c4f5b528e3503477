package demoserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a [Server]. The zero value is usable.
type Options struct {
	// Name and Version are reported to clients at initialization; defaults "packbot-demo-bank"
	// and "dev".
	Name, Version string
	// Logger receives the server's own log lines (money sent, refusals at debug level) and the
	// SDK's warnings and errors. Nil discards them. Over stdio it must not write to the output
	// stream.
	Logger *slog.Logger
	// Now is the clock of the ledger (opening data, transfer times, rates' as-of). Nil means
	// [time.Now].
	Now func() time.Time
	// Token, when set, is the bearer token every HTTP request to /mcp and /sse must carry in
	// "Authorization: Bearer <token>". Stdio is never authenticated.
	Token string
	// Stateless serves /mcp in the SDK's stateless streamable mode, which speaks protocol
	// 2026-07-28 (list_changed reaches clients through subscriptions/listen). The default
	// stateful mode negotiates 2025-11-25 and earlier (list_changed goes on the session's GET
	// stream). SSE is the same in both.
	Stateless bool
	// Writes adds tools shaped like the HollyHR endpoint's writes (prepare_api_write,
	// commit_api_write, request_time_off), which ask the user through form elicitation, and
	// its read-only resources and prompts (docs.go).
	Writes bool
}

// Server is the demo bank's MCP server: one [Ledger] and one tool set shared by every session,
// whatever the transport. All methods are safe for concurrent use.
type Server struct {
	opts   Options
	logger *slog.Logger
	now    func() time.Time
	ledger *Ledger
	mcp    *mcp.Server
	stats  *stats
	// docs are the HR documents and prompts published with the writes (docs.go); nil without.
	docs *docs

	mu    sync.Mutex
	tools map[string]bool

	handlerOnce sync.Once
	handler     http.Handler
}

// New builds a server with the bank's tools and its opening ledger. It starts nothing: serve it
// with [Server.Handler], [Server.RunHTTP] or [Server.RunStdio].
func New(opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "packbot-demo-bank"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{
		opts:   o,
		logger: o.Logger,
		now:    o.Now,
		ledger: NewLedger(o.Now),
		tools:  map[string]bool{},
	}
	s.stats = newStats(s.now().UTC())
	sopts := &mcp.ServerOptions{
		Instructions: "A demo bank ledger with two profiles (acme-treasury, business; alex-morgan, personal), " +
			"balances in EUR, USD and GBP, saved recipients and fixed exchange rates. Amounts are in major units " +
			"with at most two decimals. Look things up with the list_ and get_ tools before acting; " +
			"send_money moves funds and create_invoice records an invoice.",
		Logger:       sdkLogger(o.Logger),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	}
	if o.Writes {
		s.docs = newDocs()
		s.docs.options(sopts)
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: o.Name, Title: "packbot demo bank", Version: o.Version}, sopts)
	s.registerBuiltins()
	if o.Writes {
		s.registerWrites()
		s.registerDocs()
	}
	return s
}

// Ledger returns the books the tools operate on, for callers in the same process.
func (s *Server) Ledger() *Ledger { return s.ledger }

// RunStdio serves one MCP session over newline-delimited JSON-RPC read from in and written to
// out (os.Stdin and os.Stdout for a subprocess server). It returns nil when the client hangs up
// (in reaches EOF, or out is a closed pipe), or ctx's error when ctx is done first. If in is an
// [io.Closer] it is closed on return, which ends the read of a pipe; out is never closed.
func (s *Server) RunStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	rc, ok := in.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(in)
	}
	ss, err := s.mcp.Connect(ctx, &mcp.IOTransport{Reader: rc, Writer: nopWriteCloser{out}}, nil)
	if err != nil {
		return fmt.Errorf("connect stdio session: %w", err)
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }() // ends when the session closes, below at the latest
	select {
	case err := <-ended:
		_ = ss.Close() // a no-op for an ended session, unless in was left open
		if err != nil && !hangUp(err) {
			return fmt.Errorf("stdio session: %w", err)
		}
		return nil
	case <-ctx.Done():
		_ = ss.Close() // the session is abandoned; its close error says nothing new
		if err := <-ended; err != nil {
			s.logger.DebugContext(ctx, "stdio session ended", "err", err)
		}
		return ctx.Err()
	}
}

// RunHTTP serves [Server.Handler] on ln until ctx is done, then closes the listener, ends the
// hanging streams and closes every session of the server. It returns nil after a shutdown
// asked by ctx, or the error that stopped serving.
func (s *Server) RunHTTP(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// Requests derive from ctx, so that its end also ends the long-lived SSE streams.
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }() // ends at hs.Shutdown below
	s.logger.InfoContext(ctx, "demo MCP server listening", "addr", ln.Addr().String(),
		"streamable", "/mcp", "sse", "/sse", "token", s.opts.Token != "")
	var err error
	select {
	case err = <-served:
		err = fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
		// Beyond 5 s: Shutdown closes a connection that never sent a request (a client's
		// spare dial) only once it is 5 s old, so a 5 s deadline could expire on one.
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if serr := hs.Shutdown(shutdownCtx); serr != nil {
			err = fmt.Errorf("shut down http: %w", serr)
		}
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, fmt.Errorf("serve http: %w", serr))
		}
	}
	return errors.Join(err, s.Close())
}

// Close closes every open session (stdio and HTTP alike); clients see their connection end.
// The server can still accept new sessions afterwards. It is safe to call more than once.
func (s *Server) Close() error {
	var errs []error
	for ss := range s.mcp.Sessions() {
		if err := ss.Close(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
			errs = append(errs, fmt.Errorf("close session %s: %w", ss.ID(), err))
		}
	}
	return errors.Join(errs...)
}

// Tool is a tool added at run time with [Server.AddTool], for tests of clients that refresh
// their catalog on notifications/tools/list_changed. Its input is any JSON object.
type Tool struct {
	Name        string
	Description string
	// Handler answers a call with text; an error becomes a tool error. Nil echoes the
	// arguments as JSON.
	Handler func(ctx context.Context, args map[string]any) (string, error)
}

// AddTool adds t, or replaces the tool of the same name (a built-in one included), and
// notifies every connected client with notifications/tools/list_changed. An invalid name (not
// 1–128 of A-Z a-z 0-9 _ - .) panics.
func (s *Server) AddTool(t Tool) {
	if !validToolName(t.Name) {
		panic(fmt.Sprintf("demoserver: invalid tool name %q", t.Name))
	}
	h := t.Handler
	if h == nil {
		h = func(_ context.Context, args map[string]any) (string, error) {
			b, err := json.Marshal(args)
			return string(b), err
		}
	}
	s.mcp.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args := map[string]any{}
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
					res := &mcp.CallToolResult{}
					res.SetError(fmt.Errorf("arguments must be a JSON object: %w", err))
					return res, nil
				}
			}
			text, err := h(ctx, args)
			s.stats.record(t.Name, err)
			res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
			if err != nil {
				res = &mcp.CallToolResult{}
				res.SetError(err)
			}
			return res, nil
		})
	s.trackTool(t.Name, true)
}

// RemoveTools removes the named tools (built-in ones included; unknown names are ignored) and
// notifies every connected client with notifications/tools/list_changed when one was removed.
func (s *Server) RemoveTools(names ...string) {
	s.mcp.RemoveTools(names...)
	for _, n := range names {
		s.trackTool(n, false)
	}
}

// ToolNames returns the names of the tools currently offered, sorted.
func (s *Server) ToolNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.tools))
}

func (s *Server) trackTool(name string, present bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if present {
		s.tools[name] = true
	} else {
		delete(s.tools, name)
	}
}

func validToolName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// Stats counts tool executions since the server started; get_stats returns it. A call refused
// by the input schema never reaches the tool and is not counted.
type Stats struct {
	// Executions counts the successful executions of each tool.
	Executions map[string]int `json:"executions"`
	// ToolErrors counts the executions of each tool that ended in a tool error.
	ToolErrors map[string]int `json:"toolErrors"`
	// SendMoneyExecutions is Executions["send_money"]: the transfers made through the tool.
	SendMoneyExecutions int       `json:"sendMoneyExecutions"`
	TotalExecutions     int       `json:"totalExecutions"`
	StartedAt           time.Time `json:"startedAt"`
}

// Stats returns the execution counts so far. A get_stats call is counted after it answers.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

type stats struct {
	startedAt time.Time

	mu     sync.Mutex
	ok     map[string]int
	failed map[string]int
}

func newStats(startedAt time.Time) *stats {
	return &stats{startedAt: startedAt, ok: map[string]int{}, failed: map[string]int{}}
}

func (st *stats) record(tool string, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err != nil {
		st.failed[tool]++
	} else {
		st.ok[tool]++
	}
}

func (st *stats) snapshot() Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	total := 0
	for _, n := range st.ok {
		total += n
	}
	return Stats{
		Executions:          maps.Clone(st.ok),
		ToolErrors:          maps.Clone(st.failed),
		SendMoneyExecutions: st.ok[ToolSendMoney],
		TotalExecutions:     total,
		StartedAt:           st.startedAt,
	}
}

// hangUp reports whether a stdio session ended because the client went away.
func hangUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, mcp.ErrConnectionClosed)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// sdkLogger passes the SDK's warnings and errors on to logger and drops its per-session info
// chatter, which stateless HTTP would repeat on every request.
func sdkLogger(logger *slog.Logger) *slog.Logger {
	return slog.New(minLevel{logger.Handler().WithAttrs([]slog.Attr{slog.String("component", "mcp-sdk")}), slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// Interface guards.
var (
	_ slog.Handler   = minLevel{}
	_ io.WriteCloser = nopWriteCloser{}
)

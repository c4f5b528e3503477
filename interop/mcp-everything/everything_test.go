package everything_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	everything "github.com/packbot/packbot/interop/mcp-everything"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// timeout bounds each transport's whole run, so that a broken server fails rather than hangs;
// it is not a performance assertion.
const timeout = 2 * time.Minute

// samplingLimit is the pack's token limit on the server's sampling requests.
const samplingLimit = 100

// sampledText is what the test's LLM answers every sampling request with.
const sampledText = "Hola desde el LLM de packbot."

// toolCase is how the test calls one tool: arguments that fit its input schema, what the
// result must say, and what the server must ask packbot's client during the call.
type toolCase struct {
	args string // a JSON object
	// want are substrings of the result's text (packbot's rendering: text as is, images and
	// resources described in brackets).
	want []string
	// structured, when set, is the structuredContent the tool must return (the pool has
	// already held it to the tool's output schema).
	structured string
	// again, when set, is what a second call with the same arguments must say (toggles: on,
	// then off again, so that the session is left as it was).
	again string
	// elicits is the elicitation mode (mcp.ElicitForm or mcp.ElicitURL) in which the tool asks
	// the person the call is made for, once; the test's asker answers. Empty: it must not ask.
	elicits string
	// progress: the tool reports progress, which must reach the asker (tagged with the tool)
	// before the result. Otherwise it must report none.
	progress bool
	// samples: the tool has the pack's LLM answer a prompt, once, within the pack's token limit;
	// the test's sampler answers. Otherwise it must not sample.
	samples bool
	// knownBug, when set, is a packbot bug that makes the call fail today: the result must be a
	// tool error containing knownBug, with nobody asked. Once the bug is fixed the test fails
	// until knownBug is removed, and the rest of the case is asserted.
	knownBug string
}

// calls are the tools packbot calls, on every transport: each must be listed, offered, and
// answer as its case says.
var calls = map[string]toolCase{
	"echo":                  {args: `{"message":"hola, ¿qué tal? 👋"}`, want: []string{"Echo: hola, ¿qué tal? 👋"}},
	"get-sum":               {args: `{"a":2,"b":40}`, want: []string{"The sum of 2 and 40 is 42."}},
	"get-annotated-message": {args: `{"messageType":"success","includeImage":true}`, want: []string{"Operation completed successfully", "[image image/png, "}},
	"get-env":               {args: `{}`, want: []string{`"PATH":`}},
	"get-tiny-image":        {args: `{}`, want: []string{"Here's the image you requested:", "[image image/png, ", "The image above is the MCP logo."}},
	"get-resource-links": {args: `{"count":2}`, want: []string{"Here are 2 resource links",
		"[resource Blob Resource 1 demo://resource/dynamic/blob/1]", "[resource Text Resource 2 demo://resource/dynamic/text/2]"}},
	"get-resource-reference": {args: `{"resourceType":"Text","resourceId":3}`, want: []string{"Returning resource reference for Resource 3:",
		"Resource 3: This is a plaintext resource", "You can access this resource using the URI: demo://resource/dynamic/text/3"}},
	// A data URI: the tool also fetches http(s) URLs, and the test must not need the network.
	"gzip-file-as-resource": {args: `{"name":"packbot.txt.gz","data":"data:text/plain;base64,aG9sYSBwYWNrYm90","outputType":"resource"}`,
		want: []string{"[resource demo://resource/session/packbot.txt.gz]"}},
	"get-structured-content": {args: `{"location":"Chicago"}`, want: []string{"Light rain / drizzle"},
		structured: `{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}`},
	"toggle-simulated-logging":  {args: `{}`, want: []string{"Started simulated, random-leveled logging"}, again: "Stopped simulated logging"},
	"toggle-subscriber-updates": {args: `{}`, want: []string{"Started simulated resource updated notifications"}, again: "Stopped simulated resource updates"},
	// Every call carries a progress token; the server reports each step. The go-sdk hands a
	// notification to its handler asynchronously, and the response directly, so the last
	// step's notification may come after the result (and is then dropped): two steps half a
	// second apart leave the first one ample time.
	"trigger-long-running-operation": {args: `{"duration":1,"steps":2}`, progress: true,
		want: []string{"Long running operation completed. Duration: 1 seconds, Steps: 2."}},
	// A form of every field type; the asker fills each field from its schema (see answer).
	// Its two multi-select enum fields (type array, items with enum or anyOf) are answered with
	// their first value.
	"trigger-elicitation-request": {args: `{}`, elicits: mcp.ElicitForm,
		want: []string{"✅ User provided the requested information!", "- Name: x", "- Agreed to terms: true",
			"- Email: ana@example.com", "- Homepage: https://example.com", "- Birthdate: 2000-01-31",
			"- Favorite Integer: 1", "- Favorite Number: 0", `"action": "accept"`}},
	// The request path (errorPath false): an elicitation/create in URL mode, which the asker
	// accepts. The error path is testURLElicitationRequired's.
	"trigger-url-elicitation": {args: `{"url":"https://example.com/consent","elicitationId":"packbot-interop-1"}`, elicits: mcp.ElicitURL,
		want: []string{"✅ User completed the URL elicitation flow.", "Elicitation ID: packbot-interop-1", "URL: https://example.com/consent"}},
	// Listed only because the pack entry allows sampling (and the pool has a sampler); asks for
	// more tokens than the pack's limit, which wins.
	"trigger-sampling-request": {args: `{"prompt":"Say hello","maxTokens":500}`, samples: true,
		want: []string{"LLM sampling result:", sampledText, `"model": "packbot-test-llm"`}},
}

// samplingTools are the tools server-everything lists only to a client that declares sampling:
// packbot does for a server whose pack entry enables sampling, when the pool has a sampler.
var samplingTools = []string{"trigger-sampling-request"}

// notOffered are the tools server-everything lists that packbot does not offer, with the reason
// (a substring of it) that `packbot mcp smoke` shows.
var notOffered = map[string]string{
	// A task tool (SEP-1686): it only runs task-augmented. With ambiguous: true it would also
	// elicit a clarification.
	"simulate-research-query": "requires task-augmented execution (execution.taskSupport: required), which packbot does not support",
}

// notListed are the tools server-everything registers only for a client capability that
// packbot does not declare, with that capability: the server does not list them to packbot.
var notListed = map[string]string{
	// packbot has no file system to share.
	"get-roots-list": "roots",
	// The server sends its elicitation or sampling request task-augmented and polls the
	// client's tasks; the go-sdk v1.8.0 client cannot run client-side tasks.
	"trigger-elicitation-request-async": "tasks.requests.elicitation.create (elicitation run as a client-side task)",
	"trigger-sampling-request-async":    "tasks.requests.sampling.createMessage (sampling run as a client-side task)",
}

// TestEverything runs server-everything over stdio, SSE and streamable HTTP, and holds packbot's
// MCP client to every tool it lists: mcp.Smoke reports what packbot would offer and what not (and
// why), and an mcp.Pool calls every offered tool with valid arguments, answering the server's
// elicitations, progress and sampling requests as the bot would.
func TestEverything(t *testing.T) {
	for _, tr := range []string{packs.TransportStdio, packs.TransportSSE, packs.TransportStreamableHTTP} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			testEverything(t, tr)
		})
	}
}

func testEverything(t *testing.T, transport string) {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	srv := everything.Server(t, "everything", transport)
	srv.Sampling = &packs.Sampling{Enabled: true, MaxTokens: samplingLimit}

	// What `packbot mcp smoke` shows. It has no LLM to sample with, so it does not declare
	// sampling even though the pack entry allows it.
	rep, err := mcp.Smoke(ctx, srv, mcp.SmokeOptions{})
	if err != nil {
		t.Fatalf("smoke: %v", err)
	}
	// go-sdk v1.8.0 proposes 2026-07-28 first; the server's SDK speaks 2025-11-25 at most.
	if rep.Protocol != "2025-11-25" || rep.ServerName != everything.ServerName {
		t.Errorf("smoke: protocol %q, server %q; want 2025-11-25, %s", rep.Protocol, rep.ServerName, everything.ServerName)
	}
	offered := make(map[string]mcp.Tool, len(rep.Tools))
	for _, tl := range rep.Tools {
		offered[tl.Name] = tl
	}
	leftOut := make(map[string]string, len(rep.LeftOut))
	for _, l := range rep.LeftOut {
		leftOut[l.Name] = l.Reason
	}
	if rep.Listed != len(offered)+len(leftOut) {
		t.Errorf("smoke: %d listed, %d offered, %d left out", rep.Listed, len(offered), len(leftOut))
	}
	checkClassified(t, offered, leftOut, false)

	// The pool, whose client declares sampling for this server, calls every tool it offers
	// (the first call opens the shared session): what the smoke test offered, and the sampling
	// tools.
	llm := &sampler{}
	p, err := mcp.New(mcp.Config{Servers: []packs.Server{srv}, Sampler: llm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, err := p.Call(ctx, mcp.Call{Server: srv.Name, Tool: "echo", Arguments: json.RawMessage(`{"message":"open"}`)}); err != nil {
		t.Fatalf("open the pool's session: %v", err)
	}
	cat, _ := p.Catalog()
	want := slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(offered)), samplingTools...)))
	got := toolNames(cat.Server(srv.Name))
	if !slices.Equal(got, want) {
		t.Errorf("the pool offers %v; want what the smoke test offered and %v: %v", got, samplingTools, want)
	}
	for _, name := range got {
		tc, ok := calls[name]
		if !ok {
			t.Errorf("server-everything %s lists %s to the pool, which this test does not know: add it to calls", everything.Version, name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			callTool(ctx, t, p, llm, srv.Name, name, tc)
		})
	}
	if tl, _ := cat.Lookup(srv.Name, "get-structured-content"); len(tl.OutputSchema) == 0 {
		t.Error("get-structured-content: the catalog lost its output schema")
	}

	t.Run("url-elicitation-required", func(t *testing.T) { testURLElicitationRequired(ctx, t, p, srv.Name) })
	t.Run("sampling-off", func(t *testing.T) { testSamplingOff(ctx, t, srv) })
}

// checkClassified holds the pinned server's tool list to the tables: every tool listed is in
// exactly the table that says how it is handled, and every table entry is listed as it says.
// sampling says whether the client declared sampling.
func checkClassified(t *testing.T, offered map[string]mcp.Tool, leftOut map[string]string, sampling bool) {
	t.Helper()
	for name, reason := range leftOut {
		want, ok := notOffered[name]
		switch {
		case !ok:
			t.Errorf("%s is not offered (%s): call it, or add it to notOffered with that reason", name, reason)
		case !strings.Contains(reason, want):
			t.Errorf("%s is not offered because %q, want %q", name, reason, want)
		}
	}
	for name := range notOffered {
		if _, ok := leftOut[name]; !ok {
			_, listed := offered[name]
			t.Errorf("%s: want it not offered (%s); offered: %v", name, notOffered[name], listed)
		}
	}
	for name := range offered {
		if _, ok := calls[name]; !ok {
			t.Errorf("server-everything %s lists %s, which this test does not know: add it to calls", everything.Version, name)
		}
	}
	for name := range calls {
		_, listed := offered[name]
		if want := sampling || !slices.Contains(samplingTools, name); listed != want {
			t.Errorf("%s: offered %v, want %v (client declares sampling: %v)", name, listed, want, sampling)
		}
	}
	for name, capability := range notListed {
		_, o := offered[name]
		_, l := leftOut[name]
		if o || l {
			t.Errorf("%s is listed: server-everything %s lists it only to a client that declares %s, which packbot does not; "+
				"packbot's declared client capabilities changed: move it to calls or notOffered", name, everything.Version, capability)
		}
	}
}

func callTool(ctx context.Context, t *testing.T, p *mcp.Pool, s *sampler, server, name string, tc toolCase) {
	t.Helper()
	a := &asker{}
	ctx = mcp.WithAsker(ctx, a)
	before := len(s.requests())
	res, err := p.Call(ctx, mcp.Call{Server: server, Tool: name, Arguments: json.RawMessage(tc.args)})
	if err != nil {
		t.Fatalf("call %s %s: %v", name, tc.args, err)
	}
	if tc.knownBug != "" {
		if !res.IsError || !strings.Contains(res.Text, tc.knownBug) {
			t.Fatalf("call %s %s: want the known bug's tool error %q, got %+v: fixed? remove knownBug from its case", name, tc.args, tc.knownBug, res)
		}
		t.Logf("call %s: known bug: %s", name, tc.knownBug)
		checkAsked(t, a, s.requests()[before:], server, name, toolCase{})
		return
	}
	if res.IsError {
		t.Fatalf("call %s %s: tool error: %s", name, tc.args, res.Text)
	}
	for _, w := range tc.want {
		if !strings.Contains(res.Text, w) {
			t.Errorf("call %s: result lacks %q:\n%s", name, w, res.Text)
		}
	}
	if tc.structured != "" {
		var got, want any
		if err := json.Unmarshal(res.Structured, &got); err != nil {
			t.Errorf("call %s: structured content %q: %v", name, res.Structured, err)
		}
		if err := json.Unmarshal([]byte(tc.structured), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("call %s: structured content %s, want %s", name, res.Structured, tc.structured)
		}
	}
	checkAsked(t, a, s.requests()[before:], server, name, tc)
	if tc.again == "" {
		return
	}
	res, err = p.Call(ctx, mcp.Call{Server: server, Tool: name, Arguments: json.RawMessage(tc.args)})
	if err != nil || res.IsError || !strings.Contains(res.Text, tc.again) {
		t.Errorf("call %s again: %v, %+v; want %q", name, err, res, tc.again)
	}
}

// checkAsked holds what the server asked during a call (seen by the asker, and sampling
// requests) to the tool's case.
func checkAsked(t *testing.T, a *asker, sampled []mcp.SampleRequest, server, tool string, tc toolCase) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case tc.elicits == "" && len(a.elicited) > 0:
		t.Errorf("call %s: the server asked %d question(s): %+v", tool, len(a.elicited), a.elicited)
	case tc.elicits != "" && len(a.elicited) != 1:
		t.Errorf("call %s: the server asked %d question(s), want one", tool, len(a.elicited))
	case tc.elicits != "":
		e := a.elicited[0]
		if e.Server != server || e.Tool != tool || e.Mode != tc.elicits || e.Message == "" {
			t.Errorf("call %s: elicitation %+v; want server %s, tool %s, mode %s, a message", tool, e, server, tool, tc.elicits)
		}
		if e.Mode == mcp.ElicitURL && (e.URL == "" || e.ID == "" || e.Done == nil) {
			t.Errorf("call %s: URL elicitation %+v lacks its URL, ID or Done", tool, e)
		}
	}
	if tc.progress && len(a.progress) == 0 {
		t.Errorf("call %s: no progress reached the asker", tool)
	}
	if tc.progress {
		t.Logf("call %s: %d progress notification(s) reached the asker before the result", tool, len(a.progress))
	}
	if !tc.progress && len(a.progress) > 0 {
		t.Errorf("call %s: progress reached the asker: %+v", tool, a.progress)
	}
	for _, pr := range a.progress {
		if pr.Server != server || pr.Tool != tool || pr.Progress <= 0 || pr.Progress > pr.Total {
			t.Errorf("call %s: progress %+v; want server %s, tool %s, 0 < progress <= total", tool, pr, server, tool)
		}
	}
	want := 0
	if tc.samples {
		want = 1
	}
	if len(sampled) != want || len(a.sampled) != want {
		t.Errorf("call %s: %d sampling request(s), %d told to the asker; want %d", tool, len(sampled), len(a.sampled), want)
		return
	}
	if want == 0 {
		return
	}
	if a.sampled[0] != server {
		t.Errorf("call %s: the asker was told that %q sampled, want %s", tool, a.sampled[0], server)
	}
	// The server asks for 500 tokens: the pack's limit wins.
	r := sampled[0]
	if r.Server != server || r.MaxTokens != samplingLimit || r.SystemPrompt != "You are a helpful test server." ||
		len(r.Messages) != 1 || r.Messages[0].Role != "user" || !strings.Contains(r.Messages[0].Text, "Say hello") {
		t.Errorf("call %s: sampling request %+v; want server %s, at most %d tokens, the server's system prompt and prompt", tool, r, server, samplingLimit)
	}
}

// testURLElicitationRequired calls trigger-url-elicitation on its error path: the server
// answers the call with JSON-RPC error -32042 (URLElicitationRequired), whose data holds a
// prerequisite URL elicitation. packbot shows the person that URL, and once they accepted it
// makes the call again, once; server-everything recognises the retry and asks, during it, for
// the URL the call named (its request path), which reaches the same person.
func testURLElicitationRequired(ctx context.Context, t *testing.T, p *mcp.Pool, server string) {
	a := &asker{}
	args := `{"url":"https://example.com/consent","elicitationId":"packbot-interop-2","errorPath":true}`
	res, err := p.Call(mcp.WithAsker(ctx, a), mcp.Call{Server: server, Tool: "trigger-url-elicitation", Arguments: json.RawMessage(args)})
	if err != nil || res.IsError || !strings.Contains(res.Text, "User completed the URL elicitation flow") {
		t.Fatalf("call with errorPath: %+v, %v; want the retried call's result", res, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.elicited) != 2 || a.elicited[0].Mode != mcp.ElicitURL || a.elicited[0].URL != "https://modelcontextprotocol.io" ||
		a.elicited[1].Mode != mcp.ElicitURL || a.elicited[1].URL != "https://example.com/consent" || a.elicited[1].ID != "packbot-interop-2" {
		t.Fatalf("the asker was asked %+v; want the prerequisite URL, then the call's", a.elicited)
	}
	// Without anyone to ask, the server's answer stands as a protocol error, and the session
	// survives it.
	_, err = p.Call(ctx, mcp.Call{Server: server, Tool: "trigger-url-elicitation",
		Arguments: json.RawMessage(`{"url":"https://example.com/other","elicitationId":"packbot-interop-3","errorPath":true}`)})
	var perr *mcp.ProtocolError
	if !errors.As(err, &perr) || perr.Code != -32042 || !errors.Is(err, mcp.ErrProtocol) || mcp.Classify(err) != "protocol error" {
		t.Fatalf("call with errorPath and no asker: %v; want a protocol error with JSON-RPC code -32042", err)
	}
	if res, err := p.Call(ctx, mcp.Call{Server: server, Tool: "get-sum", Arguments: json.RawMessage(`{"a":1,"b":1}`)}); err != nil || res.IsError {
		t.Errorf("call after the -32042 error: %+v, %v", res, err)
	}
}

// testSamplingOff opens pools on which server-everything may not sample: the pack entry does
// not enable sampling, or the pool has no sampler. The client then does not declare sampling,
// so the server does not list trigger-sampling-request, and a call to it is an unknown tool.
func testSamplingOff(ctx context.Context, t *testing.T, srv packs.Server) {
	for _, c := range []struct {
		name     string
		sampling *packs.Sampling
		sampler  bool
	}{
		{"not-enabled", &packs.Sampling{Enabled: false, MaxTokens: samplingLimit}, true},
		{"absent", nil, true},
		{"no-sampler", srv.Sampling, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, sm := srv, &sampler{}
			s.Sampling = c.sampling
			cfg := mcp.Config{Servers: []packs.Server{s}}
			if c.sampler {
				cfg.Sampler = sm
			}
			p, err := mcp.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if res, err := p.Call(ctx, mcp.Call{Server: s.Name, Tool: "get-sum", Arguments: json.RawMessage(`{"a":1,"b":2}`)}); err != nil || res.IsError {
				t.Fatalf("call get-sum: %+v, %v", res, err)
			}
			cat, _ := p.Catalog()
			got := toolNames(cat.Server(s.Name))
			for _, name := range samplingTools {
				if slices.Contains(got, name) {
					t.Errorf("%s is offered without sampling: %v", name, got)
				}
			}
			if len(got) != len(calls)-len(samplingTools) {
				t.Errorf("offered %d tools, want %d: %v", len(got), len(calls)-len(samplingTools), got)
			}
			res, err := p.Call(ctx, mcp.Call{Server: s.Name, Tool: "trigger-sampling-request", Arguments: json.RawMessage(calls["trigger-sampling-request"].args)})
			if !errors.Is(err, mcp.ErrUnknownTool) {
				t.Errorf("call trigger-sampling-request: %+v, %v; want %v", res, err, mcp.ErrUnknownTool)
			}
			if r := sm.requests(); len(r) > 0 {
				t.Errorf("the sampler was asked %+v", r)
			}
		})
	}
}

// asker answers as a person who accepts everything: a form with each field filled from its
// schema (see answer), a URL as opened. It records what it was asked and told.
type asker struct {
	mu       sync.Mutex
	elicited []mcp.Elicitation
	progress []mcp.Progress
	sampled  []string
}

func (a *asker) Elicit(_ context.Context, e mcp.Elicitation) (mcp.ElicitResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.elicited = append(a.elicited, e)
	if e.Mode == mcp.ElicitURL {
		return mcp.ElicitResult{Action: mcp.ActionAccept}, nil
	}
	content := make(map[string]any, len(e.Fields))
	for _, f := range e.Fields {
		content[f.Name] = answer(f)
	}
	return mcp.ElicitResult{Action: mcp.ActionAccept, Content: content}, nil
}

func (a *asker) Progress(_ context.Context, p mcp.Progress) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.progress = append(a.progress, p)
}

func (a *asker) Sampled(_ context.Context, server string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sampled = append(a.sampled, server)
}

// answer fills a form field from its schema: an enum's first value, true, a number's minimum
// (else 1), a string's default (else a value of its format, else "x").
func answer(f mcp.ElicitField) any {
	switch {
	case f.Type == mcp.FieldArray:
		return []any{f.Enum[0]}
	case len(f.Enum) > 0:
		return f.Enum[0]
	case f.Type == mcp.FieldBoolean:
		return true
	case f.Type == mcp.FieldNumber || f.Type == mcp.FieldInteger:
		if f.Min != nil {
			return *f.Min
		}
		return 1
	}
	if s, ok := f.Default.(string); ok {
		return s
	}
	switch f.Format {
	case "email":
		return "ana@example.com"
	case "uri":
		return "https://example.com"
	case "date":
		return "2000-01-31"
	case "date-time":
		return "2000-01-31T12:00:00Z"
	}
	return "x"
}

// sampler is the pack's LLM: it answers every prompt with sampledText, and records the requests.
type sampler struct {
	mu   sync.Mutex
	reqs []mcp.SampleRequest
}

func (s *sampler) Sample(_ context.Context, r mcp.SampleRequest) (mcp.SampleResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
	return mcp.SampleResult{Text: sampledText, Model: "packbot-test-llm"}, nil
}

func (s *sampler) requests() []mcp.SampleRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func toolNames(tools []mcp.Tool) []string {
	out := make([]string, 0, len(tools))
	for _, tl := range tools {
		out = append(out, tl.Name)
	}
	return out
}

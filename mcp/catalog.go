package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/packs/namecheck"
)

// Tool is one tool of one server, as the catalog offers it to agents.
type Tool struct {
	Server      string
	Name        string
	Description string
	// InputSchema is the tool's JSON Schema for its arguments (always a JSON object whose type is
	// "object": tools with anything else are left out of the catalog).
	InputSchema json.RawMessage
	// ReadOnly is the server's readOnlyHint annotation (a hint, never trusted for access).
	ReadOnly bool
	// Title is the tool's display name (its title, else its annotations' title), if any.
	Title string
	// Annotations are the tools/list annotations as the server gave them (hints only, never
	// trusted for access); nil when there were none.
	Annotations *Annotations
	// OutputSchema is the JSON Schema of the tool's structuredContent, if it declares one;
	// [Pool.Call] checks every structured result against it.
	OutputSchema json.RawMessage
	// TaskSupport is the tool's execution.taskSupport ("" when not given, TaskForbidden or
	// TaskOptional: a tool that requires tasks is not offered).
	TaskSupport string

	output *jsonschema.Resolved // OutputSchema, ready to validate with
}

// Annotations are the hints a server gives about a tool (MCP ToolAnnotations). Nil pointers are
// hints the server did not give.
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  bool   `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// LeftOut is a tool a server listed that is not offered, and why.
type LeftOut struct {
	Server, Name, Reason string
}

// Catalog is a snapshot of every tool the pool knows, with the version that changes whenever
// the set changes (a server connected, reconnected with other tools, or sent list_changed, or a
// user-controlled server was discovered). Agents built from one version stay valid until the
// version moves.
type Catalog struct {
	Version uint64
	// Tools are sorted by server, then name.
	Tools []Tool
	// Surfaces are the servers' prompts, resources, templates and skills, by server, as the
	// last session of each listed them (for a user-controlled server, some user's session:
	// what a user may do is listed again through their own, see [Pool.Surface]). Read only.
	Surfaces map[string]Surface
}

// Server returns the tools of one server.
func (c Catalog) Server(name string) []Tool {
	var out []Tool
	for _, t := range c.Tools {
		if t.Server == name {
			out = append(out, t)
		}
	}
	return out
}

// Lookup finds a tool.
func (c Catalog) Lookup(server, tool string) (Tool, bool) {
	i, ok := slices.BinarySearchFunc(c.Tools, Tool{Server: server, Name: tool}, compareTools)
	if !ok {
		return Tool{}, false
	}
	return c.Tools[i], true
}

func compareTools(a, b Tool) int {
	if c := strings.Compare(a.Server, b.Server); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// catalog holds the tools per server and broadcasts changes.
//
// Each server's tools belong to the pool's entry for it (its owner): only sessions of that entry
// set them, so that a session of a server that a pack update removed or replaced, listing late,
// cannot bring its tools back.
type catalog struct {
	mu      sync.Mutex
	version uint64
	servers map[string][]Tool
	// surfaces are the servers' listings besides tools (context.go), by server.
	surfaces map[string]Surface
	owners   map[string]*entry
	stale    map[string]bool // tools of a replaced entry, kept until its successor lists
	snap     Catalog         // cached snapshot of the current version
	changed  chan struct{}   // closed (and replaced) on every version bump
}

func newCatalog() *catalog {
	return &catalog{servers: make(map[string][]Tool), surfaces: make(map[string]Surface), owners: make(map[string]*entry),
		stale: make(map[string]bool), changed: make(chan struct{})}
}

// set replaces the tools of a server, when owner owns them, and bumps the version when they
// differ.
func (c *catalog) set(server string, owner *entry, tools []Tool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners[server] != owner {
		return false
	}
	delete(c.stale, server)
	old, had := c.servers[server]
	if had && slices.EqualFunc(old, tools, sameTool) {
		return false
	}
	c.servers[server] = tools
	c.bumpLocked()
	return true
}

// known reports whether a server's tools were discovered (by a session of its current entry).
func (c *catalog) known(server string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.servers[server]
	return ok && !c.stale[server]
}

// lookup returns a server's tool: known is false while its tools are not discovered (see
// [catalog.known]), ok whether the tool is among those offered.
func (c *catalog) lookup(server, tool string) (t Tool, known, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tools, had := c.servers[server]
	if !had || c.stale[server] {
		return Tool{}, false, false
	}
	for _, t := range tools {
		if t.Name == tool {
			return t, true, true
		}
	}
	return Tool{}, true, false
}

// own hands a server's tools to owner. Tools listed under a previous owner stay offered, as stale:
// they count as unknown (see [catalog.known]) until a session of owner lists them again.
func (c *catalog) own(server string, owner *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.owners[server]; ok && prev == owner {
		return
	}
	c.owners[server] = owner
	if _, had := c.servers[server]; had {
		c.stale[server] = true
	}
}

// drop removes a server and its tools, and bumps the version when it had tools.
func (c *catalog) drop(server string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.owners, server)
	delete(c.stale, server)
	_, hadSurface := c.surfaces[server]
	delete(c.surfaces, server)
	if _, had := c.servers[server]; !had && !hadSurface {
		return false
	}
	delete(c.servers, server)
	c.bumpLocked()
	return true
}

// narrow keeps only the tools of a server that keep admits (a narrower allowlist), when owner
// owns them, and bumps the version when that leaves some out.
func (c *catalog) narrow(server string, owner *entry, keep func(string) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.servers[server]
	if !had || c.owners[server] != owner {
		return false
	}
	tools := slices.DeleteFunc(slices.Clone(old), func(t Tool) bool { return !keep(t.Name) })
	if len(tools) == len(old) {
		return false
	}
	c.servers[server] = tools
	c.bumpLocked()
	return true
}

// markStale marks a server's tools as needing a new listing (see [catalog.own]).
func (c *catalog) markStale(server string, owner *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, had := c.servers[server]; had && c.owners[server] == owner {
		c.stale[server] = true
	}
}

func (c *catalog) bumpLocked() {
	c.version++
	all := make([]Tool, 0, len(c.snap.Tools)+8)
	for _, ts := range c.servers {
		all = append(all, ts...)
	}
	slices.SortFunc(all, compareTools)
	c.snap = Catalog{Version: c.version, Tools: all, Surfaces: maps.Clone(c.surfaces)}
	close(c.changed)
	c.changed = make(chan struct{})
}

// setSurface replaces the listing besides tools of a server, when owner owns it, and bumps the
// version when it differs.
func (c *catalog) setSurface(server string, owner *entry, s Surface) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners[server] != owner {
		return false
	}
	if old, had := c.surfaces[server]; had && reflect.DeepEqual(old, s) {
		return false
	}
	c.surfaces[server] = s
	c.bumpLocked()
	return true
}

func (c *catalog) snapshot() (Catalog, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap, c.changed
}

func sameTool(a, b Tool) bool {
	return a.Server == b.Server && a.Name == b.Name && a.Description == b.Description &&
		a.ReadOnly == b.ReadOnly && string(a.InputSchema) == string(b.InputSchema) &&
		a.Title == b.Title && string(a.OutputSchema) == string(b.OutputSchema) &&
		a.TaskSupport == b.TaskSupport && sameAnnotations(a.Annotations, b.Annotations)
}

func sameAnnotations(a, b *Annotations) bool {
	if a == nil || b == nil {
		return a == b
	}
	eq := func(x, y *bool) bool { return (x == nil && y == nil) || (x != nil && y != nil && *x == *y) }
	return a.Title == b.Title && a.ReadOnlyHint == b.ReadOnlyHint && a.IdempotentHint == b.IdempotentHint &&
		eq(a.DestructiveHint, b.DestructiveHint) && eq(a.OpenWorldHint, b.OpenWorldHint)
}

// admitAll turns the tools a server listed into catalog entries: the allowlist applies, tools
// with an invalid name, input schema or output schema are left out, and so are tools that
// require task-augmented execution (taskSupport gives a tool's execution.taskSupport; nil means
// none known); duplicates keep the first, and at most limit remain. It also returns the tools
// left out, with the reason (each logged, up to ten).
func admitAll(log *slog.Logger, s *packs.Server, listed []*mcpsdk.Tool, limit int, taskSupport func(string) string) ([]Tool, []LeftOut) {
	out := make([]Tool, 0, min(len(listed), limit))
	var left []LeftOut
	seen := make(map[string]bool, len(listed))
	for _, t := range listed {
		if t == nil || !s.Allowed(t.Name) || seen[t.Name] {
			continue
		}
		tool, err := toTool(s.Name, t)
		if err == nil && taskSupport != nil {
			tool.TaskSupport = taskSupport(t.Name)
			if tool.TaskSupport == TaskRequired {
				err = errTaskRequired
			}
		}
		if err != nil {
			left = append(left, LeftOut{Server: s.Name, Name: truncate(t.Name, 128), Reason: err.Error()})
			if len(left) <= 10 {
				log.Warn("MCP tool left out", "server", s.Name, "tool", truncate(t.Name, 80), "error", err)
			}
			continue
		}
		if len(out) == limit {
			log.Warn("MCP server lists too many tools; keeping the first ones (narrow it with the server's allowlist in the pack)",
				"server", s.Name, "listed", len(listed), "kept", limit)
			break
		}
		seen[t.Name] = true
		out = append(out, tool)
	}
	if len(left) > 10 {
		log.Warn("MCP tools left out", "server", s.Name, "count", len(left))
	}
	out, left = gate(log, s, listed, out, left)
	slices.SortFunc(out, compareTools)
	return out, left
}

// gate checks the pack's rules against every tool the server listed ([namecheck.Gate]): a name
// that matches no tool is logged; when a rule that restricts access (an approval policy) names a
// tool the server lacks, the real tool would run ungated, so none of the server's tools is
// offered (they are left out with the reason) until the pack is fixed.
func gate(log *slog.Logger, s *packs.Server, listed []*mcpsdk.Tool, out []Tool, left []LeftOut) ([]Tool, []LeftOut) {
	names := make([]string, 0, len(listed))
	for _, t := range listed {
		if t != nil {
			names = append(names, t.Name)
		}
	}
	fs, err := namecheck.Gate(s, names)
	for _, f := range fs {
		if !f.Blocking {
			log.Warn("MCP pack rule names a tool the server does not have", "server", s.Name, "problem", f.String())
		}
	}
	if err == nil {
		return out, left
	}
	log.Error("MCP server's tools not offered: a pack rule that restricts access names a tool the server does not have",
		"server", s.Name, "err", err, "fix", "correct the name in the pack (pack validate --connect shows it) and apply it")
	for _, t := range out {
		left = append(left, LeftOut{Server: s.Name, Name: t.Name, Reason: err.Error()})
	}
	return out[:0], left
}

// errTaskRequired is why a tool that requires task-augmented execution is not offered.
var errTaskRequired = errors.New("requires task-augmented execution (execution.taskSupport: required), which packbot does not support")

// toTool checks a listed tool and builds its catalog entry (without task support).
func toTool(server string, t *mcpsdk.Tool) (Tool, error) {
	schema, err := checkSchema(t)
	if err != nil {
		return Tool{}, err
	}
	tool := Tool{Server: server, Name: t.Name, Description: t.Description, InputSchema: schema, Title: t.Title}
	if a := t.Annotations; a != nil {
		tool.ReadOnly = a.ReadOnlyHint
		tool.Annotations = &Annotations{Title: a.Title, ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint,
			IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
		if tool.Title == "" {
			tool.Title = a.Title
		}
	}
	if t.OutputSchema != nil {
		tool.OutputSchema, tool.output, err = checkOutputSchema(t.OutputSchema)
		if err != nil {
			return Tool{}, err
		}
	}
	return tool, nil
}

// checkOutputSchema parses and resolves a tool's output schema, and returns it as JSON.
func checkOutputSchema(v any) (json.RawMessage, *jsonschema.Resolved, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("output schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, nil, fmt.Errorf("output schema is not a JSON Schema object: %w", err)
	}
	res, err := s.Resolve(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("output schema: %w", err)
	}
	norm, err := json.Marshal(&s)
	if err != nil {
		return nil, nil, fmt.Errorf("output schema: %w", err)
	}
	return norm, res, nil
}

// maxSchemaError bounds the validation error a tool result carries to the LLM.
const maxSchemaError = 500

// checkOutput holds a tool's result to its output schema: a result that is not an error and
// lacks structured content, or whose structured content does not match, becomes a tool error
// that says so (the structured content is kept for the audit).
func checkOutput(t Tool, res Result) Result {
	if t.output == nil || res.IsError {
		return res
	}
	if res.Structured == nil {
		res.IsError = true
		res.Text = fmt.Sprintf("The tool %s declares an output schema but returned no structured content; its result cannot be trusted.", t.Name)
		return res
	}
	var v any
	err := json.Unmarshal(res.Structured, &v)
	if err == nil {
		err = t.output.Validate(v)
	}
	if err != nil {
		res.IsError = true
		res.Text = fmt.Sprintf("The tool %s returned a structured result that does not match its output schema, so it was not used: %s",
			t.Name, truncate(err.Error(), maxSchemaError))
	}
	return res
}

// checkSchema validates a tool's name and input schema and returns the schema as JSON.
func checkSchema(t *mcpsdk.Tool) (json.RawMessage, error) {
	if !validToolName(t.Name) {
		return nil, fmt.Errorf("invalid tool name (1–128 characters of A–Z, a–z, 0–9, _, -, .)")
	}
	raw, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("input schema is not a JSON Schema object: %w", err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("input schema type is %q, must be \"object\"", s.Type)
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	// Offer the schema as parsed (keywords in their canonical spelling), not as received.
	norm, err := json.Marshal(&s)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return norm, nil
}

// validToolName follows the MCP naming guidance (and what LLM function names accept).
func validToolName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		default:
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

package mcp

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/packs"
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
}

// Catalog is a snapshot of every tool the pool knows, with the version that changes whenever
// the set changes (a server connected, reconnected with other tools, or sent list_changed, or a
// user-controlled server was discovered). Agents built from one version stay valid until the
// version moves.
type Catalog struct {
	Version uint64
	// Tools are sorted by server, then name.
	Tools []Tool
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
type catalog struct {
	mu      sync.Mutex
	version uint64
	servers map[string][]Tool
	snap    Catalog       // cached snapshot of the current version
	changed chan struct{} // closed (and replaced) on every version bump
}

func newCatalog() *catalog {
	return &catalog{servers: make(map[string][]Tool), changed: make(chan struct{})}
}

// set replaces the tools of a server, and bumps the version when they differ.
func (c *catalog) set(server string, tools []Tool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.servers[server]
	if had && slices.EqualFunc(old, tools, sameTool) {
		return false
	}
	c.servers[server] = tools
	c.bumpLocked()
	return true
}

// known reports whether a server's tools were ever discovered.
func (c *catalog) known(server string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.servers[server]
	return ok
}

func (c *catalog) bumpLocked() {
	c.version++
	all := make([]Tool, 0, len(c.snap.Tools)+8)
	for _, ts := range c.servers {
		all = append(all, ts...)
	}
	slices.SortFunc(all, compareTools)
	c.snap = Catalog{Version: c.version, Tools: all}
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *catalog) snapshot() (Catalog, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap, c.changed
}

func sameTool(a, b Tool) bool {
	return a.Server == b.Server && a.Name == b.Name && a.Description == b.Description &&
		a.ReadOnly == b.ReadOnly && string(a.InputSchema) == string(b.InputSchema)
}

// admit turns the tools a server listed into catalog entries: the allowlist applies, tools with
// an invalid name or input schema are left out (with a warning naming them), duplicates keep the
// first, and at most limit remain.
func admit(log *slog.Logger, s *packs.Server, listed []*mcpsdk.Tool, limit int) []Tool {
	out := make([]Tool, 0, min(len(listed), limit))
	seen := make(map[string]bool, len(listed))
	skipped := 0
	for _, t := range listed {
		if t == nil || !s.Allowed(t.Name) || seen[t.Name] {
			continue
		}
		schema, err := checkSchema(t)
		if err != nil {
			skipped++
			if skipped <= 10 {
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
		ro := t.Annotations != nil && t.Annotations.ReadOnlyHint
		out = append(out, Tool{Server: s.Name, Name: t.Name, Description: t.Description, InputSchema: schema, ReadOnly: ro})
	}
	if skipped > 10 {
		log.Warn("MCP tools left out", "server", s.Name, "count", skipped)
	}
	slices.SortFunc(out, compareTools)
	return out
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

package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/rbac"
)

// The model's own resource reads: a pack may give the agent one built-in tool per server
// (resourceAccess.modelRead, off by default) that reads the resources of that server the user
// may read. It is offered only when the user may read some resource there; every read is
// decided again for the URI asked.

// readResourceTool is the Tool of the built-in tool's toolRef: no MCP tool is named so.
const readResourceTool = "\x00read_resource"

// maxReadable bounds the URIs the tool's description lists.
const maxReadable = 30

var readSchema = json.RawMessage(`{"type":"object","properties":{"uri":{"type":"string","description":"The resource's URI (a listed one, or one a listed template expands to)"}},"required":["uri"]}`)

// addReadTools adds the built-in read tool of each server that allows it, with the resources
// the caller may read in its description.
func addReadTools(e *Engine, c rbac.Caller, cat mcp.Catalog, configured []string, ts *toolSet) {
	if e.ctxsrc == nil {
		return
	}
	for i := range e.pack.MCP.Servers {
		srv := &e.pack.MCP.Servers[i]
		if !srv.Enabled || !srv.ModelReads() || (srv.UserControlled() && !slices.Contains(configured, srv.Name)) {
			continue
		}
		surf := cat.Surfaces[srv.Name]
		var readable []string
		for _, r := range surf.Resources {
			if e.rbac.DecideResource(c, srv.Name, r.URI).Effect != rbac.Deny {
				readable = append(readable, r.URI)
			}
		}
		for _, k := range surf.Skills {
			if e.rbac.DecideResource(c, srv.Name, k.URI).Effect != rbac.Deny {
				readable = append(readable, k.URI)
			}
		}
		for _, tp := range surf.Templates {
			if e.rbac.DecideTemplate(c, srv.Name, tp.URITemplate).Effect != rbac.Deny {
				readable = append(readable, tp.URITemplate)
			}
		}
		name := llmName(srv.Name + "__read_resource")
		if _, taken := ts.names[name]; taken || len(readable) == 0 {
			continue
		}
		if len(readable) > maxReadable {
			readable = append(readable[:maxReadable], "…")
		}
		ts.names[name] = toolRef{Server: srv.Name, Tool: readResourceTool}
		ts.defs = append(ts.defs, agent.ToolDef{Name: name, Parameters: readSchema,
			Description: fmt.Sprintf("Read a resource of the MCP server %s by its URI. Readable: %s.", srv.Name, strings.Join(readable, ", "))})
	}
}

// modelRead runs the built-in read tool: the URI is decided for the user now, then read (within
// the bound of one attachment). Refusals and failures are results for the model.
func (t *turn) modelRead(ctx context.Context, server string, args json.RawMessage) string {
	var in struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(args, &in); err != nil || strings.TrimSpace(in.URI) == "" {
		return "error: give the resource's uri, as {\"uri\": \"…\"}"
	}
	if t.e.rbac.DecideResource(t.caller(), server, in.URI).Effect == rbac.Deny {
		return "error: " + t.tr("RESOURCE_DENIED", "resource", in.URI, "server", server)
	}
	contents, err := t.e.ctxsrc.ReadResource(ctx, t.s.Identity, server, in.URI, mcp.ReadOptions{})
	switch {
	case errors.Is(err, mcp.ErrUnknownResource):
		return "error: " + t.tr("RESOURCE_UNKNOWN", "resource", in.URI)
	case err != nil:
		return "error: " + t.contextErrorText(server, err)
	}
	text, size, cut := t.contentsText(contents, t.e.maxAttachment)
	if cut {
		text += fmt.Sprintf("\n[… cut: the first %s of %s]", byteSize(len(text)), byteSize(size))
	}
	return text
}

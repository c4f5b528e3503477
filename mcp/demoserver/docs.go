package demoserver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The HollyHR endpoint's "Resources And Prompts" (../shared/seeds), published with the writes:
// read-only resources (the safe-write workflow, the data-handling policy, the OpenAPI reference
// — large on purpose: over the size a chat attaches whole — and one page per operation through
// a resource template), a skill (skill://hollyhr/safe-write/SKILL.md), and prompts for planning
// a safe read-only lookup and for reviewing a prepared write before commit. Arguments that name
// an operation complete (completion/complete); clients may subscribe to the resources, and
// [Server.UpdateResource] changes one and notifies them.

// URIs of the HR documents.
const (
	URISafeWriteWorkflow = "hollyhr://guides/safe-write-workflow"
	URIDataHandling      = "hollyhr://policies/data-handling"
	URIOpenAPI           = "hollyhr://reference/openapi"
	URIOperation         = "hollyhr://operations/{operation}"
	URISafeWriteSkill    = "skill://hollyhr/safe-write/SKILL.md"
)

// Names of the HR prompts.
const (
	PromptReviewWrite = "review_prepared_write"
	PromptPlanLookup  = "plan_safe_lookup"
)

// Operations are the write operations the HR documents describe (and complete).
var Operations = []string{"create_time_off", "update_job", "update_person", "upload_document"}

const safeWriteWorkflow = `# Safe-write workflow

Writes use two steps. First call prepare_api_write with the operation and its body: the server
freezes the payload and returns a confirmation token. Review the frozen payload with the person
it concerns. Then call commit_api_write with the token: the server asks the person to approve
the payload once more, and commits only then. The model cannot change the body, the ETag or the
idempotency key between preparation and commit. Without the person's approval the write fails
closed.`

const dataHandling = `# HR data-handling policy

Output is projected and sanitised: bearer tokens, API keys and secret-like values are redacted;
links and document URLs are redacted; payroll, bank, tax, compensation and home-address fields
are redacted; absence categories are bucketed. Never ask a person to paste such values.`

const safeWriteSkill = `---
name: safe-write
description: Prepare, review and commit an HR write safely.
---
# Safe write

1. Prepare the write with prepare_api_write.
2. Show the frozen payload to the person and ask what to check.
3. Commit with commit_api_write and the confirmation token; never retry a refused commit.`

// docs holds the HR documents (some can change, see [Server.UpdateResource]) and who
// subscribed to them.
type docs struct {
	mu    sync.Mutex
	texts map[string]string
	subs  map[string]int
}

func newDocs() *docs {
	return &docs{texts: map[string]string{
		URISafeWriteWorkflow: safeWriteWorkflow,
		URIDataHandling:      dataHandling,
		URIOpenAPI:           openAPIReference(),
		URISafeWriteSkill:    safeWriteSkill,
	}, subs: map[string]int{}}
}

// options adds what the documents need of the server's options: completions and subscriptions.
func (d *docs) options(o *mcp.ServerOptions) {
	o.CompletionHandler = d.complete
	o.SubscribeHandler = func(_ context.Context, req *mcp.SubscribeRequest) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		if _, ok := d.texts[req.Params.URI]; !ok && !strings.HasPrefix(req.Params.URI, "hollyhr://operations/") {
			return mcp.ResourceNotFoundError(req.Params.URI)
		}
		d.subs[req.Params.URI]++
		return nil
	}
	o.UnsubscribeHandler = func(_ context.Context, req *mcp.UnsubscribeRequest) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.subs[req.Params.URI] > 0 {
			d.subs[req.Params.URI]--
		}
		return nil
	}
}

func (d *docs) text(uri string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.texts[uri]
	return t, ok
}

// registerDocs publishes the documents and the prompts.
func (s *Server) registerDocs() {
	d := s.docs
	for _, r := range []*mcp.Resource{
		{URI: URISafeWriteWorkflow, Name: "safe-write-workflow", Title: "Safe-write workflow", MIMEType: "text/markdown",
			Description: "How HR writes are prepared, reviewed and committed"},
		{URI: URIDataHandling, Name: "data-handling", Title: "HR data-handling policy", MIMEType: "text/markdown",
			Description: "What HR output redacts and why"},
		{URI: URIOpenAPI, Name: "openapi", Title: "OpenAPI reference", MIMEType: "application/json",
			Description: "The HR API's operations (large)"},
		{URI: URISafeWriteSkill, Name: "safe-write", Title: "Safe write (skill)", MIMEType: "text/markdown",
			Description: "Prepare, review and commit an HR write safely."},
	} {
		s.mcp.AddResource(r, d.read)
	}
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: URIOperation, Name: "operation", Title: "Operation",
		MIMEType: "text/markdown", Description: "One write operation of the HR API"}, d.read)
	s.mcp.AddPrompt(&mcp.Prompt{Name: PromptReviewWrite, Title: "Review a prepared write",
		Description: "Review a prepared HR write before it is committed (or approved)",
		Arguments: []*mcp.PromptArgument{
			{Name: "operation", Title: "Operation", Description: "The write's operation, e.g. update_person", Required: true},
			{Name: "focus", Title: "Focus", Description: "What to check most (optional)"},
		}}, d.reviewPrompt)
	s.mcp.AddPrompt(&mcp.Prompt{Name: PromptPlanLookup, Title: "Plan a safe lookup",
		Description: "Plan a read-only lookup that returns no more than needed",
		Arguments:   []*mcp.PromptArgument{{Name: "question", Title: "Question", Description: "What you want to know", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			q := req.Params.Arguments["question"]
			if q == "" {
				return nil, fmt.Errorf("question is required")
			}
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{
				Text: "Plan a read-only HR lookup for: " + q + ". Use the scoped read tools, ask for no more fields than needed."}}}}, nil
		})
}

func (d *docs) read(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	if op, ok := strings.CutPrefix(uri, "hollyhr://operations/"); ok {
		if !slices.Contains(Operations, op) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/markdown",
			Text: "# " + op + "\n\nA write: prepare it with prepare_api_write (operation " + op + "), then commit it."}}}, nil
	}
	text, ok := d.text(uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	mime := "text/markdown"
	if uri == URIOpenAPI {
		mime = "application/json"
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: text}}}, nil
}

// reviewPrompt asks the model to review a prepared write, with the safe-write workflow
// embedded.
func (d *docs) reviewPrompt(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	op := req.Params.Arguments["operation"]
	if op == "" {
		return nil, fmt.Errorf("operation is required")
	}
	text := "Review the prepared HR write " + op + " before it is committed: check the frozen payload against the safe-write workflow, " +
		"and say what the person approving it should verify."
	if f := req.Params.Arguments["focus"]; f != "" {
		text += " Focus on: " + f + "."
	}
	workflow, _ := d.text(URISafeWriteWorkflow)
	return &mcp.GetPromptResult{Description: "Review of a prepared " + op + " write", Messages: []*mcp.PromptMessage{
		{Role: "user", Content: &mcp.TextContent{Text: text}},
		{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: URISafeWriteWorkflow, MIMEType: "text/markdown", Text: workflow}}},
	}}, nil
}

// complete completes the arguments that name an operation.
func (d *docs) complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := req.Params
	values := []string{}
	if p.Argument.Name == "operation" && p.Ref != nil &&
		((p.Ref.Type == "ref/prompt" && p.Ref.Name == PromptReviewWrite) || (p.Ref.Type == "ref/resource" && p.Ref.URI == URIOperation)) {
		for _, op := range Operations {
			if strings.HasPrefix(op, p.Argument.Value) {
				values = append(values, op)
			}
		}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}

// openAPIReference is a large JSON document (about 40 KiB).
func openAPIReference() string {
	var b strings.Builder
	b.WriteString(`{"openapi":"3.1.0","info":{"title":"HollyHR public API","version":"1"},"paths":{`)
	for i := range 400 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"/v1/people/{id}/field%03d":{"get":{"operationId":"get_field_%03d","summary":"Read field %d of a person"}}`, i, i, i)
	}
	b.WriteString("}}")
	return b.String()
}

// UpdateResource replaces the text of one of the HR documents (a URI constant of this package)
// and notifies the clients subscribed to it.
func (s *Server) UpdateResource(ctx context.Context, uri, text string) error {
	if s.docs == nil {
		return fmt.Errorf("update %s: the server has no documents (Options.Writes)", uri)
	}
	s.docs.mu.Lock()
	_, ok := s.docs.texts[uri]
	if ok {
		s.docs.texts[uri] = text
	}
	s.docs.mu.Unlock()
	if !ok {
		return fmt.Errorf("update %s: no such document", uri)
	}
	if err := s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		return fmt.Errorf("notify the update of %s: %w", uri, err)
	}
	return nil
}

// Subscribers returns how many subscriptions to uri are open.
func (s *Server) Subscribers(uri string) int {
	if s.docs == nil {
		return 0
	}
	s.docs.mu.Lock()
	defer s.docs.mu.Unlock()
	return s.docs.subs[uri]
}

// RemovePrompts removes prompts (unknown names are ignored) and notifies every connected client
// with notifications/prompts/list_changed.
func (s *Server) RemovePrompts(names ...string) { s.mcp.RemovePrompts(names...) }

// RemoveResources removes resources (unknown URIs are ignored) and notifies every connected
// client with notifications/resources/list_changed.
func (s *Server) RemoveResources(uris ...string) { s.mcp.RemoveResources(uris...) }

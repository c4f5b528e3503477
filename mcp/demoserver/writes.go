//lint:file-ignore SA1019 summarize_record exercises sampling (deprecated from protocol 2026-07-28 only)

package demoserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Writes shaped like the HollyHR MCP endpoint's "Write Safety" (../shared/seeds): a write is
// prepared first (the server freezes the payload and returns a signed confirmation token), then
// committed with the token; the commit asks the host for the user's approval through form
// elicitation and fails closed when the client does not advertise it, or the user declines,
// cancels or does not answer. request_time_off asks for a form with an enum, a boolean, a
// number and a string with a default; export_records reports progress until cancelled;
// link_account sends the user to a page (URL elicitation); summarize_record samples the client's
// LLM. They count their executions in [Server.Stats] (a commit
// counts only when it committed).

type writes struct {
	key []byte

	mu        sync.Mutex
	prepared  map[string]json.RawMessage // token → frozen payload
	committed map[string]bool
}

type prepareIn struct {
	Operation string         `json:"operation" jsonschema:"the API operation, e.g. update_person"`
	Body      map[string]any `json:"body,omitempty" jsonschema:"the write's body"`
}

type prepareOut struct {
	Token   string         `json:"confirmationToken"`
	Payload map[string]any `json:"payload"`
}

type commitIn struct {
	Token string `json:"confirmationToken" jsonschema:"the token prepare_api_write returned"`
}

type commitOut struct {
	Committed bool   `json:"committed"`
	Operation string `json:"operation,omitempty"`
}

type timeOffIn struct {
	Reason string `json:"reason,omitempty" jsonschema:"why, in a few words"`
}

// errNotApproved: the user did not approve the write (declined, cancelled, no answer, or the
// client cannot ask).
var errNotApproved = errors.New("write not committed: the user did not approve it")

func (s *Server) registerWrites() {
	w := &writes{key: make([]byte, 32), prepared: map[string]json.RawMessage{}, committed: map[string]bool{}}
	_, _ = rand.Read(w.key)
	addTool(s, &mcp.Tool{Name: "prepare_api_write", Description: "Prepare a write: freezes the payload and returns a confirmation token for commit_api_write."},
		func(_ context.Context, in prepareIn) (prepareOut, error) {
			if strings.TrimSpace(in.Operation) == "" {
				return prepareOut{}, errors.New("operation is required")
			}
			payload, err := json.Marshal(map[string]any{"operation": in.Operation, "body": in.Body})
			if err != nil {
				return prepareOut{}, err
			}
			nonce := make([]byte, 8)
			_, _ = rand.Read(nonce)
			mac := hmac.New(sha256.New, w.key)
			mac.Write(nonce)
			mac.Write(payload)
			token := hex.EncodeToString(nonce) + "." + hex.EncodeToString(mac.Sum(nil)[:12])
			w.mu.Lock()
			w.prepared[token] = payload
			w.mu.Unlock()
			return prepareOut{Token: token, Payload: map[string]any{"operation": in.Operation, "body": in.Body}}, nil
		})
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "commit_api_write", Description: "Commit a prepared write. Asks the user to approve the frozen payload first."},
		func(ctx context.Context, req *mcp.CallToolRequest, in commitIn) (*mcp.CallToolResult, commitOut, error) {
			out, err := w.commit(ctx, req, in.Token)
			s.stats.record("commit_api_write", err)
			return nil, out, err
		})
	s.trackTool("commit_api_write", true)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "request_time_off", Description: "Request time off; asks the user for the details."},
		func(ctx context.Context, req *mcp.CallToolRequest, in timeOffIn) (*mcp.CallToolResult, map[string]any, error) {
			out, err := timeOff(ctx, req)
			s.stats.record("request_time_off", err)
			return nil, out, err
		})
	s.trackTool("request_time_off", true)
	// export_records reports progress, then works until it is cancelled (counted as a tool
	// error: the client's notifications/cancelled reached it).
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "export_records", Description: "Export every record; reports progress and runs until cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ timeOffIn) (*mcp.CallToolResult, map[string]any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "exporting", Progress: 1, Total: 100})
			}
			<-ctx.Done()
			s.stats.record("export_records", ctx.Err())
			return nil, nil, ctx.Err()
		})
	s.trackTool("export_records", true)
	// link_account sends the user to a page (URL elicitation) and reports their action.
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "link_account", Description: "Link the user's account on the records site."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ timeOffIn) (*mcp.CallToolResult, map[string]any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "Link your account",
				URL: "https://records.example/link", ElicitationID: "link-1"})
			s.stats.record("link_account", err)
			if err != nil {
				return nil, nil, err
			}
			return nil, map[string]any{"action": res.Action}, nil
		})
	s.trackTool("link_account", true)
	// summarize_record has the client's LLM write a summary (sampling).
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "summarize_record", Description: "Summarise a record with the assistant's model."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ timeOffIn) (*mcp.CallToolResult, map[string]any, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 500, SystemPrompt: "Summarise HR records.",
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "record 42"}}}})
			s.stats.record("summarize_record", err)
			if err != nil {
				return nil, nil, err
			}
			text, _ := res.Content.(*mcp.TextContent)
			if text == nil {
				return nil, nil, errors.New("the sample is not text")
			}
			return nil, map[string]any{"summary": text.Text}, nil
		})
	s.trackTool("summarize_record", true)
}

func (w *writes) commit(ctx context.Context, req *mcp.CallToolRequest, token string) (commitOut, error) {
	w.mu.Lock()
	payload, ok := w.prepared[token]
	done := w.committed[token]
	w.mu.Unlock()
	switch {
	case !ok:
		return commitOut{}, errors.New("unknown or expired confirmation token")
	case done:
		return commitOut{}, errors.New("this write was committed already")
	}
	if caps := req.Session.InitializeParams().Capabilities; caps == nil || caps.Elicitation == nil {
		return commitOut{}, fmt.Errorf("%w (the client does not advertise form elicitation)", errNotApproved)
	}
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
		Mode:            "form",
		Message:         "Approve this write? " + string(payload),
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
	})
	if err != nil {
		return commitOut{}, fmt.Errorf("%w: %v", errNotApproved, err)
	}
	if res.Action != "accept" {
		return commitOut{}, fmt.Errorf("%w (%s)", errNotApproved, res.Action)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.committed[token] {
		return commitOut{}, errors.New("this write was committed already")
	}
	w.committed[token] = true
	var p struct {
		Operation string `json:"operation"`
	}
	_ = json.Unmarshal(payload, &p)
	return commitOut{Committed: true, Operation: p.Operation}, nil
}

// timeOff asks for the request's details: kind (enum), half day (boolean), days (number,
// 0.5–30) and a note (string, default "none").
func timeOff(ctx context.Context, req *mcp.CallToolRequest) (map[string]any, error) {
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
		Mode:    "form",
		Message: "Details of the time-off request",
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"kind":    map[string]any{"type": "string", "title": "Kind", "enum": []string{"vacation", "sick", "personal"}, "enumNames": []string{"Vacation", "Sick leave", "Personal"}},
				"halfDay": map[string]any{"type": "boolean", "title": "Half day"},
				"days":    map[string]any{"type": "number", "title": "Days", "minimum": 0.5, "maximum": 30},
				"note":    map[string]any{"type": "string", "title": "Note", "default": "none", "maxLength": 200},
			},
			"required": []string{"days", "halfDay", "kind"},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotApproved, err)
	}
	if res.Action != "accept" {
		return nil, fmt.Errorf("%w (%s)", errNotApproved, res.Action)
	}
	return map[string]any{"requested": res.Content}, nil
}

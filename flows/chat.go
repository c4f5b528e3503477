package flows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// maxToolResult bounds a tool result handed back to the LLM.
const maxToolResult = 16 << 10

// chat answers free text: with the user's agent when there is an LLM, else with a pointer to the
// commands. A guest of a pack that requires authentication is asked to log in.
func (t *turn) chat(ctx context.Context, text string) error {
	return t.chatTurn(ctx, chatInput{text: text})
}

// chatInput is one turn's input: the user's text, or the messages of a prompt (prompts.go).
type chatInput struct {
	text   string
	prompt []agent.Message
}

// chatTurn runs the user's agent on one input, with the conversation's history and attachments
// (context.go), and remembers the turn.
func (t *turn) chatTurn(ctx context.Context, in chatInput) error {
	if t.authWall() {
		return t.sayKey(ctx, "AUTH_REQUIRED")
	}
	if t.e.model == nil {
		return t.sayKey(ctx, "NO_LLM")
	}
	ts := t.tools(ctx)
	conv, err := t.loadConversation(ctx)
	if err != nil {
		if retryable(err) {
			return fmt.Errorf("load memory: %w", err) // handled again once the store is back
		}
		t.e.log.WarnContext(ctx, "load memory", slog.String("connection", logid.Conn(t.conn)), slog.Any("err", err))
	}
	history := make([]agent.Message, 0, len(conv.history))
	for _, m := range conv.history {
		history = append(history, agent.Message{Role: agent.Role(m.Role), Content: m.Content})
	}
	items, attached, changed := t.attachedContext(ctx, conv.attached)
	exec := func(ctx context.Context, call agent.ToolCall) (string, error) {
		ref, _, ok := t.resolve(ts, call.Name)
		if !ok {
			return "unknown tool " + call.Name, nil
		}
		if ref.Tool == readResourceTool {
			return t.modelRead(ctx, ref.Server, call.Arguments), nil
		}
		out, err := t.invoke(ctx, ref, call.Arguments)
		if err != nil {
			return "", err
		}
		text := out.Text
		if len(text) > maxToolResult {
			text = text[:maxToolResult] + "…"
		}
		if out.Failed {
			return "error: " + text, nil
		}
		return text, nil
	}
	refused := func(ctx context.Context, call agent.ToolCall) string {
		// A call for a tool the user was not offered: audited as refused, never run.
		ref, _, ok := t.resolve(ts, call.Name)
		if !ok || t.e.rbac.Decide(t.caller(), ref.Server, ref.Tool).Effect != rbac.Deny {
			return "unknown tool " + call.Name + ": call the tools by the names offered"
		}
		t.refuse(ctx, ref, call.Arguments, "not offered to this user's agent")
		return t.tr("TOOL_DENIED", "tool", ref.Tool, "server", ref.Server)
	}
	reply, err := t.e.model.Run(ctx, agent.Turn{System: t.systemPrompt(), History: history, User: in.text, Prompt: in.prompt,
		Context: items, Tools: ts.defs, Refused: refused}, exec)
	if err != nil && retryable(err) {
		return fmt.Errorf("chat turn: %w", err) // a tool call's step could not be recorded
	}
	if err != nil {
		t.e.log.WarnContext(ctx, "LLM turn failed", slog.String("connection", logid.Conn(t.conn)), slog.Int("llm_calls", reply.LLMCalls), slog.Any("err", err))
		if changed {
			t.saveAttachments(attached)
		}
		if errors.Is(err, agent.ErrTimeout) {
			return t.sayKey(ctx, "LLM_TIMEOUT")
		}
		return t.sayKey(ctx, "LLM_ERROR")
	}
	answer := strings.TrimSpace(reply.Text)
	if answer == "" {
		answer = t.tr("LLM_ERROR")
	}
	t.remember(conv, attached, changed, in, answer)
	return t.say(ctx, answer)
}

// remember appends the turn to the conversation's memory: the attachments entry first when it
// changed or would fall out of the window, then the user's input and the answer.
func (t *turn) remember(conv conversation, attached []attachment, changed bool, in chatInput, answer string) {
	window := t.e.pack.Memory.Window
	now := t.e.now()
	var entries []store.MemoryEntry
	if window > 0 {
		if len(in.prompt) > 0 {
			for _, m := range in.prompt {
				entries = append(entries, store.MemoryEntry{Role: string(m.Role), Content: m.Content, CreatedAt: now})
			}
		} else {
			entries = append(entries, store.MemoryEntry{Role: string(agent.RoleUser), Content: in.text, CreatedAt: now})
		}
		entries = append(entries, store.MemoryEntry{Role: string(agent.RoleAssistant), Content: answer, CreatedAt: now})
	}
	// The entry is evicted when the newest memoryKeep entries after this append do not hold it.
	falling := len(attached) > 0 && (conv.ctxAt < 0 || conv.loaded+len(entries)-conv.ctxAt > t.memoryKeep())
	if changed || falling {
		t.saveAttachments(attached)
	}
	if len(entries) > 0 {
		t.fx.Memory = append(t.fx.Memory, store.MemoryAppend{Key: t.memoryKey(), Entries: entries, Keep: t.memoryKeep()})
	}
}

// authWall: a guest of a pack that requires authentication.
func (t *turn) authWall() bool {
	return !t.s.Authenticated && t.e.pack.Flows.Authentication.Enabled && t.e.pack.Flows.Authentication.Required
}

// systemPrompt is today's date, the pack's agentPrompt, the language's systemPrompt and a note of
// who the user is.
func (t *turn) systemPrompt() string {
	var b strings.Builder
	b.WriteString("Today is ")
	b.WriteString(t.e.now().Format("Monday, 2 January 2006"))
	b.WriteString(".\n\n")
	if p := strings.TrimSpace(t.e.pack.LLM.AgentPrompt); p != "" {
		b.WriteString(p)
		b.WriteString("\n\n")
	}
	lang := t.lang()
	if l, ok := t.e.pack.Languages[lang]; ok && strings.TrimSpace(l.SystemPrompt) != "" {
		b.WriteString(strings.TrimSpace(l.SystemPrompt))
		b.WriteString("\n\n")
	} else if name := t.e.cat.T(lang, "LANGUAGE_NAME"); name != "" {
		b.WriteString("Answer in ")
		b.WriteString(name)
		b.WriteString(".\n\n")
	}
	if t.s.Authenticated {
		b.WriteString("The user is ")
		if t.s.DisplayName != "" {
			b.WriteString(t.s.DisplayName)
			b.WriteString(" (")
			b.WriteString(t.s.Identity)
			b.WriteString(")")
		} else {
			b.WriteString(t.s.Identity)
		}
		b.WriteString(", with roles: ")
		b.WriteString(strings.Join(t.e.rbac.Roles(t.caller()), ", "))
		b.WriteString(".")
	} else {
		b.WriteString("The user has not logged in (role: guest).")
	}
	return b.String()
}

// retryable: err means the event is to be handled again later, not answered now: the store is
// unreachable, or this replica lost the connection (another one handles the event).
func retryable(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrLeaseLost)
}

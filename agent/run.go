package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tmc/langchaingo/llms"
)

// Role is the author of a [Message].
type Role string

// Roles of conversation messages. The system prompt is not a message: it is [Turn.System].
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one item of a conversation's history, as [Reply.Messages] returns them and as
// [Turn.History] takes them back.
type Message struct {
	Role    Role
	Content string
	// ToolCalls are the tools an assistant message asked for.
	ToolCalls []ToolCall
	// ToolCallID is, for a tool message, the ID of the call it answers.
	ToolCallID string
	// Name is, for a tool message, the tool's name.
	Name string
}

// ToolDef is a tool offered to the LLM.
type ToolDef struct {
	// Name is the name the LLM sees and calls; it must match ^[a-zA-Z0-9_-]{1,64}$ and be
	// unique within a turn.
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments, an object (the MCP input schema); nil
	// means {"type":"object","properties":{}}.
	Parameters json.RawMessage
}

// ToolCall is one tool call the LLM asked for.
type ToolCall struct {
	// ID identifies the call within the conversation; a provider that sends none gets
	// "call_<round>_<n>".
	ID   string
	Name string
	// Arguments are the arguments as the LLM sent them. They may be invalid JSON: the
	// executor decides. Only an empty text becomes {}.
	Arguments json.RawMessage
}

// Executor runs one tool call and returns the text given back to the LLM as the tool's result.
// A tool that failed is a result ("error: …") for the LLM to read; a returned error is a
// failure of the bot itself, and [Model.Run] stops and returns it wrapped.
type Executor func(ctx context.Context, call ToolCall) (string, error)

// Turn is one user turn.
type Turn struct {
	System  string    // the system prompt; "" sends none
	History []Message // earlier messages, oldest first
	User    string    // this turn's user text
	// Prompt, when not empty, is the turn's input instead of User: the messages of an MCP
	// prompt the user chose (roles user and assistant), as if the user had typed them.
	Prompt []Message
	// Context is what the user attached to the conversation (MCP resources, skills): it goes in
	// the system prompt, after System, for every LLM call of the turn (context.go).
	Context []ContextItem
	Tools   []ToolDef // the tools offered; none offers no tools
	// Refused, optional, is told of each call naming a tool that was not offered (a forged or
	// hallucinated call: it never reaches the executor), so that it can be audited; its answer
	// is the call's result. Without it the result is "unknown tool <name>".
	Refused func(ctx context.Context, call ToolCall) string
}

// Reply is the outcome of a turn.
type Reply struct {
	// Text is the final assistant text.
	Text string
	// Messages is what the turn added to the conversation, in order: the user message (or the
	// prompt's messages), each
	// assistant message that asked for tools followed by the tool results, and the final
	// assistant message. Appending them to the history gives the next turn's History. After
	// an error, they stop at the last complete step (never an assistant message whose tool
	// calls have no results).
	Messages []Message
	// LLMCalls counts the LLM calls made, failed ones included.
	LLMCalls int
	// ToolCalls counts the calls passed to the Executor (unknown tools are not counted).
	ToolCalls int
}

// Run plays one user turn. It calls the LLM with the system prompt, the history, the user text
// and the tools; while the answer asks for tools, it runs each call through exec in order,
// appends the results and calls the LLM again, up to Config.MaxRounds LLM calls in all.
//
// A call naming a tool that is not in t.Tools does not reach exec: its result is
// "unknown tool <name>", so the model can correct itself. When the last allowed answer still
// asks for tools, Run returns an error wrapping [ErrTooManyRounds] together with the Reply so
// far. Provider failures wrap [ErrTimeout] or [ErrProvider] and never contain the API key; an
// error from exec is returned wrapped. Run panics when tools are offered with a nil exec.
func (m *Model) Run(ctx context.Context, t Turn, exec Executor) (Reply, error) {
	tools, known, err := convertTools(t.Tools)
	if err != nil {
		return Reply{}, fmt.Errorf("agent: %w", err)
	}
	if len(tools) > 0 && exec == nil {
		panic("agent: Run offers tools but has a nil Executor")
	}
	msgs := make([]llms.MessageContent, 0, len(t.History)+2+len(t.Prompt))
	if system := withContext(t.System, t.Context); system != "" {
		msgs = append(msgs, llms.TextParts(llms.ChatMessageTypeSystem, system))
	}
	if msgs, err = m.appendMessages(msgs, t.History...); err != nil {
		return Reply{}, fmt.Errorf("agent: history: %w", err)
	}
	input, err := turnInput(t)
	if err != nil {
		return Reply{}, fmt.Errorf("agent: %w", err)
	}
	msgs, _ = m.appendMessages(msgs, input...) // user and assistant messages without tool calls always convert
	reply := Reply{Messages: input}

	for round := 1; ; round++ {
		m.log.DebugContext(ctx, "llm call", "round", round, "messages", len(msgs), "tools", len(tools))
		resp, err := m.generate(ctx, msgs, tools)
		reply.LLMCalls++
		if err != nil {
			return reply, fmt.Errorf("agent: llm call %d: %w", round, err)
		}
		answer := answerOf(resp, round)
		if len(answer.ToolCalls) == 0 {
			reply.Text = answer.Content
			reply.Messages = append(reply.Messages, answer)
			return reply, nil
		}
		if round >= m.cfg.MaxRounds {
			m.log.WarnContext(ctx, "tool rounds exhausted", "rounds", round, "tool_calls", reply.ToolCalls)
			return reply, fmt.Errorf("agent: %w: the model still asks for tools after %d llm calls", ErrTooManyRounds, round)
		}
		// The assistant message and its results enter Messages together, so that an error in
		// between leaves no unanswered tool call behind.
		step := make([]Message, 0, 1+len(answer.ToolCalls))
		step = append(step, answer)
		for _, call := range answer.ToolCalls {
			result := "unknown tool " + call.Name
			if known[call.Name] {
				m.log.DebugContext(ctx, "tool call", "tool", call.Name, "call_id", call.ID)
				result, err = exec(ctx, call)
				reply.ToolCalls++
				if err != nil {
					return reply, fmt.Errorf("agent: tool %s: %w", call.Name, err)
				}
			} else {
				m.log.WarnContext(ctx, "unknown tool", "tool", call.Name, "call_id", call.ID)
				if t.Refused != nil {
					result = t.Refused(ctx, call)
				}
			}
			step = append(step, Message{Role: RoleTool, Content: result, ToolCallID: call.ID, Name: call.Name})
		}
		reply.Messages = append(reply.Messages, step...)
		msgs, _ = m.appendMessages(msgs, step...) // assistant and tool messages always convert
	}
}

// answerOf merges the choices of a response into one assistant message. OpenAI answers one
// choice; langchaingo's anthropic client makes one choice per content block (text, tool_use).
func answerOf(resp *llms.ContentResponse, round int) Message {
	msg := Message{Role: RoleAssistant}
	var text strings.Builder
	for _, c := range resp.Choices {
		if c == nil {
			continue
		}
		text.WriteString(c.Content)
		for _, tc := range c.ToolCalls {
			if tc.FunctionCall == nil {
				continue
			}
			call := ToolCall{ID: tc.ID, Name: tc.FunctionCall.Name, Arguments: json.RawMessage(tc.FunctionCall.Arguments)}
			if call.ID == "" {
				call.ID = fmt.Sprintf("call_%d_%d", round, len(msg.ToolCalls)+1)
			}
			if strings.TrimSpace(tc.FunctionCall.Arguments) == "" {
				call.Arguments = json.RawMessage("{}")
			}
			msg.ToolCalls = append(msg.ToolCalls, call)
		}
	}
	msg.Content = text.String()
	return msg
}

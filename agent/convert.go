package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/tmc/langchaingo/llms"
)

// toolNameRE is what OpenAI and Anthropic accept as a function name.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// emptySchema is the parameters schema of a tool that takes no arguments.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// convertTools turns tool definitions into langchaingo tools and the set of their names.
func convertTools(defs []ToolDef) ([]llms.Tool, map[string]bool, error) {
	if len(defs) == 0 {
		return nil, nil, nil
	}
	tools := make([]llms.Tool, 0, len(defs))
	known := make(map[string]bool, len(defs))
	var errs []error
	for _, d := range defs {
		if !toolNameRE.MatchString(d.Name) {
			errs = append(errs, fmt.Errorf("tool %q: name must match %s", d.Name, toolNameRE))
			continue
		}
		if known[d.Name] {
			errs = append(errs, fmt.Errorf("tool %q: offered twice", d.Name))
			continue
		}
		params := d.Parameters
		if len(bytes.TrimSpace(params)) == 0 {
			params = emptySchema
		}
		if !json.Valid(params) || bytes.TrimSpace(params)[0] != '{' {
			errs = append(errs, fmt.Errorf("tool %q: parameters are not a JSON object", d.Name))
			continue
		}
		known[d.Name] = true
		tools = append(tools, llms.Tool{
			Type:     "function",
			Function: &llms.FunctionDefinition{Name: d.Name, Description: d.Description, Parameters: params},
		})
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return tools, known, nil
}

// appendMessages converts conversation messages to langchaingo messages for the model's
// provider and appends them to dst.
func (m *Model) appendMessages(dst []llms.MessageContent, msgs ...Message) ([]llms.MessageContent, error) {
	for i, msg := range msgs {
		switch msg.Role {
		case RoleUser:
			dst = append(dst, llms.TextParts(llms.ChatMessageTypeHuman, msg.Content))
		case RoleAssistant:
			if m.cfg.Provider == ProviderAnthropic {
				dst = appendAnthropicAssistant(dst, msg)
			} else {
				dst = append(dst, openAIAssistant(msg))
			}
		case RoleTool:
			dst = append(dst, llms.MessageContent{
				Role:  llms.ChatMessageTypeTool,
				Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: msg.ToolCallID, Name: msg.Name, Content: msg.Content}},
			})
		default:
			return dst, fmt.Errorf("message %d: unknown role %q", i, msg.Role)
		}
	}
	return dst, nil
}

// openAIAssistant is one assistant message with its text and its tool calls: the client sends
// the text parts as content and the ToolCall parts as tool_calls.
func openAIAssistant(msg Message) llms.MessageContent {
	parts := make([]llms.ContentPart, 0, 1+len(msg.ToolCalls))
	if msg.Content != "" || len(msg.ToolCalls) == 0 {
		parts = append(parts, llms.TextContent{Text: msg.Content})
	}
	for _, c := range msg.ToolCalls {
		parts = append(parts, llms.ToolCall{
			ID:           c.ID,
			Type:         "function",
			FunctionCall: &llms.FunctionCall{Name: c.Name, Arguments: string(c.Arguments)},
		})
	}
	return llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: parts}
}

// appendAnthropicAssistant appends an assistant message as langchaingo's anthropic client
// needs it: the client converts only the first part of an AI message, so the text and each
// tool call become messages of their own, which the Messages API merges back into one
// assistant turn. Tool-call arguments must be a JSON object there; others become {}. An
// empty message is left out (Anthropic rejects empty text blocks).
func appendAnthropicAssistant(dst []llms.MessageContent, msg Message) []llms.MessageContent {
	if msg.Content != "" {
		dst = append(dst, llms.TextParts(llms.ChatMessageTypeAI, msg.Content))
	}
	for _, c := range msg.ToolCalls {
		args := string(c.Arguments)
		var obj map[string]any
		if json.Unmarshal(c.Arguments, &obj) != nil || obj == nil {
			args = "{}"
		}
		dst = append(dst, llms.MessageContent{
			Role: llms.ChatMessageTypeAI,
			Parts: []llms.ContentPart{llms.ToolCall{
				ID:           c.ID,
				Type:         "function",
				FunctionCall: &llms.FunctionCall{Name: c.Name, Arguments: args},
			}},
		})
	}
	return dst
}

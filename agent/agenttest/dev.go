package agenttest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Dev is the script `packbot dev llm` answers with, so that a person can try the LLM path —
// tools, approvals — without a key: a user text that names an offered tool calls it, with the
// first JSON object that follows the name as its arguments ({} when there is none); a tool
// result is reported back; anything else is echoed with a reminder of how to call a tool and
// which tools the user is offered.
func Dev(r Request) Response {
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "tool" {
		last := r.Messages[n-1]
		return Response{Text: fmt.Sprintf("%s said: %s", toolNameOf(r, last.ToolCallID), last.Content)}
	}
	text := r.LastUser()
	names := r.ToolNames()
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) }) // longest first
	for _, name := range names {
		if i := strings.Index(text, name); i >= 0 {
			return Response{ToolCalls: []ToolCall{{Name: name, Arguments: firstObject(text[i+len(name):])}}}
		}
	}
	hint := "no tools are offered to you (log in from the menu)"
	if len(names) > 0 {
		offered := r.ToolNames()
		hint = fmt.Sprintf("write a tool's name and its JSON arguments to call it, e.g. %s {}; your tools: %s",
			offered[0], strings.Join(offered, ", "))
	}
	return Response{Text: fmt.Sprintf("you said: %s\n(packbot dev llm is a scripted model, not an AI: %s)", text, hint)}
}

// toolNameOf returns the name of the tool call id answers, or "the tool".
func toolNameOf(r Request, id string) string {
	for _, m := range r.Messages {
		for _, tc := range m.ToolCalls {
			if tc.ID == id {
				return tc.Name
			}
		}
	}
	return "the tool"
}

// firstObject returns the first JSON object in s, or "{}" when there is none.
func firstObject(s string) string {
	for i := strings.IndexByte(s, '{'); i >= 0; {
		var v map[string]any
		dec := json.NewDecoder(strings.NewReader(s[i:]))
		if dec.Decode(&v) == nil {
			return s[i : i+int(dec.InputOffset())]
		}
		j := strings.IndexByte(s[i+1:], '{')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return "{}"
}

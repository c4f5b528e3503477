package approvals

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxValue bounds one argument's rendering in a summary.
const maxValue = 200

// Summary renders a call's arguments for approvers, by code: "name: value" pairs in the order of
// the schema's required properties, then its other properties, then arguments the schema does
// not declare (marked with "?", so that nothing is hidden); strings quoted as JSON, long values
// cut. Arguments that are not a JSON object are shown as they are.
func Summary(args, schema json.RawMessage) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return cut(string(bytes.TrimSpace(args)))
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	_ = json.Unmarshal(schema, &s) // no schema: every argument is undeclared
	var order []string
	seen := map[string]bool{}
	add := func(name string) {
		if _, ok := obj[name]; ok && !seen[name] {
			seen[name] = true
			order = append(order, name)
		}
	}
	for _, r := range s.Required {
		add(r)
	}
	declared := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		declared = append(declared, name)
	}
	slices.Sort(declared)
	for _, name := range declared {
		add(name)
	}
	var undeclared []string
	for name := range obj {
		if !seen[name] {
			undeclared = append(undeclared, name)
		}
	}
	slices.Sort(undeclared)
	parts := make([]string, 0, len(obj))
	for _, name := range order {
		parts = append(parts, name+": "+value(obj[name]))
	}
	for _, name := range undeclared {
		parts = append(parts, name+"?: "+value(obj[name]))
	}
	if len(parts) == 0 {
		return "{}"
	}
	return strings.Join(parts, ", ")
}

func value(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return cut(string(raw))
	}
	return cut(buf.String())
}

func cut(s string) string {
	if utf8.RuneCountInString(s) <= maxValue {
		return s
	}
	r := []rune(s)
	return string(r[:maxValue-1]) + "…"
}

package rbac

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ParseRoles reads a credential's roles attribute: a single string, a comma-separated list, a
// string holding a JSON array, or an array. Entries are trimmed; empty and repeated entries are
// dropped; order is kept. Anything else (numbers, objects) gives no roles.
func ParseRoles(v any) []string {
	var raw []string
	switch t := v.(type) {
	case string:
		s := strings.TrimSpace(t)
		var arr []any
		if strings.HasPrefix(s, "[") && json.Unmarshal([]byte(s), &arr) == nil {
			return ParseRoles(arr)
		}
		raw = strings.Split(s, ",")
	case []string:
		raw = t
	case []any:
		for _, x := range t {
			switch x := x.(type) {
			case string:
				raw = append(raw, x)
			case float64, bool:
				raw = append(raw, fmt.Sprint(x))
			}
		}
	}
	out := make([]string, 0, len(raw))
	seen := make(map[string]bool, len(raw))
	for _, r := range raw {
		r = strings.TrimSpace(r)
		if r == "" || seen[r] {
			continue
		}
		seen[r] = true
		out = append(out, r)
	}
	return out
}

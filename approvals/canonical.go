package approvals

import (
	"bytes"
	"encoding/json"
)

// CanonicalJSON re-encodes a JSON value with sorted object keys and no insignificant space;
// empty input is {}; invalid JSON is returned as given.
func CanonicalJSON(raw json.RawMessage) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

package approvals_test

import (
	"encoding/json"
	"testing"

	"github.com/packbot/packbot/approvals"
)

// FuzzCanonicalJSON: never panics; canonical JSON is a fixed point and keeps the value.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":1,"a":[1,2,{"d":null,"c":"x"}]}`, `[1, 2]`, `"s"`, `{nope`, ``, `1e400`, `{"a":1.0}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := approvals.CanonicalJSON(json.RawMessage(s))
		if !json.Valid([]byte(s)) {
			return
		}
		if again := approvals.CanonicalJSON(c); string(again) != string(c) {
			t.Fatalf("not a fixed point: %q → %q → %q", s, c, again)
		}
		var v1, v2 any
		if json.Unmarshal([]byte(s), &v1) == nil && json.Unmarshal(c, &v2) == nil {
			b1, _ := json.Marshal(v1)
			b2, _ := json.Marshal(v2)
			if string(b1) != string(b2) {
				t.Fatalf("value changed: %q → %q", s, c)
			}
		}
	})
}

package secret

import "log/slog"

// Redacted is what a [Value] shows of itself.
const Redacted = "[REDACTED]"

// Value is a secret string (a token, a password typed in the chat). Every way of printing it —
// fmt verbs, slog, JSON — shows [Redacted]; call Reveal where the real value is needed. The
// text sits behind a pointer so that even fmt printing a struct with an unexported Value field
// (where it cannot call String) shows an address, never the secret. The zero Value is empty.
type Value struct{ s *string }

// NewValue wraps a secret.
func NewValue(s string) Value { return Value{s: &s} }

// Reveal returns the secret itself.
func (v Value) Reveal() string {
	if v.s == nil {
		return ""
	}
	return *v.s
}

// IsZero reports whether the value is empty.
func (v Value) IsZero() bool { return v.Reveal() == "" }

// String redacts the value.
func (v Value) String() string { return Redacted }

// GoString redacts the value.
func (v Value) GoString() string { return Redacted }

// LogValue redacts the value.
func (v Value) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalJSON redacts the value.
func (v Value) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

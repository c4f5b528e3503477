package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Asker serves what a server asks during one call made for a person: elicitation (a question
// for that person), progress, and sampling notices. The caller of [Pool.Call] puts it in the
// call's context with [WithAsker]; a call without one declines every elicitation. Its methods
// run on the session's goroutine while the call waits, and may block until the person answers
// (Elicit) — the call's own timeout is suspended meanwhile.
type Asker interface {
	// Elicit asks the person; ctx ends when the call ends or the server gives up. An error
	// declines (the server is told the request failed).
	Elicit(ctx context.Context, e Elicitation) (ElicitResult, error)
	// Progress reports a progress notification of the call (the asker throttles).
	Progress(ctx context.Context, p Progress)
	// Sampled tells that the server had the pack's LLM answer a prompt during the call.
	Sampled(ctx context.Context, server string)
}

type askerKey struct{}

// WithAsker returns ctx carrying a: the calls made with it relay the server's questions to a.
func WithAsker(ctx context.Context, a Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, a)
}

func askerFrom(ctx context.Context) Asker {
	a, _ := ctx.Value(askerKey{}).(Asker)
	return a
}

// Bounds on what a server may put before a person (a hostile or broken server must not flood
// the chat): longer texts are clipped; a longer URL, or a form with more fields or options, is
// refused.
const (
	maxElicitMessage   = 2000
	maxProgressMessage = 200
	maxFieldTitle      = 200
	maxFieldText       = 500
	maxFormFields      = 20
	maxEnumValues      = 50
	maxElicitURL       = 4096
)

// clip returns s cut to at most n runes ("…" marks a cut).
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// checkElicitURL accepts the links a person may be sent: https, or http on a loopback host.
func checkElicitURL(raw string) error {
	if len(raw) > maxElicitURL {
		return fmt.Errorf("the URL is longer than %d bytes", maxElicitURL)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("the URL %q is not an absolute URL", clip(raw, 100))
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && (u.Hostname() == "localhost" || isLoopbackIP(u.Hostname())):
	default:
		return fmt.Errorf("the URL's scheme %q is refused: packbot sends people https links only", u.Scheme)
	}
	return nil
}

func isLoopbackIP(h string) bool {
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Elicitation modes.
const (
	ElicitForm = "form"
	ElicitURL  = "url"
)

// Elicitation actions (the person's answer).
const (
	ActionAccept  = "accept"
	ActionDecline = "decline"
	ActionCancel  = "cancel"
)

// Elicitation is a server's question to the person a call is made for.
type Elicitation struct {
	Server  string
	Tool    string
	Mode    string // ElicitForm or ElicitURL
	Message string
	// Fields of a form, in the schema's order (properties sorted by name when the schema's
	// JSON has no order to keep).
	Fields []ElicitField
	// URL and ID of a URL-mode elicitation; Done is closed when the server says it completed
	// (notifications/elicitation/complete).
	URL  string
	ID   string
	Done <-chan struct{}
}

// ElicitResult is the person's answer: Content (field name → value) with ActionAccept.
type ElicitResult struct {
	Action  string
	Content map[string]any
}

// Progress is one progress notification of a call.
type Progress struct {
	Server   string
	Tool     string
	Message  string
	Progress float64
	Total    float64 // 0 when unknown
}

// Field types of a form.
const (
	FieldString  = "string"
	FieldNumber  = "number"
	FieldInteger = "integer"
	FieldBoolean = "boolean"
	// FieldArray is a multi-select: an array of Enum values (MinItems..MaxItems of them).
	FieldArray = "array"
)

// ElicitField is one field of a form elicitation (MCP restricts forms to flat objects of
// primitive fields).
type ElicitField struct {
	Name        string
	Title       string
	Description string
	Type        string // FieldString, FieldNumber, FieldInteger or FieldBoolean
	Required    bool
	// Enum values of a string field, and their display titles (same length).
	Enum       []string
	EnumTitles []string
	Default    any // nil when none
	Min, Max   *float64
	MinLength  *int
	MaxLength  *int
	MinItems   *int // FieldArray
	MaxItems   *int // FieldArray
	Pattern    string
	Format     string // email, uri, date, date-time
}

// Label is the field's title, else its name.
func (f ElicitField) Label() string {
	if f.Title != "" {
		return f.Title
	}
	return f.Name
}

// FieldError says why a typed answer does not fit its field: Reason is one of "type", "min",
// "max", "minLength", "maxLength", "minItems", "maxItems", "pattern", "format", "enum"; Limit
// the bound it broke.
type FieldError struct {
	Reason string
	Limit  string
}

func (e *FieldError) Error() string {
	if e.Limit == "" {
		return "invalid value: " + e.Reason
	}
	return fmt.Sprintf("invalid value: %s %s", e.Reason, e.Limit)
}

// Parse checks a typed answer against the field and returns its value (string, float64,
// int64 or bool), or a *FieldError.
func (f ElicitField) Parse(text string) (any, error) {
	text = strings.TrimSpace(text)
	switch f.Type {
	case FieldArray:
		return f.parseChoices(text)
	case FieldBoolean:
		switch strings.ToLower(text) {
		case "true", "yes", "y", "1", "sí", "si":
			return true, nil
		case "false", "no", "n", "0":
			return false, nil
		}
		return nil, &FieldError{Reason: "type"}
	case FieldNumber, FieldInteger:
		v, err := strconv.ParseFloat(strings.ReplaceAll(text, ",", "."), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, &FieldError{Reason: "type"}
		}
		if f.Type == FieldInteger && v != math.Trunc(v) {
			return nil, &FieldError{Reason: "type"}
		}
		if f.Min != nil && v < *f.Min {
			return nil, &FieldError{Reason: "min", Limit: fmtNum(*f.Min)}
		}
		if f.Max != nil && v > *f.Max {
			return nil, &FieldError{Reason: "max", Limit: fmtNum(*f.Max)}
		}
		if f.Type == FieldInteger {
			return int64(v), nil
		}
		return v, nil
	}
	if len(f.Enum) > 0 {
		for i, e := range f.Enum {
			if text == e || (i < len(f.EnumTitles) && text == f.EnumTitles[i]) {
				return e, nil
			}
		}
		return nil, &FieldError{Reason: "enum"}
	}
	n := utf8.RuneCountInString(text)
	if f.MinLength != nil && n < *f.MinLength {
		return nil, &FieldError{Reason: "minLength", Limit: strconv.Itoa(*f.MinLength)}
	}
	if f.MaxLength != nil && n > *f.MaxLength {
		return nil, &FieldError{Reason: "maxLength", Limit: strconv.Itoa(*f.MaxLength)}
	}
	if f.Pattern != "" {
		re, err := regexp.Compile(f.Pattern)
		if err == nil && !re.MatchString(text) {
			return nil, &FieldError{Reason: "pattern", Limit: f.Pattern}
		}
	}
	if !validFormat(f.Format, text) {
		return nil, &FieldError{Reason: "format", Limit: f.Format}
	}
	return text, nil
}

// parseChoices reads a multi-select answer: values or titles separated by commas.
func (f ElicitField) parseChoices(text string) (any, error) {
	var out []any
	for part := range strings.SplitSeq(text, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := slices.IndexFunc(f.Enum, func(e string) bool { return strings.EqualFold(e, part) })
		if i < 0 {
			i = slices.IndexFunc(f.EnumTitles, func(e string) bool { return strings.EqualFold(e, part) })
		}
		if i < 0 {
			return nil, &FieldError{Reason: "enum"}
		}
		if !slices.Contains(out, any(f.Enum[i])) {
			out = append(out, f.Enum[i])
		}
	}
	if f.MinItems != nil && len(out) < *f.MinItems {
		return nil, &FieldError{Reason: "minItems", Limit: strconv.Itoa(*f.MinItems)}
	}
	if f.MaxItems != nil && len(out) > *f.MaxItems {
		return nil, &FieldError{Reason: "maxItems", Limit: strconv.Itoa(*f.MaxItems)}
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

func validFormat(format, s string) bool {
	switch format {
	case "email":
		a, err := mail.ParseAddress(s)
		return err == nil && a.Address == s
	case "uri":
		u, err := url.Parse(s)
		return err == nil && u.Scheme != "" && (u.Host != "" || u.Opaque != "")
	case "date":
		_, err := time.Parse(time.DateOnly, s)
		return err == nil
	case "date-time":
		_, err := time.Parse(time.RFC3339, s)
		return err == nil
	}
	return true
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// FormatValue renders a field value for the person (a summary of their answers).
func (f ElicitField) FormatValue(v any) string {
	switch v := v.(type) {
	case float64:
		return fmtNum(v)
	case []any:
		parts := make([]string, 0, len(v))
		for _, x := range v {
			parts = append(parts, f.FormatValue(x))
		}
		return strings.Join(parts, ", ")
	case string:
		if i := slices.Index(f.Enum, v); i >= 0 && i < len(f.EnumTitles) {
			return f.EnumTitles[i]
		}
		return v
	}
	return fmt.Sprint(v)
}

// parseFields reads a form's requested schema: a flat object whose properties are strings
// (optionally enums, with enumNames or oneOf titles), numbers, integers or booleans.
func parseFields(schema any) ([]ElicitField, error) {
	if schema == nil {
		return nil, nil
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("read the requested schema: %w", err)
	}
	var s struct {
		Properties orderedProps `json:"properties"`
		Required   []string     `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("read the requested schema: %w", err)
	}
	if len(s.Properties) > maxFormFields {
		return nil, fmt.Errorf("the form has %d fields; packbot asks at most %d", len(s.Properties), maxFormFields)
	}
	fields := make([]ElicitField, 0, len(s.Properties))
	for _, p := range s.Properties {
		var d struct {
			Type        string   `json:"type"`
			Title       string   `json:"title"`
			Description string   `json:"description"`
			Enum        []string `json:"enum"`
			EnumNames   []string `json:"enumNames"`
			OneOf       []struct {
				Const string `json:"const"`
				Title string `json:"title"`
			} `json:"oneOf"`
			Default any `json:"default"`
			Items   *struct {
				Enum  []string `json:"enum"`
				AnyOf []struct {
					Const string `json:"const"`
					Title string `json:"title"`
				} `json:"anyOf"`
			} `json:"items"`
			MinItems  *int     `json:"minItems"`
			MaxItems  *int     `json:"maxItems"`
			Minimum   *float64 `json:"minimum"`
			Maximum   *float64 `json:"maximum"`
			MinLength *int     `json:"minLength"`
			MaxLength *int     `json:"maxLength"`
			Pattern   string   `json:"pattern"`
			Format    string   `json:"format"`
		}
		if err := json.Unmarshal(p.value, &d); err != nil {
			return nil, fmt.Errorf("read field %q of the requested schema: %w", p.name, err)
		}
		f := ElicitField{Name: p.name, Title: clip(d.Title, maxFieldTitle), Description: clip(d.Description, maxFieldText), Type: d.Type,
			Required: slices.Contains(s.Required, p.name), Enum: d.Enum, EnumTitles: d.EnumNames, Default: d.Default,
			Min: d.Minimum, Max: d.Maximum, MinLength: d.MinLength, MaxLength: d.MaxLength, Pattern: d.Pattern, Format: d.Format}
		if f.Type == FieldArray && d.Items != nil {
			f.MinItems, f.MaxItems, f.Enum = d.MinItems, d.MaxItems, d.Items.Enum
			for _, o := range d.Items.AnyOf {
				f.Enum = append(f.Enum, o.Const)
				f.EnumTitles = append(f.EnumTitles, cmpOr(o.Title, o.Const))
			}
		}
		if len(f.Enum) == 0 {
			for _, o := range d.OneOf {
				f.Enum = append(f.Enum, o.Const)
				f.EnumTitles = append(f.EnumTitles, cmpOr(o.Title, o.Const))
			}
		}
		if len(f.Enum) > maxEnumValues {
			return nil, fmt.Errorf("field %q of the requested schema has %d options; packbot offers at most %d", p.name, len(f.Enum), maxEnumValues)
		}
		if len(f.EnumTitles) != len(f.Enum) {
			f.EnumTitles = slices.Clone(f.Enum)
		}
		for i, t := range f.EnumTitles {
			f.EnumTitles[i] = clip(cmpOr(t, f.Enum[i]), maxFieldTitle)
		}
		switch {
		case f.Type == FieldString, f.Type == FieldNumber, f.Type == FieldInteger, f.Type == FieldBoolean:
		case f.Type == FieldArray && len(f.Enum) > 0:
		default:
			return nil, fmt.Errorf("field %q of the requested schema has type %q (forms take string, number, integer, boolean or an array of enum values)", p.name, d.Type)
		}
		fields = append(fields, f)
	}
	return fields, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// orderedProps keeps a JSON object's members in their order.
type orderedProps []struct {
	name  string
	value json.RawMessage
}

func (o *orderedProps) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("properties is not an object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		*o = append(*o, struct {
			name  string
			value json.RawMessage
		}{t.(string), v})
	}
	return nil
}

package mcp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/packbot/packbot/mcp"
)

const formSchema = `{"type":"object","properties":{
 "days":{"type":"number","title":"Days","minimum":0.5,"maximum":30},
 "n":{"type":"integer"},
 "email":{"type":"string","format":"email"},
 "code":{"type":"string","pattern":"^[A-Z]{3}$","minLength":3,"maxLength":3},
 "kind":{"type":"string","oneOf":[{"const":"a","title":"Alpha"},{"const":"b","title":"Beta"}]},
 "tags":{"type":"array","minItems":1,"maxItems":2,"items":{"anyOf":[{"const":"x","title":"Ex"},{"const":"y","title":"Why"},{"const":"z"}]}},
 "ok":{"type":"boolean","default":true}},"required":["days"]}`

// TestFieldParse: typed answers are checked against the schema; each refusal says why.
func TestFieldParse(t *testing.T) {
	var schema any
	if err := json.Unmarshal([]byte(formSchema), &schema); err != nil {
		t.Fatal(err)
	}
	fields, err := mcp.ParseFields(schema)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]mcp.ElicitField{}
	for _, f := range fields {
		by[f.Name] = f
	}
	if !by["days"].Required || by["n"].Required || by["ok"].Default != true || !reflect.DeepEqual(by["kind"].EnumTitles, []string{"Alpha", "Beta"}) {
		t.Fatalf("fields %+v", fields)
	}
	for _, c := range []struct {
		field, text string
		want        any
		reason      string
	}{
		{"days", "2,5", 2.5, ""}, {"days", "31", nil, "max"}, {"days", "0", nil, "min"}, {"days", "many", nil, "type"},
		{"n", "4", int64(4), ""}, {"n", "4.5", nil, "type"},
		{"email", "ana@example.com", "ana@example.com", ""}, {"email", "ana", nil, "format"},
		{"code", "ABC", "ABC", ""}, {"code", "AB", nil, "minLength"}, {"code", "abc", nil, "pattern"},
		{"kind", "Beta", "b", ""}, {"kind", "c", nil, "enum"},
		{"tags", "Ex, z", []any{"x", "z"}, ""}, {"tags", "x,y,z", nil, "maxItems"}, {"tags", "", nil, "minItems"}, {"tags", "w", nil, "enum"},
		{"ok", "sí", true, ""}, {"ok", "no", false, ""}, {"ok", "maybe", nil, "type"},
	} {
		got, err := by[c.field].Parse(c.text)
		var fe *mcp.FieldError
		switch {
		case c.reason == "" && (err != nil || !reflect.DeepEqual(got, c.want)):
			t.Errorf("%s %q = %#v, %v; want %#v", c.field, c.text, got, err, c.want)
		case c.reason != "" && (!errors.As(err, &fe) || fe.Reason != c.reason):
			t.Errorf("%s %q: error %v, want reason %s", c.field, c.text, err, c.reason)
		}
	}
	if _, err := mcp.ParseFields(map[string]any{"properties": map[string]any{"x": map[string]any{"type": "object"}}}); err == nil {
		t.Error("a nested object was accepted")
	}
}

// TestFormBounds: a server cannot flood the chat: too many fields or options are refused, long
// titles clipped, and only https links (http on loopback) are sent.
func TestFormBounds(t *testing.T) {
	many := map[string]any{}
	for i := range 21 {
		many[fmt.Sprintf("f%02d", i)] = map[string]any{"type": "string"}
	}
	if _, err := mcp.ParseFields(map[string]any{"properties": many}); err == nil || !strings.Contains(err.Error(), "at most 20") {
		t.Errorf("21 fields: %v", err)
	}
	enum := make([]any, 51)
	for i := range enum {
		enum[i] = fmt.Sprint(i)
	}
	if _, err := mcp.ParseFields(map[string]any{"properties": map[string]any{"e": map[string]any{"type": "string", "enum": enum}}}); err == nil {
		t.Error("51 options accepted")
	}
	fields, err := mcp.ParseFields(map[string]any{"properties": map[string]any{"s": map[string]any{"type": "string", "title": strings.Repeat("é", 300)}}})
	if err != nil || utf8.RuneCountInString(fields[0].Title) != 201 || !utf8.ValidString(fields[0].Title) {
		t.Errorf("long title: %v, %d runes", err, utf8.RuneCountInString(fields[0].Title))
	}
	for raw, ok := range map[string]bool{
		"https://hr.example/consent?x=1": true, "http://127.0.0.1:9/cb": true, "http://localhost/cb": true,
		"http://hr.example/consent": false, "javascript:alert(1)": false, "data:text/html,hi": false, "/relative": false,
		"https://" + strings.Repeat("a", 5000) + ".example": false,
	} {
		if err := mcp.CheckElicitURL(raw); (err == nil) != ok {
			t.Errorf("CheckElicitURL(%.40q) = %v, want ok=%v", raw, err, ok)
		}
	}
}

// FuzzParseFields: any schema a server sends is read or refused, never a panic.
func FuzzParseFields(f *testing.F) {
	f.Add([]byte(formSchema))
	f.Add([]byte(`{"properties":{"a":{"type":"array"}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var schema any
		if json.Unmarshal(raw, &schema) != nil {
			return
		}
		fields, err := mcp.ParseFields(schema)
		if err != nil {
			return
		}
		for _, fl := range fields {
			_, _ = fl.Parse("1, a")
			_ = fl.FormatValue(fl.Default)
		}
	})
}

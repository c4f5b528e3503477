package i18n

import (
	"testing"

	"github.com/packbot/packbot/packs"
)

func TestTPlaceholders(t *testing.T) {
	c := mustNew(t, &packs.Pack{Languages: map[string]packs.Language{"en": {Strings: map[string]string{
		"TWICE": "{a} and {a}, then {b} and {a}",
		"EDGES": "{a}{b}{a}",
		"PLAIN": "no placeholders here",
	}}}})
	tests := []struct {
		name string
		key  string
		args []string
		want string
	}{
		{"every occurrence", "TWICE", []string{"a", "1", "b", "2"}, "1 and 1, then 2 and 1"},
		{"adjacent placeholders", "EDGES", []string{"a", "x", "b", "y"}, "xyx"},
		{"missing value stays", "TWICE", []string{"a", "1"}, "1 and 1, then {b} and 1"},
		{"no args", "TWICE", nil, "{a} and {a}, then {b} and {a}"},
		{"unused args", "PLAIN", []string{"a", "1"}, "no placeholders here"},
		{"values are not re-expanded", "EDGES", []string{"a", "{b}", "b", "{a}"}, "{b}{a}{b}"},
		{"value naming itself", "TWICE", []string{"a", "{a}", "b", "B"}, "{a} and {a}, then B and {a}"},
		{"empty value", "EDGES", []string{"a", "", "b", "-"}, "-"},
		{"first pair wins", "EDGES", []string{"a", "1", "a", "2", "b", "3"}, "131"},
		{"odd trailing name ignored", "EDGES", []string{"a", "1", "b"}, "1{b}1"},
		{"names are case-sensitive", "EDGES", []string{"A", "1", "b", "2"}, "{a}2{a}"},
	}
	for _, tt := range tests {
		if got := c.T("en", tt.key, tt.args...); got != tt.want {
			t.Errorf("%s: T(%q, %q) = %q, want %q", tt.name, tt.key, tt.args, got, tt.want)
		}
	}
}

func TestTBuiltinPlaceholders(t *testing.T) {
	c := mustNew(t, nil)
	tests := []struct {
		lang, key string
		args      []string
		want      string
	}{
		{"es", "AUTH_SUCCESS_NAME", []string{"name", "Ana"}, "¡Te damos la bienvenida, Ana! Has iniciado sesión."},
		{"en", "CALL_AMBIGUOUS", []string{"tool", "search", "servers", "a, b"}, "search exists on several servers (a, b): write /call <server>/search …"},
		{"fr", "TOOL_FAILED", []string{"tool", "t", "result", "boom"}, "t a renvoyé une erreur :\nboom"},
		{"pt", "MESSAGE_TOO_LONG", []string{"size", "5000", "limit", "4000"}, "Sua mensagem é longa demais (5000 caracteres; o limite é 4000)."},
	}
	for _, tt := range tests {
		if got := c.T(tt.lang, tt.key, tt.args...); got != tt.want {
			t.Errorf("T(%q, %q) = %q, want %q", tt.lang, tt.key, got, tt.want)
		}
	}
}

func TestCompile(t *testing.T) {
	good := []string{"", "plain", "{a}", "x{a}y{b_2}z", "{_x}", `{"json":1}`, "{}", "{ a }", "{1}", "a{", "}{", "{{a}}", "ü{a}ï"}
	for _, s := range good {
		if _, err := compile(s); err != nil {
			t.Errorf("compile(%q): %v", s, err)
		}
	}
	bad := []string{"{a", "Hello {name", "{a b}", "{a-b}", "x {a.b} y", "{a{b}}", "{aé}"}
	for _, s := range bad {
		if _, err := compile(s); err == nil {
			t.Errorf("compile(%q) accepted it", s)
		}
	}
}

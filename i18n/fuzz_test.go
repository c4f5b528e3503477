package i18n

import (
	"regexp"
	"strings"
	"testing"

	"github.com/packbot/packbot/packs"
)

// reference is an independent implementation of the substitution, for the fuzz target.
var reference = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func FuzzT(f *testing.F) {
	f.Add("Hello {name}!", "name", "Ana", "es-ES")
	f.Add("{a}{a}{b}", "a", "{b}", "")
	f.Add("{{name}}", "name", "name}", "xx")
	f.Add(`{"json":1} {x}`, "x", "", "pt_BR")
	f.Add("Hello {name", "name", "Ana", "en")
	f.Add("ü{é}", "é", "v", "de")
	f.Fuzz(func(t *testing.T, s, name, value, lang string) {
		c, err := New(&packs.Pack{Languages: map[string]packs.Language{"en": {Strings: map[string]string{"FUZZ": s}}}})
		if err != nil {
			if !strings.Contains(err.Error(), "languages.en.strings.FUZZ") {
				t.Fatalf("error without the field path: %v", err)
			}
			return
		}
		got := c.T("en", "FUZZ", name, value)
		want := reference.ReplaceAllStringFunc(s, func(m string) string {
			if m[1:len(m)-1] == name {
				return value
			}
			return m
		})
		if s == "" {
			// An empty pack string counts as absent (New's contract: a pack may blank a
			// string to keep the built-in one), and a key with no text is answered with
			// the key itself.
			want = "FUZZ"
		}
		if got != want {
			t.Fatalf("T(%q; %q=%q) = %q, want %q", s, name, value, got, want)
		}
		// The given placeholder is left nowhere, unless the value itself brings it back.
		ph := "{" + name + "}"
		if reference.MatchString(ph) && strings.Contains(s, ph) && value != "" &&
			!strings.ContainsAny(value, "{}") && strings.Trim(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" &&
			strings.Contains(got, ph) {
			t.Fatalf("T(%q; %q=%q) = %q still contains %s", s, name, value, got, ph)
		}
		// Any language, well-formed or not, answers something for a known key.
		if out := c.T(lang, "CANCEL", name, value); out == "" {
			t.Fatalf("T(%q, CANCEL) is empty", lang)
		}
		c.Has(lang, "FUZZ")
		c.Language(lang)
	})
}

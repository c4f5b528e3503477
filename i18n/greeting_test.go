package i18n_test

import (
	"testing"

	"github.com/packbot/packbot/i18n"
)

// TestGreetingNoName pins the guest greeting of every built-in language: no dangling comma
// ("¡Hola,! …" was the bug) and no double space.
func TestGreetingNoName(t *testing.T) {
	cat, err := i18n.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"en": "Hello! How can I help you?",
		"es": "¡Hola! ¿En qué puedo ayudarte?",
		"fr": "Bonjour ! Comment puis-je vous aider ?",
		"pt": "Olá! Como posso ajudar?",
	}
	for _, lang := range cat.Languages() {
		got := i18n.Greeting(cat.T(lang, i18n.GreetingKey), "")
		if w, ok := want[lang]; !ok {
			t.Errorf("no expected guest greeting for built-in language %s (got %q)", lang, got)
		} else if got != w {
			t.Errorf("%s guest greeting %q, want %q", lang, got, w)
		}
		if named := i18n.Greeting(cat.T(lang, i18n.GreetingKey), "Ana"); named == got {
			t.Errorf("%s greeting ignores the name: %q", lang, named)
		}
	}
}

package i18n

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/packbot/packbot/packs"
)

func mustNew(t testing.TB, p *packs.Pack) *Catalog {
	t.Helper()
	c, err := New(p)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// lookupPack has a Spanish default language, Spanish and French overrides, and a German
// language only the pack defines.
func lookupPack() *packs.Pack {
	return &packs.Pack{
		Source:   "test-pack",
		Metadata: packs.Metadata{DefaultLanguage: "es"},
		Languages: map[string]packs.Language{
			"es": {
				GreetingMessage: "¡Buenas, {userName}!",
				Strings: map[string]string{
					"CANCEL":        "Anular",          // also built in: pack es beats built-in es
					"LOGOUT":        "Salir (pack es)", // fr has a built-in LOGOUT, so fr never sees this
					"PACK_ONLY_KEY": "solo pack es",    // no built-in: pack default beats built-in en
					"MENU_EXTRA":    "Extra {name}",
				},
			},
			"fr": {Strings: map[string]string{"CANCEL": "Laisser tomber"}},
			"de": {
				GreetingMessage: "Hallo {userName}!",
				Strings:         map[string]string{"YES": "Ja", "LANGUAGE_NAME": "Deutsch"},
			},
		},
	}
}

func TestLookupOrder(t *testing.T) {
	c := mustNew(t, lookupPack())
	tests := []struct {
		name, lang, key, want string
	}{
		{"pack L beats built-in L", "es", "CANCEL", "Anular"},
		{"pack L beats built-in L (fr)", "fr", "CANCEL", "Laisser tomber"},
		{"built-in L when pack L lacks the key", "es", "YES", "Sí"},
		{"built-in L beats pack default", "fr", "LOGOUT", "Se déconnecter"},
		{"pack default beats built-in en", "fr", "PACK_ONLY_KEY", "solo pack es"},
		{"pack default beats built-in en (en)", "en", "PACK_ONLY_KEY", "solo pack es"},
		{"built-in en is last", "en", "CANCEL", "Cancel"},
		{"unknown key is the key", "fr", "NO_SUCH_KEY", "NO_SUCH_KEY"},
		{"greetingMessage is a pack string", "es", "greetingMessage", "¡Buenas, {userName}!"},
		{"built-in greeting without pack greeting", "pt", "greetingMessage", "Olá, {userName}! Como posso ajudar?"},
		{"pack-only language: its own string", "de", "YES", "Ja"},
		{"pack-only language: its own greeting", "de", "greetingMessage", "Hallo {userName}!"},
		{"pack-only language: then pack default", "de", "CANCEL", "Anular"},
		{"pack-only language: then built-in en, not built-in default", "de", "NO", "No"},
		{"pack-only language: then built-in en (long)", "de", "AUTH_SUCCESS", "You are logged in."},
		{"empty lang is the default language", "", "CANCEL", "Anular"},
		{"empty lang: built-in default language", "", "YES", "Sí"},
		{"regional tag", "es-ES", "CANCEL", "Anular"},
		{"underscore tag", "fr_CA", "LOGOUT", "Se déconnecter"},
		{"upper-case tag", "DE", "YES", "Ja"},
		{"unsupported language: pack default then en", "it", "CANCEL", "Anular"},
		{"unsupported language: built-in en", "it", "AUTH_SUCCESS", "You are logged in."},
		{"unsupported language: unknown key", "it", "NO_SUCH_KEY", "NO_SUCH_KEY"},
	}
	for _, tt := range tests {
		if got := c.T(tt.lang, tt.key); got != tt.want {
			t.Errorf("%s: T(%q, %q) = %q, want %q", tt.name, tt.lang, tt.key, got, tt.want)
		}
	}
	if got := c.T("de", "MENU_EXTRA", "name", "Ana"); got != "Extra Ana" {
		t.Errorf("pack default string with args = %q", got)
	}
}

func TestHas(t *testing.T) {
	c := mustNew(t, lookupPack())
	tests := []struct {
		lang, key string
		want      bool
	}{
		{"en", "CANCEL", true},
		{"de", "AUTH_SUCCESS", true},
		{"fr", "PACK_ONLY_KEY", true},
		{"it", "PACK_ONLY_KEY", true},
		{"", "NO_SUCH_KEY", false},
		{"es", "NO_SUCH_KEY", false},
	}
	for _, tt := range tests {
		if got := c.Has(tt.lang, tt.key); got != tt.want {
			t.Errorf("Has(%q, %q) = %v, want %v", tt.lang, tt.key, got, tt.want)
		}
	}
}

func TestNilPack(t *testing.T) {
	c := mustNew(t, nil)
	if got := c.Default(); got != "en" {
		t.Errorf("Default() = %q", got)
	}
	if got := c.Languages(); !slices.Equal(got, []string{"en", "es", "fr", "pt"}) {
		t.Errorf("Languages() = %q", got)
	}
	if got := c.T("", "CANCEL"); got != "Cancel" {
		t.Errorf(`T("", CANCEL) = %q`, got)
	}
	if got := c.T("de", "CANCEL"); got != "Cancel" {
		t.Errorf(`T("de", CANCEL) = %q`, got)
	}
	if got := c.T("pt-BR", "CANCEL"); got != "Cancelar" {
		t.Errorf(`T("pt-BR", CANCEL) = %q`, got)
	}
}

func TestLanguage(t *testing.T) {
	c := mustNew(t, lookupPack())
	tests := []struct {
		tag, want string
		ok        bool
	}{
		{"es-ES", "es", true},
		{"pt_BR", "pt", true},
		{"EN", "en", true},
		{"fr", "fr", true},
		{"de", "de", true},
		{"de-AT", "de", true},
		{"", "", false},
		{"xx", "", false},
		{"it", "", false},
		{"und", "", false},
	}
	for _, tt := range tests {
		got, ok := c.Language(tt.tag)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Language(%q) = %q, %v, want %q, %v", tt.tag, got, ok, tt.want, tt.ok)
		}
	}
	if got := c.Languages(); !slices.Equal(got, []string{"de", "en", "es", "fr", "pt"}) {
		t.Errorf("Languages() = %q", got)
	}
	if got := c.Default(); got != "es" {
		t.Errorf("Default() = %q", got)
	}
	if _, ok := mustNew(t, nil).Language("de"); ok {
		t.Error(`Language("de") without a pack: ok`)
	}
}

func TestDefaultLanguage(t *testing.T) {
	tests := []struct{ def, want, cancel string }{
		{"", "en", "Cancel"},
		{"pt-BR", "pt", "Cancelar"},
		{"FR", "fr", "Annuler"},
		// A default language without a block of its own is supported and uses built-in English.
		{"it", "it", "Cancel"},
	}
	for _, tt := range tests {
		c := mustNew(t, &packs.Pack{Metadata: packs.Metadata{DefaultLanguage: tt.def}})
		if got := c.Default(); got != tt.want {
			t.Errorf("default %q: Default() = %q, want %q", tt.def, got, tt.want)
		}
		if got := c.T("", "CANCEL"); got != tt.cancel {
			t.Errorf("default %q: T(\"\", CANCEL) = %q, want %q", tt.def, got, tt.cancel)
		}
		if _, ok := c.Language(tt.want); !ok {
			t.Errorf("default %q: Language(%q) not ok", tt.def, tt.want)
		}
	}
}

func TestRegionalPackLanguages(t *testing.T) {
	c := mustNew(t, &packs.Pack{Languages: map[string]packs.Language{
		"pt-BR": {Strings: map[string]string{"YES": "Sim, claro", "NO": "Não, obrigado"}},
		"pt":    {Strings: map[string]string{"YES": "Sim (pt)"}},
	}})
	if got := c.T("pt", "YES"); got != "Sim (pt)" {
		t.Errorf("plain code should win: %q", got)
	}
	if got := c.T("pt-PT", "NO"); got != "Não, obrigado" {
		t.Errorf("regional code counts for its base language: %q", got)
	}
}

func TestGreetingMessageWinsOverStrings(t *testing.T) {
	c := mustNew(t, &packs.Pack{Languages: map[string]packs.Language{
		"en": {GreetingMessage: "Hi {userName}", Strings: map[string]string{"greetingMessage": "from strings", "CANCEL": ""}},
	}})
	if got := c.T("en", "greetingMessage", "userName", "Ana"); got != "Hi Ana" {
		t.Errorf("greeting = %q", got)
	}
	if got := c.T("en", "CANCEL"); got != "Cancel" {
		t.Errorf("an empty pack string should count as absent: %q", got)
	}
}

func TestNewRejectsMalformedPlaceholders(t *testing.T) {
	p := &packs.Pack{
		Source: "packs/demo/agent-pack.yaml",
		Languages: map[string]packs.Language{
			"es": {Strings: map[string]string{"AUTH_SUCCESS_NAME": "Hola {name", "OK": "bien {x}"}},
			"fr": {GreetingMessage: "Bonjour {userName !"},
		},
	}
	_, err := New(p)
	if err == nil {
		t.Fatal("New accepted a malformed placeholder")
	}
	for _, want := range []string{
		"packs/demo/agent-pack.yaml",
		`languages.es.strings.AUTH_SUCCESS_NAME: unclosed placeholder "{name"`,
		`languages.fr.greetingMessage: unclosed placeholder "{userName"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "OK") {
		t.Errorf("error %q names a valid string", err)
	}

	_, err = New(&packs.Pack{Languages: map[string]packs.Language{"en": {Strings: map[string]string{"K": "{a-b}"}}}})
	if err == nil || !strings.Contains(err.Error(), "languages.en.strings.K") {
		t.Errorf("New with {a-b}: %v", err)
	}
}

func TestNewAcceptsBracesThatAreNotPlaceholders(t *testing.T) {
	const s = `JSON {"a":1}, empty {}, lone { and }, {1}, {{name}}`
	c := mustNew(t, &packs.Pack{Languages: map[string]packs.Language{"en": {Strings: map[string]string{"K": s}}}})
	if got, want := c.T("en", "K", "name", "Ana"), `JSON {"a":1}, empty {}, lone { and }, {1}, {Ana}`; got != want {
		t.Errorf("T = %q, want %q", got, want)
	}
}

func TestNewRejectsUnknownLanguages(t *testing.T) {
	tests := []struct {
		p    *packs.Pack
		want string
	}{
		{&packs.Pack{Metadata: packs.Metadata{DefaultLanguage: "xx"}}, "metadata.defaultLanguage"},
		{&packs.Pack{Languages: map[string]packs.Language{"xx": {}}}, "languages.xx"},
		{&packs.Pack{Languages: map[string]packs.Language{"tlh": {Strings: map[string]string{"YES": "HISlaH"}}}}, "languages.tlh"},
	}
	for _, tt := range tests {
		_, err := New(tt.p)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New: error %v, want one naming %s", err, tt.want)
		}
	}
}

func TestNewDoesNotExecuteTemplates(t *testing.T) {
	const s = `{{.Name}} {{ if }} {name}`
	c := mustNew(t, &packs.Pack{Languages: map[string]packs.Language{"en": {Strings: map[string]string{"K": s}}}})
	if got := c.T("en", "K"); got != s {
		t.Errorf("T = %q, want %q", got, s)
	}
}

func TestConcurrentUse(t *testing.T) {
	c := mustNew(t, lookupPack())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				lang := []string{"es", "fr-FR", "", "de", "it"}[(i+j)%5]
				_ = c.T(lang, "AUTH_SUCCESS_NAME", "name", "Ana")
				_ = c.Has(lang, "CANCEL")
				_, _ = c.Language(lang)
			}
		})
	}
	wg.Wait()
}

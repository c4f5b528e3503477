package i18n

import "testing"

func TestNormalize(t *testing.T) {
	tests := []struct{ tag, want string }{
		{"en", "en"},
		{"EN", "en"},
		{"es-ES", "es"},
		{"es_ES", "es"},
		{"ES", "es"},
		{"pt-BR", "pt"},
		{"pt_BR", "pt"},
		{"es-419", "es"},
		{"zh-Hant-TW", "zh"},
		{" fr-CA ", "fr"},
		{"es-ES,es;q=0.9,en;q=0.8", "es"},
		{"de;q=0.9", "de"},
		{"iw", "he"},
		{"es-XYZW", "es"},
		{"", ""},
		{"   ", ""},
		{"und", ""},
		{"xx", ""},
		{"x-foo", ""},
		{"*", ""},
		{"not a language", ""},
	}
	for _, tt := range tests {
		if got := Normalize(tt.tag); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.tag, got, tt.want)
		}
	}
}

// quickBase must agree with Normalize whenever it answers, since T trusts it.
func TestQuickBaseAgreesWithNormalize(t *testing.T) {
	for _, tag := range []string{"es", "ES", "es-ES", "pt_BR", "es-419", "fil", "de-AT", "no-NO", "sr-RS"} {
		var buf [3]byte
		base, ok := quickBase(tag, &buf)
		if !ok {
			t.Errorf("quickBase(%q) declined", tag)
			continue
		}
		if got, want := string(base), Normalize(tag); got != want {
			t.Errorf("quickBase(%q) = %q, Normalize = %q", tag, got, want)
		}
	}
	for _, tag := range []string{"", "e", "abcd", "zh-Hant", "zh-min-nan", "es-", "e1", "sr-Latn-RS"} {
		var buf [3]byte
		if base, ok := quickBase(tag, &buf); ok {
			t.Errorf("quickBase(%q) = %q, want a decline", tag, base)
		}
	}
}

package i18n

import "testing"

func BenchmarkT(b *testing.B) {
	c := mustNew(b, lookupPack())
	cases := []struct {
		name, lang, key string
		args            []string
	}{
		{"plain", "es", "CHOOSE_OPTION", nil},
		{"args", "es", "AUTH_SUCCESS_NAME", []string{"name", "Ana"}},
		{"args3", "en", "WHOAMI_AUTHENTICATED", []string{"name", "Ana", "identity", "did:example:123", "roles", "admin, user"}},
		{"region", "pt-BR", "MCP_CONFIG_SUCCESS", []string{"server", "github", "count", "12"}},
		{"default", "", "greetingMessage", []string{"userName", "Ana"}},
		{"unsupported", "it-IT", "CANCEL", nil},
		{"missing", "fr", "NO_SUCH_KEY", nil},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = c.T(bc.lang, bc.key, bc.args...)
			}
		})
	}
}

func BenchmarkNew(b *testing.B) {
	p := lookupPack()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(p); err != nil {
			b.Fatal(err)
		}
	}
}

package packs_test

import (
	"strings"
	"testing"
)

func TestPlaceholders(t *testing.T) {
	env := map[string]string{"HOST": "mcp.example", "TOKEN": "t0k", "EMPTY": "", "GREETING_NAME": "Ana"}
	src := `
languages:
  en:
    greetingMessage: "Hi ${GREETING_NAME}, ${GREETING_NAME}! ${UNSET_TEXT} {userName}"
    systemPrompt: "${EMPTY:-fallback} and ${MISSING:-default:with:colons}"
mcp:
  servers:
    - name: s
      url: https://${HOST}/mcp
      headers:
        Authorization: Bearer ${TOKEN}
        X-Optional: ${EMPTY:-}
`
	p := parse(t, src, env)
	en := p.Languages["en"]
	if en.GreetingMessage != "Hi Ana, Ana! ${UNSET_TEXT} {userName}" {
		t.Errorf("greeting %q", en.GreetingMessage)
	}
	if en.SystemPrompt != "fallback and default:with:colons" {
		t.Errorf("prompt %q", en.SystemPrompt)
	}
	s := p.MCP.Servers[0]
	if s.URL != "https://mcp.example/mcp" || s.Headers["Authorization"] != "Bearer t0k" || s.Headers["X-Optional"] != "" {
		t.Errorf("server %+v", s)
	}
	found := false
	for _, w := range p.Warnings {
		found = found || (w.Path == "languages.en.greetingMessage" && strings.Contains(w.Message, "${UNSET_TEXT} is not set"))
	}
	if !found {
		t.Errorf("unset variable in a text is a warning:\n%s", dump(p.Warnings))
	}
}

func TestUserControlledHeaderWithUnsetVariableIsNotSent(t *testing.T) {
	p := parse(t, server(`name: gh
url: https://api.example/mcp
accessMode: user-controlled
headers: {Authorization: "Bearer ${GITHUB_TOKEN}", X-Static: yes}
userConfig: {fields: [{name: token, type: secret, label: Token, headerTemplate: "Bearer {value}"}]}`), nil)
	h := p.MCP.Servers[0].Headers
	if _, ok := h["Authorization"]; ok || h["X-Static"] != "yes" {
		t.Fatalf("headers %q", h)
	}
}

func TestLookalikePlaceholders(t *testing.T) {
	tests := []struct {
		name, value, fragment string
		secret                string // must not appear in any message
	}{
		{"env colon", "{env:TOKEN}", `write ${TOKEN}`, ""},
		{"env dot in braces", "{{ env.TOKEN }}", `write ${TOKEN}`, ""},
		{"pasted secret", "${sk-proj-abcdefghijklmnop}", "not a placeholder packbot expands", "abcdefghijklmnop"},
		{"bash default", "${TOKEN-x}", "${NAME:-default}", ""},
		{"spaces", "${ TOKEN }", "not a placeholder", ""},
		{"unterminated", "Bearer ${TOKEN", "unterminated placeholder", ""},
		{"bare dollar", "Bearer $TOKEN", `write ${TOKEN}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := problemsOf(t, server("name: s\nurl: http://mcp.invalid/mcp\nheaders:\n  Authorization: '"+tt.value+"'"), map[string]string{"TOKEN": "x"})
			p := wantProblem(t, ps, "mcp.servers[0].headers.Authorization", tt.fragment)
			if tt.secret != "" && strings.Contains(p.String(), tt.secret) {
				t.Fatalf("message repeats the secret: %s", p)
			}
		})
	}
	t.Run("look-alikes are rejected in texts too", func(t *testing.T) {
		ps := problemsOf(t, "languages: {en: {greetingMessage: 'Hi {env:USER}'}}\n", nil)
		wantProblem(t, ps, "languages.en.greetingMessage", "write ${USER}")
	})
	t.Run("a dollar amount in a text is fine", func(t *testing.T) {
		parse(t, "languages: {en: {greetingMessage: 'Fees from $5, or $USD 10'}}\n", nil)
	})
}

package packs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/packbot/packbot/packs"
)

// TestFiveMistakes is the acceptance case of the foundation issue: five mistakes in one pack,
// all reported in one run with file:line, and nothing else.
func TestFiveMistakes(t *testing.T) {
	_, err := packs.Load(packs.Options{Path: "testdata/mistakes.yaml"})
	var inv *packs.InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("want InvalidError, got %v", err)
	}
	want := []struct {
		line     int
		path     string
		fragment string
	}{
		{7, "mcp.servers[0].transport", `unknown transport "websocket"`},
		{9, "mcp.servers[1].url", "needs a url"},
		{15, "mcp.servers[2].headers.Authorization", "${SECRET} is not set"},
		{20, "mcp.servers[3].headers.Authorization", `"{env:TOKEN}" is not a placeholder packbot expands; write ${TOKEN}`},
		{34, "mcp.servers[4].toolAccess.approval", "need an admin-controlled server"},
	}
	if len(inv.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(inv.Problems), len(want), dump(inv.Problems))
	}
	for i, w := range want {
		p := inv.Problems[i]
		if p.Pos.File != "testdata/mistakes.yaml" || p.Pos.Line != w.line || p.Path != w.path || !strings.Contains(p.Message, w.fragment) {
			t.Errorf("problem %d = %s\nwant line %d, path %s, containing %q", i, p, w.line, w.path, w.fragment)
		}
	}
	if !strings.Contains(err.Error(), "testdata/mistakes.yaml:15:") {
		t.Errorf("error text lacks file:line: %v", err)
	}
}

func TestValidationRules(t *testing.T) {
	const url = "http://mcp.invalid/mcp"
	tests := []struct {
		name      string
		src       string
		path      string
		fragments []string
	}{
		{"stdio without command", server("name: s\ntransport: stdio"), "mcp.servers[0].command", []string{"needs a command"}},
		{"neither url nor command", server("name: s"), "mcp.servers[0].transport", []string{"missing"}},
		{"sse without url", server("name: s\ntransport: sse"), "mcp.servers[0].url", []string{"sse server needs a url"}},
		{"url not http", server("name: s\nurl: ftp://x/y"), "mcp.servers[0].url", []string{"not an http(s) URL"}},
		{"url credentials redacted", server("name: s\nurl: 'ftp://me:hunter2@x/'"), "mcp.servers[0].url", []string{"REDACTED"}},
		{"server without name", server("url: " + url), "mcp.servers[0].name", []string{"needs a name"}},
		{"bad server name", server("name: my server\nurl: " + url), "mcp.servers[0].name", []string{"letters, digits"}},
		{"duplicate server", server("name: s\nurl: "+url) + "    - name: s\n      url: " + url + "\n", "mcp.servers[1].name", []string{"duplicate server name"}},
		{"access mode", server("name: s\nurl: " + url + "\naccessMode: shared"), "mcp.servers[0].accessMode", []string{"unknown access mode"}},
		{"timeout", server("name: s\nurl: " + url + "\ntimeoutMs: 0"), "mcp.servers[0].timeoutMs", []string{"positive"}},
		{"idle", server("name: s\nurl: " + url + "\nmaxSessionIdleSeconds: -1"), "mcp.servers[0].maxSessionIdleSeconds", []string{"positive"}},
		{"user-controlled needs fields", server("name: s\nurl: " + url + "\naccessMode: user-controlled"), "mcp.servers[0].userConfig.fields", []string{"needs userConfig.fields"}},
		{"field type", server("name: s\nurl: " + url + "\naccessMode: user-controlled\nuserConfig: {fields: [{name: t, type: pin}]}"),
			"mcp.servers[0].userConfig.fields[0].type", []string{"unknown field type"}},
		{"duplicate field", server("name: s\nurl: " + url + "\naccessMode: user-controlled\nuserConfig: {fields: [{name: t}, {name: t}]}"),
			"mcp.servers[0].userConfig.fields[1].name", []string{"duplicate field"}},
		{"header template", server("name: s\nurl: " + url + "\naccessMode: user-controlled\nuserConfig: {fields: [{name: t, headerTemplate: Bearer}]}"),
			"mcp.servers[0].userConfig.fields[0].headerTemplate", []string{"{value}"}},
		{"oauth mode", server("name: s\nurl: " + url + "\naccessMode: user-controlled\nauthentication: {mode: saml}"),
			"mcp.servers[0].authentication.mode", []string{"unknown authentication mode"}},
		{"oauth on admin server", server("name: s\nurl: " + url + "\nauthentication: {mode: oauth2}"),
			"mcp.servers[0].authentication", []string{"user-controlled"}},
		{"policy without tools", server("name: s\nurl: " + url + "\ntoolAccess: {roles: {}, approval: [{approvers: [m]}]}"),
			"mcp.servers[0].toolAccess.approval[0].tools", []string{"must list the tools"}},
		{"policy without approvers", server("name: s\nurl: " + url + "\ntoolAccess: {roles: {e: [a]}, approval: [{tools: [a]}]}"),
			"mcp.servers[0].toolAccess.approval[0].approvers", []string{"roles that may approve"}},
		{"policy timeout", server("name: s\nurl: " + url + "\ntoolAccess: {roles: {e: [a]}, approval: [{tools: [a], approvers: [m], timeoutMinutes: 0}]}"),
			"mcp.servers[0].toolAccess.approval[0].timeoutMinutes", []string{"positive"}},
		{"policy quorum", server("name: s\nurl: " + url + "\ntoolAccess: {roles: {e: [a]}, approval: [{tools: [a], approvers: [m], quorum: 0}]}"),
			"mcp.servers[0].toolAccess.approval[0].quorum", []string{"1 or more"}},
		{"empty role tool", server("name: s\nurl: " + url + "\ntoolAccess: {roles: {e: ['']}}"),
			"mcp.servers[0].toolAccess.roles.e[0]", []string{"must not be empty"}},
		{"provider", "llm: {provider: gemini}\n", "llm.provider", []string{"unknown LLM provider", "openai, anthropic, ollama"}},
		{"temperature range", "llm: {temperature: 3}\n", "llm.temperature", []string{"between 0 and 2"}},
		{"temperature type", "llm: {temperature: hot}\n", "llm.temperature", []string{"must be a number"}},
		{"max tokens", "llm: {maxTokens: 0}\n", "llm.maxTokens", []string{"positive"}},
		{"base url", "llm: {baseUrl: localhost:11434}\n", "llm.baseUrl", []string{"not an http(s) URL"}},
		{"memory window", "memory: {window: -1}\n", "memory.window", []string{"0 (no memory)"}},
		{"default language", "metadata: {defaultLanguage: English}\n", "metadata.defaultLanguage", []string{"not a language code"}},
		{"language key", "languages: {Spanish: {greetingMessage: hola}}\n", "languages.Spanish", []string{"not a language code"}},
		{"required without enabled", "flows: {authentication: {enabled: false, required: true}}\n", "flows.authentication.required", []string{"not enabled"}},
		{"identity attribute", "flows: {authentication: {userIdentityAttribute: ''}}\n", "flows.authentication.userIdentityAttribute", []string{"must name"}},
		{"admin user empty", "flows: {authentication: {adminUsers: ['']}}\n", "flows.authentication.adminUsers[0]", []string{"must not be empty"}},
		{"credential type", "flows: {authentication: {credential: {issuers: [did:key:z6Mk]}}}\n", "flows.authentication.credential.type", []string{"W3C credential type"}},
		{"credential issuer", "flows: {authentication: {credential: {type: T, issuers: [acme]}}}\n", "flows.authentication.credential.issuers[0]", []string{"not a DID"}},
		{"credential format", "flows: {authentication: {credential: {type: T, formats: [anoncreds]}}}\n", "flows.authentication.credential.formats[0]", []string{"unknown credential format"}},
		{"welcome template", "flows: {welcome: {templateKey: ''}}\n", "flows.welcome.templateKey", []string{"must not be empty"}},
		{"menu id", "flows: {menu: {items: [{action: logout}]}}\n", "flows.menu.items[0].id", []string{"needs an id"}},
		{"menu duplicate", "flows: {menu: {items: [{id: logout}, {id: logout}]}}\n", "flows.menu.items[1].id", []string{"duplicate menu item"}},
		{"menu action", "flows: {menu: {items: [{id: x, action: dance}]}}\n", "flows.menu.items[0].action", []string{"unknown menu action"}},
		{"menu id as action", "flows: {menu: {items: [{id: dance}]}}\n", "flows.menu.items[0].action", []string{`"dance"`}},
		{"menu visibleWhen", "flows: {menu: {items: [{id: logout, visibleWhen: sometimes}]}}\n", "flows.menu.items[0].visibleWhen", []string{"unknown visibleWhen"}},
		{"menu badge", "flows: {menu: {items: [{id: logout, badge: count}]}}\n", "flows.menu.items[0].badge", []string{"unknown badge"}},
		{"bool type", "flows: {welcome: {enabled: perhaps}}\n", "flows.welcome.enabled", []string{"not a boolean"}},
		{"int type", "memory: {window: lots}\n", "memory.window", []string{"whole number"}},
		{"mapping expected", "llm: openai\n", "llm", []string{"must be a mapping"}},
		{"list expected", "metadata: {tags: demo}\n", "metadata.tags", []string{"must be a list"}},
		{"args not an array", server("name: s\ncommand: x\nargs: '-y pkg'"), "mcp.servers[0].args", []string{"JSON array"}},
		{"unset variable in url", server("name: s\nurl: ${MCP_URL}"), "mcp.servers[0].url", []string{"${MCP_URL} is not set"}},
		{"unset variable in command", server("name: s\ncommand: ${BIN}"), "mcp.servers[0].command", []string{"${BIN} is not set"}},
		{"unset variable in stdio env", server("name: s\ncommand: x\nenv: {TOKEN: '${T}'}"), "mcp.servers[0].env.TOKEN", []string{"${T} is not set"}},
		{"unset oauth secret", server("name: s\nurl: " + url + "\naccessMode: user-controlled\nauthentication: {mode: oauth2, clientSecret: '${CS}'}"),
			"mcp.servers[0].authentication.clientSecret", []string{"${CS} is not set"}},
		{"bare $VAR in header", server("name: s\nurl: " + url + "\nheaders: {Authorization: Bearer $TOKEN}"), "mcp.servers[0].headers.Authorization", []string{`"$TOKEN" is not expanded here; write ${TOKEN}`}},
		{"bare $VAR in url", server("name: s\nurl: http://$HOST/mcp"), "mcp.servers[0].url", []string{"write ${HOST}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := wantProblem(t, problemsOf(t, tt.src, nil), tt.path, tt.fragments...)
			if p.Pos.Line == 0 {
				t.Fatalf("problem without a line: %s", p)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	src := `
metadata: {id: x, defaultLanguage: de}
languages: {en: {greetingMessage: hi}}
llm: {modle: gpt-4o, reasoningEffort: extreme}
futureBlock: {a: 1}
flows:
  authentication: {enabled: true}
mcp:
  servers:
    - name: s
      command: x
      headers: {A: b}
      toolAccess:
        default: sometimes
        public: [x]
        roles: {e: [a, b]}
        approval:
          - {tools: [a, never], approvers: [m]}
          - {tools: [a], approvers: [n]}
    - name: legacy
      url: http://mcp.invalid/mcp
      userConfig: {fields: [{name: t}]}
      allowlist: [q]
      toolAccess:
        default: everyone
        approval: [{tools: [q], approvers: [m]}]
    - name: listed
      url: http://mcp.invalid/mcp
      allowlist: [a]
      toolAccess: {roles: {e: [a, b]}}
    - name: personal
      url: http://mcp.invalid/mcp
      accessMode: user-controlled
      userConfig: {fields: [{name: t}]}
`
	p := parse(t, src, nil)
	want := map[string]string{
		"metadata.defaultLanguage":                       "no languages.de block",
		"llm.modle":                                      `unknown key "modle" is ignored (did you mean "model"?)`,
		"llm.reasoningEffort":                            "passed to the provider as written",
		"futureBlock":                                    "unknown top-level key: kept",
		"flows.authentication":                           "authenticate menu item is hidden",
		"mcp.servers[0].headers":                         "ignored: a stdio server",
		"mcp.servers[0].toolAccess.default":              "tools listed under no role are denied",
		"mcp.servers[0].toolAccess":                      "ignored when roles is set",
		"mcp.servers[0].toolAccess.approval[0].tools[1]": "no role grants",
		"mcp.servers[0].toolAccess.approval[1].tools[0]": "already gated by approval[0]",
		"mcp.servers[1].userConfig":                      "ignored on an admin-controlled server",
		"mcp.servers[1].toolAccess.default":              "treated as admin",
		"mcp.servers[1].toolAccess.approval":             "legacy model",
		"mcp.servers[2].toolAccess.roles.e[1]":           "not in the server's allowlist",
		"mcp.servers[3].userConfig.fields[0].label":      "no label",
	}
	for path, fragment := range want {
		found := false
		for _, w := range p.Warnings {
			found = found || (w.Path == path && strings.Contains(w.Message, fragment) && w.Severity == packs.Warning)
		}
		if !found {
			t.Errorf("no warning at %s containing %q among:\n%s", path, fragment, dump(p.Warnings))
		}
	}
	if _, ok := p.Unsupported["futureBlock"]; !ok {
		t.Error("unknown top-level block not kept")
	}
}

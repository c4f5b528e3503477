package packs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packbot/packbot/packs"
)

func TestExamplePacksLoad(t *testing.T) {
	for _, name := range []string{"demo", "wise-corporate", "github-personal"} {
		t.Run(name, func(t *testing.T) {
			p, err := packs.Load(packs.Options{Path: name})
			if err != nil {
				t.Fatal(err)
			}
			if p.Metadata.ID == "" || len(p.MCP.Servers) != 1 {
				t.Fatalf("metadata %+v, %d servers", p.Metadata, len(p.MCP.Servers))
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	p := parse(t, "metadata:\n  id: x\n", nil)
	checks := []struct {
		name      string
		got, want any
	}{
		{"defaultLanguage", p.Metadata.DefaultLanguage, "en"},
		{"provider", p.LLM.Provider, "openai"},
		{"model", p.LLM.Model, "gpt-4o-mini"},
		{"temperature", p.LLM.Temperature, 0.3},
		{"maxTokens", p.LLM.MaxTokens, 512},
		{"memory.window", p.Memory.Window, 8},
		{"welcome.enabled", p.Flows.Welcome.Enabled, true},
		{"welcome.sendOnProfile", p.Flows.Welcome.SendOnProfile, true},
		{"welcome.templateKey", p.Flows.Welcome.TemplateKey, "greetingMessage"},
		{"auth.enabled", p.Flows.Authentication.Enabled, true},
		{"auth.required", p.Flows.Authentication.Required, false},
		{"auth.userIdentityAttribute", p.Flows.Authentication.UserIdentityAttribute, "name"},
		{"auth.defaultRole", p.Flows.Authentication.DefaultRole, "user"},
		{"menu items", len(p.Flows.Menu.Items), 2},
		{"menu[0]", p.Flows.Menu.Items[0].Action + "/" + p.Flows.Menu.Items[0].VisibleWhen, "authenticate/unauthenticated"},
		{"menu[1]", p.Flows.Menu.Items[1].Action + "/" + p.Flows.Menu.Items[1].VisibleWhen, "logout/authenticated"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestServerDefaults(t *testing.T) {
	p := parse(t, server(`
name: s
url: http://mcp.invalid/mcp
toolAccess:
  roles: {employee: [a]}
  approval:
    - tools: [a]
      approvers: [boss]`)+`
    - name: cmd
      command: srv
      accessMode: user-controlled
      userConfig:
        fields:
          - name: token
            headerTemplate: "Bearer {value}"
`, nil)
	s := p.MCP.Servers[0]
	if s.Transport != packs.TransportStreamableHTTP || s.AccessMode != packs.AdminControlled || !s.Enabled ||
		s.TimeoutMs != 30000 || s.MaxSessionIdleSeconds != 1200 {
		t.Fatalf("server defaults: %+v", s)
	}
	a := s.ToolAccess.Approval[0]
	if a.TimeoutMinutes != 60 || a.Quorum != 1 || !a.AllowSelfApproval {
		t.Fatalf("approval defaults: %+v", a)
	}
	c := p.MCP.Servers[1]
	if c.Transport != packs.TransportStdio {
		t.Fatalf("transport inferred from command: %q", c.Transport)
	}
	f := c.UserConfig.Fields[0]
	if f.Type != packs.FieldText || f.HeaderName != "Authorization" || f.Secret() {
		t.Fatalf("field defaults: %+v", f)
	}
}

func TestModelDefaultFollowsProvider(t *testing.T) {
	for provider, model := range map[string]string{"openai": "gpt-4o-mini", "anthropic": packs.DefaultAnthropicModel, "ollama": packs.DefaultOllamaModel} {
		p := parse(t, "llm:\n  provider: "+provider+"\n", nil)
		if p.LLM.Model != model {
			t.Errorf("%s: model %q, want %q", provider, p.LLM.Model, model)
		}
	}
}

func TestHologramPackLoadsUnchanged(t *testing.T) {
	p, err := packs.Load(packs.Options{Path: "testdata/hologram-full.yaml", Env: packs.MapEnv(map[string]string{"CREDENTIAL_DEFINITION_ID": "did:cheqd:123/anoncreds"})})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Languages["en"].GreetingMessage; got != "Welcome {userName}" {
		t.Errorf("welcomeMessage alias: %q", got)
	}
	if p.Flows.Authentication.CredentialDefinitionID != "did:cheqd:123/anoncreds" {
		t.Errorf("credentialDefinitionId: %q", p.Flows.Authentication.CredentialDefinitionID)
	}
	if args := p.MCP.Servers[0].Args; len(args) != 2 || args[1] != "@upstash/context7-mcp" {
		t.Errorf("args from a JSON string: %q", args)
	}
	gh := p.MCP.Servers[1]
	if _, ok := gh.Headers["Authorization"]; ok {
		t.Errorf("a user-controlled header with an unset variable must not be sent: %q", gh.Headers)
	}
	if got := gh.UserConfig.Fields[0].Label.In("es", "en"); !strings.HasPrefix(got, "Por favor") {
		t.Errorf("label es: %q", got)
	}
	if got := p.Flows.Menu.Items[1].Label.In("fr", "es"); got != "Configurar" {
		t.Errorf("label fallback: %q", got)
	}
	for _, block := range []string{"rag", "imageGeneration", "integrations"} {
		if _, ok := p.Unsupported[block]; !ok {
			t.Errorf("%s not kept", block)
		}
		found := false
		for _, w := range p.Warnings {
			found = found || (w.Path == block && strings.Contains(w.Message, "not supported"))
		}
		if !found {
			t.Errorf("no warning for %s: %s", block, dump(p.Warnings))
		}
	}
}

func TestJSONPack(t *testing.T) {
	p, err := packs.Load(packs.Options{Path: "testdata/minimal.json"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.MCP.Servers[0].Headers["X-Key"]; got != "fallback" {
		t.Fatalf("default placeholder: %q", got)
	}
}

func TestLocate(t *testing.T) {
	dir := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	folder := filepath.Join(dir, "folder")
	write(filepath.Join(folder, "agent-pack.yml"), "metadata: {id: from-folder}\n")
	file := filepath.Join(dir, "file.yaml")
	write(file, "metadata: {id: from-file}\n")
	env := func(m map[string]string) packs.Env { return packs.MapEnv(m) }

	tests := []struct {
		name    string
		opts    packs.Options
		wantID  string
		wantErr string
	}{
		{"folder with .yml", packs.Options{Path: folder}, "from-folder", ""},
		{"AGENT_PACK_PATH file", packs.Options{Env: env(map[string]string{"AGENT_PACK_PATH": file})}, "from-file", ""},
		{"AGENT_PACK_PATH folder", packs.Options{Env: env(map[string]string{"AGENT_PACK_PATH": folder})}, "from-folder", ""},
		{"--pack wins over AGENT_PACK_PATH", packs.Options{Path: file, Env: env(map[string]string{"AGENT_PACK_PATH": folder})}, "from-file", ""},
		{"explicit missing path", packs.Options{Path: filepath.Join(dir, "nope")}, "", "no such file"},
		{"AGENT_PACK_PATH missing", packs.Options{Env: env(map[string]string{"AGENT_PACK_PATH": filepath.Join(dir, "nope")})}, "", "no such file"},
		{"folder without a pack", packs.Options{Path: dir}, "", "holds none of agent-pack.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := packs.Load(tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Metadata.ID != tt.wantID {
				t.Fatalf("loaded %q, want %q", p.Metadata.ID, tt.wantID)
			}
		})
	}
}

func TestEmbeddedDefault(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./agent-packs here
	p, err := packs.Load(packs.Options{Env: packs.MapEnv(map[string]string{"PACKBOT_SELF": "/usr/local/bin/packbot"})})
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != "embedded:packs/demo/agent-pack.yaml" || p.Metadata.ID != "packbot-demo" {
		t.Fatalf("source %q id %q", p.Source, p.Metadata.ID)
	}
	if got := p.MCP.Servers[0].Command; got != "/usr/local/bin/packbot" {
		t.Fatalf("demo server command %q, want the running binary", got)
	}
}

func TestDefaultFolder(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll("agent-packs", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("agent-packs/agent-pack.yaml", []byte("metadata: {id: local}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := packs.Load(packs.Options{})
	if err != nil || p.Metadata.ID != "local" {
		t.Fatalf("p=%v err=%v", p, err)
	}
}

func TestEnvOverrides(t *testing.T) {
	src := `
llm: {provider: openai, model: from-pack, temperature: 0.1, maxTokens: 100, agentPrompt: pack}
memory: {window: 3}
flows:
  authentication:
    required: false
    userIdentityAttribute: email
    rolesAttribute: r
    defaultRole: d
    adminUsers: [a]
    adminAvatars: [b]
    credentialDefinitionId: from-pack
`
	env := map[string]string{
		"LLM_PROVIDER": "anthropic", "OPENAI_MODEL": "m", "OPENAI_TEMPERATURE": "1.5", "OPENAI_MAX_TOKENS": "2048",
		"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "OPENAI_REASONING_EFFORT": "high", "AGENT_PROMPT": "env prompt",
		"AUTH_REQUIRED": "yes", "USER_IDENTITY_ATTRIBUTE": "employeeLogin", "ROLES_ATTRIBUTE": "roles",
		"DEFAULT_ROLE": "employee", "ADMIN_USERS": " x@y , z@y,", "ADMIN_AVATARS": "Boss", "AGENT_MEMORY_WINDOW": "20",
		"CREDENTIAL_DEFINITION_ID": "from-env",
	}
	p := parse(t, src, env)
	a := p.Flows.Authentication
	got := []any{p.LLM.Provider, p.LLM.Model, p.LLM.Temperature, p.LLM.MaxTokens, p.LLM.BaseURL, p.LLM.ReasoningEffort,
		p.LLM.AgentPrompt, a.Required, a.UserIdentityAttribute, a.RolesAttribute, a.DefaultRole,
		strings.Join(a.AdminUsers, "|"), strings.Join(a.AdminAvatars, "|"), p.Memory.Window, a.CredentialDefinitionID}
	want := []any{"anthropic", "m", 1.5, 2048, "http://127.0.0.1:11434/v1", "high", "env prompt", true, "employeeLogin",
		"roles", "employee", "x@y|z@y", "Boss", 20, "from-pack"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("field %d = %v, want %v", i, got[i], want[i])
		}
	}

	t.Run("empty values do not override", func(t *testing.T) {
		p := parse(t, src, map[string]string{"OPENAI_MODEL": "", "AGENT_MEMORY_WINDOW": " "})
		if p.LLM.Model != "from-pack" || p.Memory.Window != 3 {
			t.Fatalf("model %q window %d", p.LLM.Model, p.Memory.Window)
		}
	})
	t.Run("provider without model", func(t *testing.T) {
		// The pack's model is its provider's: another provider from the environment gets its own
		// default model, with a warning naming the variable and the fix.
		for provider, model := range map[string]string{"ollama": packs.DefaultOllamaModel, "anthropic": packs.DefaultAnthropicModel, "openai": "from-pack"} {
			p := parse(t, src, map[string]string{"LLM_PROVIDER": provider})
			if p.LLM.Provider != provider || p.LLM.Model != model {
				t.Errorf("LLM_PROVIDER=%s: provider %s model %s, want model %s", provider, p.LLM.Provider, p.LLM.Model, model)
			}
			warned := len(p.Warnings) == 1 && strings.Contains(p.Warnings[0].String(), "OPENAI_MODEL") &&
				strings.Contains(p.Warnings[0].String(), "LLM_PROVIDER")
			if warned != (provider != "openai") {
				t.Errorf("LLM_PROVIDER=%s: warnings %v", provider, p.Warnings)
			}
		}
	})
	t.Run("booleans", func(t *testing.T) {
		for v, want := range map[string]bool{"true": true, "1": true, "YES": true, "false": false, "0": false, "no": false} {
			p := parse(t, "flows: {authentication: {required: true}}\n", map[string]string{"AUTH_REQUIRED": v})
			if p.Flows.Authentication.Required != want {
				t.Errorf("AUTH_REQUIRED=%s gave %v", v, !want)
			}
		}
	})
	t.Run("credential definition from env only when the pack has none", func(t *testing.T) {
		p := parse(t, "flows: {authentication: {credentialDefinitionId: '${CORP_DEF}'}}\n", map[string]string{"CREDENTIAL_DEFINITION_ID": "env-def"})
		if got := p.Flows.Authentication.CredentialDefinitionID; got != "env-def" {
			t.Fatalf("unresolved placeholder counts as none: got %q", got)
		}
		p = parse(t, "metadata: {id: x}\n", map[string]string{"CREDENTIAL_DEFINITION_ID": "env-def"})
		if got := p.Flows.Authentication.CredentialDefinitionID; got != "env-def" {
			t.Fatalf("absent: got %q", got)
		}
	})
	t.Run("bad values name the variable", func(t *testing.T) {
		ps := problemsOf(t, "metadata: {id: x}\n", map[string]string{
			"OPENAI_TEMPERATURE": "hot", "OPENAI_MAX_TOKENS": "many", "AUTH_REQUIRED": "maybe", "AGENT_MEMORY_WINDOW": "1.5"})
		for _, name := range []string{"OPENAI_TEMPERATURE", "OPENAI_MAX_TOKENS", "AUTH_REQUIRED", "AGENT_MEMORY_WINDOW"} {
			found := false
			for _, p := range ps {
				found = found || (p.Pos.File == "$"+name && strings.HasPrefix(p.Message, name))
			}
			if !found {
				t.Errorf("no problem for %s:\n%s", name, dump(ps))
			}
		}
	})
}

func TestServersConfig(t *testing.T) {
	src := server("name: from-pack\nurl: http://mcp.invalid/mcp")
	t.Run("valid array replaces the servers", func(t *testing.T) {
		p := parse(t, src, map[string]string{"MCP_SERVERS_CONFIG": `[{"name":"a","transport":"sse","url":"http://127.0.0.1:2/sse",
			"headers":{"Authorization":"Bearer ${TOK}"}},{"name":"b","command":"x","toolAccess":{"adminOnly":["rm"]}}]`, "TOK": "t0k"})
		if len(p.MCP.Servers) != 2 || p.MCP.Servers[0].Name != "a" || p.MCP.Servers[1].Name != "b" {
			t.Fatalf("servers %+v", p.MCP.Servers)
		}
		if p.MCP.Servers[0].Headers["Authorization"] != "Bearer t0k" || !p.MCP.Servers[1].Enabled {
			t.Fatalf("expansion and defaults inside MCP_SERVERS_CONFIG: %+v", p.MCP.Servers)
		}
	})
	t.Run("empty array removes the servers", func(t *testing.T) {
		if p := parse(t, src, map[string]string{"MCP_SERVERS_CONFIG": "[]"}); len(p.MCP.Servers) != 0 {
			t.Fatalf("servers %+v", p.MCP.Servers)
		}
	})
	t.Run("not json is an error", func(t *testing.T) {
		ps := problemsOf(t, src, map[string]string{"MCP_SERVERS_CONFIG": "not json"})
		p := wantProblem(t, ps, "mcp.servers", "MCP_SERVERS_CONFIG must be a JSON array", "invalid character")
		if p.Pos.File != "$MCP_SERVERS_CONFIG" {
			t.Fatalf("position %v", p.Pos)
		}
	})
	t.Run("an object is not an array", func(t *testing.T) {
		problemsOf(t, src, map[string]string{"MCP_SERVERS_CONFIG": `{"name":"a"}`})
	})
	t.Run("problems inside point into the variable", func(t *testing.T) {
		ps := problemsOf(t, src, map[string]string{"MCP_SERVERS_CONFIG": `[{"name":"a","transport":"carrier-pigeon"}]`})
		p := wantProblem(t, ps, "mcp.servers[0].transport", "unknown transport")
		if p.Pos.String() != "$MCP_SERVERS_CONFIG:1:26" {
			t.Fatalf("position %v", p.Pos)
		}
	})
}

func TestDotEnv(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".env")
	content := `# comment
FROM_FILE=file
export EXPORTED = yes
SHADOWED=file
QUOTED="a \"b\"\nc"  
SINGLE='lit $X #no'
TRAILING=value # comment
EMPTY=
`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := packs.WithDotEnv(path, packs.MapEnv(map[string]string{"SHADOWED": "process", "EMPTY_IN_PROCESS": ""}))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"FROM_FILE": "file", "EXPORTED": "yes", "SHADOWED": "process",
		"QUOTED": "a \"b\"\nc", "SINGLE": "lit $X #no", "TRAILING": "value", "EMPTY": ""} {
		if got, _ := env(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	t.Run("missing file is fine", func(t *testing.T) {
		if _, err := packs.WithDotEnv(filepath.Join(dir, "none"), packs.MapEnv(nil)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("malformed line names file and line", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.env")
		if err := os.WriteFile(bad, []byte("OK=1\nthis is not an assignment\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := packs.WithDotEnv(bad, packs.MapEnv(nil))
		if err == nil || !strings.Contains(err.Error(), "bad.env:2") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unterminated quote", func(t *testing.T) {
		_, err := packs.ParseDotEnv("x.env", []byte(`A="open`))
		if err == nil || !strings.Contains(err.Error(), "x.env:1: A: unterminated") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSyntaxError(t *testing.T) {
	_, err := packs.Parse("broken.yaml", []byte("metadata:\n  id: x\n llm: [\n"), nil)
	var inv *packs.InvalidError
	if !errors.As(err, &inv) || len(inv.Problems) != 1 || inv.Problems[0].Pos.Line == 0 {
		t.Fatalf("err = %v", err)
	}
	if _, err := packs.Parse("empty.yaml", []byte("# nothing\n"), nil); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty pack: %v", err)
	}
}

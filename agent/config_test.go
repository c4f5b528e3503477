package agent_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/packs"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestFromPack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		llm     packs.LLM
		env     map[string]string
		ok      bool
		wantErr error
		want    agent.Config // checked when ok
	}{
		{name: "openai key", llm: packs.LLM{Provider: "openai", Model: "gpt-4o-mini", Temperature: 0.3, MaxTokens: 512, ReasoningEffort: "low"},
			env: map[string]string{"OPENAI_API_KEY": "k"}, ok: true,
			want: agent.Config{Provider: "openai", Model: "gpt-4o-mini", APIKey: "k", Temperature: 0.3, MaxTokens: 512, ReasoningEffort: "low"}},
		{name: "openai base url only", llm: packs.LLM{Provider: "openai", BaseURL: "http://127.0.0.1:3200/v1"}, ok: true,
			want: agent.Config{Provider: "openai", BaseURL: "http://127.0.0.1:3200/v1"}},
		{name: "empty provider is openai", llm: packs.LLM{}, env: map[string]string{"OPENAI_API_KEY": "k"}, ok: true,
			want: agent.Config{Provider: "openai", APIKey: "k"}},
		{name: "openai not configured", llm: packs.LLM{Provider: "openai"}, env: map[string]string{"ANTHROPIC_API_KEY": "a"}},
		{name: "anthropic key", llm: packs.LLM{Provider: "anthropic", Model: "claude", BaseURL: "http://proxy/v1"},
			env: map[string]string{"ANTHROPIC_API_KEY": "a"}, ok: true,
			want: agent.Config{Provider: "anthropic", Model: "claude", APIKey: "a", BaseURL: "http://proxy/v1"}},
		{name: "anthropic base url is not enough", llm: packs.LLM{Provider: "anthropic", BaseURL: "http://proxy/v1"},
			env: map[string]string{"OPENAI_API_KEY": "k"}},
		{name: "ollama endpoint", llm: packs.LLM{Provider: "ollama", BaseURL: "http://pack:11434"},
			env: map[string]string{"OLLAMA_ENDPOINT": "http://env:11434"}, ok: true,
			want: agent.Config{Provider: "ollama", BaseURL: "http://env:11434"}},
		{name: "ollama pack base url", llm: packs.LLM{Provider: "ollama", BaseURL: "http://pack:11434"}, ok: true,
			want: agent.Config{Provider: "ollama", BaseURL: "http://pack:11434"}},
		{name: "ollama not configured", llm: packs.LLM{Provider: "ollama"}, env: map[string]string{"OPENAI_API_KEY": "k"}},
		{name: "provider case", llm: packs.LLM{Provider: " Ollama "}, env: map[string]string{"OLLAMA_ENDPOINT": "http://e"}, ok: true,
			want: agent.Config{Provider: "ollama", BaseURL: "http://e"}},
		{name: "unknown provider", llm: packs.LLM{Provider: "gemini"}, env: map[string]string{"OPENAI_API_KEY": "k"},
			wantErr: agent.ErrUnknownProvider},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok, err := agent.FromPack(tc.llm, envOf(tc.env))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || ok {
					t.Fatalf("FromPack = ok %v, err %v; want error %v", ok, err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.ok {
				t.Fatalf("FromPack = ok %v, err %v; want ok %v", ok, err, tc.ok)
			}
			if ok && cfg != tc.want {
				t.Errorf("config = %+v\nwant %+v", cfg, tc.want)
			}
		})
	}
}

func TestNewRejectsUnusableConfig(t *testing.T) {
	for name, cfg := range map[string]agent.Config{
		"unknown provider":     {Provider: "gemini", APIKey: testKey},
		"openai no key no url": {Provider: "openai"},
		"anthropic no key":     {Provider: "anthropic", BaseURL: "http://x/v1"},
		"ollama no endpoint":   {Provider: "ollama", APIKey: testKey},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := agent.New(cfg)
			if err == nil || m != nil {
				t.Fatalf("New(%+v) = %v, %v; want an error", cfg, m, err)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error contains the key: %v", err)
			}
		})
	}
	if _, err := agent.New(agent.Config{Provider: "gemini"}); !errors.Is(err, agent.ErrUnknownProvider) {
		t.Errorf("unknown provider: err = %v, want ErrUnknownProvider", err)
	}
}

func TestNewDefaults(t *testing.T) {
	for provider, model := range map[string]string{
		"":                      packs.DefaultOpenAIModel,
		agent.ProviderOpenAI:    packs.DefaultOpenAIModel,
		agent.ProviderAnthropic: packs.DefaultAnthropicModel,
		agent.ProviderOllama:    packs.DefaultOllamaModel,
	} {
		m, err := agent.New(agent.Config{Provider: provider, APIKey: testKey, BaseURL: "http://bot.invalid"})
		if err != nil {
			t.Fatalf("New(%q): %v", provider, err)
		}
		cfg := m.Config()
		if cfg.Model != model || cfg.MaxRounds != agent.DefaultMaxRounds || cfg.HTTPClient == nil ||
			cfg.HTTPClient.Timeout != agent.DefaultHTTPTimeout || cfg.Logger == nil {
			t.Errorf("New(%q) config = %+v", provider, cfg)
		}
	}
}

// TestOllamaThroughOpenAICompatibleAPI shows that an ollama pack reaches OLLAMA_ENDPOINT/v1 with
// the OpenAI wire format.
func TestOllamaThroughOpenAICompatibleAPI(t *testing.T) {
	srv := agenttest.New(t)
	endpoint := strings.TrimSuffix(srv.URL, "/v1")
	llm := packs.LLM{Provider: "ollama", Model: packs.DefaultOllamaModel, MaxTokens: 64, ReasoningEffort: "high"}
	for _, ep := range []string{endpoint, endpoint + "/", endpoint + "/v1"} {
		cfg, ok, err := agent.FromPack(llm, envOf(map[string]string{"OLLAMA_ENDPOINT": ep}))
		if err != nil || !ok {
			t.Fatalf("FromPack: ok %v, err %v", ok, err)
		}
		m, err := agent.New(cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		reply, err := m.Run(t.Context(), agent.Turn{User: "hi llama"}, nil)
		if err != nil {
			t.Fatalf("Run with endpoint %q: %v", ep, err)
		}
		if reply.Text != "you said: hi llama" {
			t.Errorf("Text = %q", reply.Text)
		}
	}
	r := srv.Requests()[0]
	raw := string(r.Raw)
	if r.Model != packs.DefaultOllamaModel || !strings.Contains(raw, `"max_tokens":64`) ||
		strings.Contains(raw, "max_completion_tokens") || strings.Contains(raw, "reasoning_effort") {
		t.Errorf("ollama request: model %q, body %s", r.Model, raw)
	}
	if got := r.Header.Get("Authorization"); strings.Contains(got, testKey) {
		t.Errorf("Authorization = %q", got)
	}
}

package agent

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/packbot/packbot/packs"
)

// Providers, the values of Config.Provider and of a pack's llm.provider.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderOllama    = "ollama"
)

// Defaults applied by [New].
const (
	DefaultMaxRounds   = 5
	DefaultHTTPTimeout = 60 * time.Second
)

// Environment variables read by [FromPack].
const (
	EnvOpenAIKey      = "OPENAI_API_KEY"
	EnvAnthropicKey   = "ANTHROPIC_API_KEY"
	EnvOllamaEndpoint = "OLLAMA_ENDPOINT"
)

// Config configures a [Model]. The zero value of every field but APIKey (openai, anthropic) or
// BaseURL (ollama) has a usable default.
type Config struct {
	// Provider is openai (the default), anthropic or ollama.
	Provider string
	// Model is the model name; "" takes the pack default of the provider (packs.Default*Model).
	Model string
	// BaseURL, for openai, is an OpenAI-compatible server (e.g. http://127.0.0.1:3200/v1; ""
	// is api.openai.com); for anthropic, the Messages API base (default
	// https://api.anthropic.com/v1); for ollama, the Ollama endpoint (e.g.
	// http://localhost:11434), to which "/v1" is added.
	BaseURL string
	// APIKey is the provider's key. It is never logged and is redacted from errors. openai
	// with a BaseURL and ollama work without one.
	APIKey string
	// Temperature is sent as is (0 is 0). langchaingo leaves it out for reasoning models
	// (o1-*, o3, gpt-5*), which only accept the default.
	Temperature float64
	// MaxTokens bounds the answer; 0 leaves it to the provider (anthropic: 2048). openai sends
	// it as max_completion_tokens, ollama as max_tokens.
	MaxTokens int
	// ReasoningEffort (minimal, low, medium, high) is sent as reasoning_effort to openai when
	// set. langchaingo v0.1.14 has the field but never fills it, so Model adds it to the
	// request body itself. anthropic and ollama ignore it.
	ReasoningEffort string
	// MaxRounds is how many LLM calls one [Model.Run] may make; 0 means DefaultMaxRounds.
	MaxRounds int
	// HTTPClient makes the provider calls; nil means a client with DefaultHTTPTimeout.
	HTTPClient *http.Client
	// Logger receives debug lines per LLM call and tool call; nil discards.
	Logger *slog.Logger
	// Observer, when set, is told of each LLM call (metrics, traces).
	Observer Observer
}

// LogValue logs the configuration without the API key.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("provider", c.Provider),
		slog.String("model", c.Model),
		slog.String("base_url", c.BaseURL),
		slog.Bool("api_key_set", c.APIKey != ""),
		slog.Float64("temperature", c.Temperature),
		slog.Int("max_tokens", c.MaxTokens),
		slog.String("reasoning_effort", c.ReasoningEffort),
		slog.Int("max_rounds", c.MaxRounds),
	)
}

// FromPack builds a Config from the pack's llm block and the environment (getenv returns ""
// for unset):
//
//   - openai: APIKey from OPENAI_API_KEY, BaseURL from llm.baseUrl; configured when either
//     is set.
//   - anthropic: APIKey from ANTHROPIC_API_KEY, BaseURL from llm.baseUrl; configured when the
//     key is set.
//   - ollama: BaseURL from OLLAMA_ENDPOINT, else llm.baseUrl; configured when one is set.
//
// It returns ok=false and no error when the provider is not configured, so that the bot runs
// without an LLM, and an error wrapping [ErrUnknownProvider] for an unknown provider. Model,
// Temperature, MaxTokens and ReasoningEffort come from the pack; the rest stays zero for the
// caller to fill (Logger, HTTPClient).
func FromPack(l packs.LLM, getenv func(string) string) (cfg Config, ok bool, err error) {
	cfg = Config{
		Provider:        normProvider(l.Provider),
		Model:           l.Model,
		Temperature:     l.Temperature,
		MaxTokens:       l.MaxTokens,
		ReasoningEffort: l.ReasoningEffort,
	}
	switch cfg.Provider {
	case ProviderOpenAI:
		cfg.APIKey = getenv(EnvOpenAIKey)
		cfg.BaseURL = l.BaseURL
		ok = cfg.APIKey != "" || cfg.BaseURL != ""
	case ProviderAnthropic:
		cfg.APIKey = getenv(EnvAnthropicKey)
		cfg.BaseURL = l.BaseURL
		ok = cfg.APIKey != ""
	case ProviderOllama:
		cfg.BaseURL = getenv(EnvOllamaEndpoint)
		if cfg.BaseURL == "" {
			cfg.BaseURL = l.BaseURL
		}
		ok = cfg.BaseURL != ""
	default:
		return Config{}, false, fmt.Errorf("llm.provider %q: %w", l.Provider, ErrUnknownProvider)
	}
	if !ok {
		return Config{}, false, nil
	}
	return cfg, true, nil
}

func normProvider(p string) string {
	p = strings.ToLower(strings.TrimSpace(p))
	if p == "" {
		return ProviderOpenAI
	}
	return p
}

// withDefaults returns c with its defaults filled.
func (c Config) withDefaults() Config {
	c.Provider = normProvider(c.Provider)
	if c.Model == "" {
		switch c.Provider {
		case ProviderAnthropic:
			c.Model = packs.DefaultAnthropicModel
		case ProviderOllama:
			c.Model = packs.DefaultOllamaModel
		default:
			c.Model = packs.DefaultOpenAIModel
		}
	}
	if c.MaxRounds <= 0 {
		c.MaxRounds = DefaultMaxRounds
	}
	if c.HTTPClient == nil {
		// Keep a connection alive per concurrent turn (the default keeps two per host, so most
		// calls would open a new one under load).
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 256
		c.HTTPClient = &http.Client{Timeout: DefaultHTTPTimeout, Transport: tr}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/openai"
)

// noKey is the bearer token sent to OpenAI-compatible servers that need none (ollama, a local
// server given as BaseURL): langchaingo's openai client refuses to start without a token.
const noKey = "none"

// Model is an LLM with a bounded tool loop ([Model.Run]). It is safe for concurrent use; it
// holds no conversation state and no goroutines, so it needs no Close.
type Model struct {
	cfg Config
	llm llms.Model
	key redactor
	log *slog.Logger
	obs Observer
	// callOpts are the per-call options that do not depend on the turn.
	callOpts []llms.CallOption
}

// New builds the provider's client from cfg, after filling its defaults. It does no network
// I/O: a wrong key or an unreachable server shows on the first [Model.Run]. It fails for an
// unknown provider ([ErrUnknownProvider]) and for a configuration that cannot work (openai
// without key and base URL, anthropic without key, ollama without endpoint).
func New(cfg Config) (*Model, error) {
	cfg = cfg.withDefaults()
	m := &Model{cfg: cfg, key: redactor(cfg.APIKey), log: cfg.Logger.With("provider", cfg.Provider, "model", cfg.Model), obs: cfg.Observer}
	if m.obs == nil {
		m.obs = nopObserver{}
	}
	d := &doer{client: cfg.HTTPClient}
	m.callOpts = []llms.CallOption{llms.WithModel(cfg.Model), llms.WithTemperature(cfg.Temperature)}
	if cfg.MaxTokens > 0 {
		m.callOpts = append(m.callOpts, llms.WithMaxTokens(cfg.MaxTokens))
	}
	var err error
	switch cfg.Provider {
	case ProviderOpenAI:
		if cfg.APIKey == "" && cfg.BaseURL == "" {
			return nil, errors.New("new openai model: no API key and no base URL")
		}
		d.reasoningEffort = cfg.ReasoningEffort
		m.llm, err = newOpenAI(cfg, cfg.BaseURL, d)
	case ProviderOllama:
		if cfg.BaseURL == "" {
			return nil, errors.New("new ollama model: no endpoint")
		}
		// Ollama's OpenAI-compatible API; older versions know only max_tokens.
		m.callOpts = append(m.callOpts, openai.WithLegacyMaxTokensField())
		m.llm, err = newOpenAI(cfg, ollamaV1(cfg.BaseURL), d)
	case ProviderAnthropic:
		if cfg.APIKey == "" {
			return nil, errors.New("new anthropic model: no API key")
		}
		opts := []anthropic.Option{anthropic.WithToken(cfg.APIKey), anthropic.WithModel(cfg.Model), anthropic.WithHTTPClient(d)}
		if cfg.BaseURL != "" {
			// Only when set: the client writes its default into itself on every call when its
			// base URL is empty, which races under concurrent use.
			opts = append(opts, anthropic.WithBaseURL(cfg.BaseURL))
		}
		m.llm, err = anthropic.New(opts...)
	default:
		return nil, fmt.Errorf("new model: provider %q: %w", cfg.Provider, ErrUnknownProvider)
	}
	if err != nil {
		return nil, fmt.Errorf("new %s model: %w", cfg.Provider, m.scrub(err))
	}
	return m, nil
}

// Config returns the configuration in use, defaults filled.
func (m *Model) Config() Config { return m.cfg }

func newOpenAI(cfg Config, baseURL string, d *doer) (llms.Model, error) {
	token := cfg.APIKey
	if token == "" {
		token = noKey
	}
	// Every option is set explicitly, so that the client reads nothing from the process
	// environment (it would take OPENAI_MODEL, OPENAI_BASE_URL, OPENAI_ORGANIZATION…).
	return openai.New(
		openai.WithToken(token),
		openai.WithModel(cfg.Model),
		openai.WithBaseURL(baseURL),
		openai.WithOrganization(""),
		openai.WithHTTPClient(d),
	)
}

// ollamaV1 returns the OpenAI-compatible base URL of an Ollama endpoint.
func ollamaV1(endpoint string) string {
	endpoint = strings.TrimRight(endpoint, "/")
	if strings.HasSuffix(endpoint, "/v1") {
		return endpoint
	}
	return endpoint + "/v1"
}

// generate makes one LLM call and maps its failure to ErrTimeout / ErrProvider.
func (m *Model) generate(ctx context.Context, msgs []llms.MessageContent, tools []llms.Tool) (*llms.ContentResponse, error) {
	p := &probe{}
	ctx = context.WithValue(ctx, probeKey{}, p)
	opts := m.callOpts
	if len(tools) > 0 {
		opts = append(opts[:len(opts):len(opts)], llms.WithTools(tools))
	}
	return m.call(ctx, msgs, opts, p)
}

// call makes one LLM call, observed; it maps its failure to ErrTimeout / ErrProvider.
func (m *Model) call(ctx context.Context, msgs []llms.MessageContent, opts []llms.CallOption, p *probe) (*llms.ContentResponse, error) {
	ctx, end := m.obs.StartLLMCall(ctx, m.cfg.Provider, m.cfg.Model)
	resp, err := m.llm.GenerateContent(ctx, msgs, opts...)
	switch {
	case err != nil:
		err = m.classify(ctx, err, p)
	case resp == nil || len(resp.Choices) == 0:
		err = fmt.Errorf("%s: %w: empty response", m.cfg.Provider, ErrProvider)
	}
	in, out := usage(resp)
	end(in, out, err)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// classify turns a GenerateContent error into one of ours, using what the doer saw: langchaingo
// flattens transport errors (a ctx deadline becomes a plain string) and status errors.
func (m *Model) classify(ctx context.Context, err error, p *probe) error {
	prov := m.cfg.Provider
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(cerr, context.DeadlineExceeded) {
			return fmt.Errorf("%s: %w: %w", prov, ErrTimeout, cerr)
		}
		return fmt.Errorf("%s: %w", prov, cerr)
	}
	switch {
	case p.err != nil:
		var ne net.Error
		if errors.Is(p.err, context.DeadlineExceeded) || errors.As(p.err, &ne) && ne.Timeout() {
			return fmt.Errorf("%s: %w: %s", prov, ErrTimeout, m.key.String(p.err.Error()))
		}
		return fmt.Errorf("%s: %w: unreachable: %s", prov, ErrProvider, m.key.String(p.err.Error()))
	case p.status != 0 && (p.status < 200 || p.status > 299):
		return &ProviderError{Provider: prov, StatusCode: p.status, Message: m.key.String(p.message)}
	case p.sent:
		return fmt.Errorf("%s: %w: bad response: %w", prov, ErrProvider, m.scrub(err))
	default: // the request was never sent: langchaingo refused our messages
		return fmt.Errorf("%s: build request: %w", prov, m.scrub(err))
	}
}

// scrub returns err, or a copy of its text without the API key when it holds the key.
func (m *Model) scrub(err error) error {
	if s := err.Error(); m.key.String(s) != s {
		return errors.New(m.key.String(s))
	}
	return err
}

// probeKey keys the *probe of one LLM call in the request context.
type probeKey struct{}

// probe records what happened to the HTTP request of one LLM call. The doer writes it inside
// GenerateContent, in the caller's goroutine, before classify reads it.
type probe struct {
	sent    bool
	status  int
	message string // the error message of a non-2xx answer
	err     error  // the transport error
}

// doer is the HTTP client given to langchaingo. It records each call's outcome in the call's
// probe and, for openai, adds reasoning_effort to chat requests.
type doer struct {
	client          *http.Client
	reasoningEffort string
}

// maxErrorBody bounds how much of an error answer is read for its message.
const maxErrorBody = 64 << 10

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	p, _ := req.Context().Value(probeKey{}).(*probe)
	if p == nil {
		p = &probe{}
	}
	if d.reasoningEffort != "" && strings.HasSuffix(req.URL.Path, "/chat/completions") {
		r, err := withField(req, "reasoning_effort", d.reasoningEffort)
		if err != nil {
			return nil, err
		}
		req = r
	}
	p.sent = true
	resp, err := d.client.Do(req)
	if err != nil {
		p.err = err
		return nil, err
	}
	p.status = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		_ = resp.Body.Close() // the body was read or is unusable; nothing to do
		p.message = errorMessage(body, rerr)
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	return resp, nil
}

// withField returns a copy of req whose JSON object body has key set to value.
func withField(req *http.Request, key, value string) (*http.Request, error) {
	if req.Body == nil {
		return req, nil
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if err := req.Body.Close(); err != nil {
		return nil, fmt.Errorf("close request body: %w", err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("decode request body: %w", err)
	}
	v, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", key, err)
	}
	obj[key] = v
	if body, err = json.Marshal(obj); err != nil {
		return nil, fmt.Errorf("encode request body: %w", err)
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return r, nil
}

// errorMessage extracts the message of an error answer: error.message of an OpenAI- or
// Anthropic-style body, else the start of the body.
func errorMessage(body []byte, readErr error) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 500 {
		s = strings.ToValidUTF8(s[:500], "") + "…"
	}
	if s == "" && readErr != nil {
		return "read error body: " + readErr.Error()
	}
	return s
}

// Interface guards: langchaingo's clients take any value with this method as their HTTP client.
var _ interface {
	Do(*http.Request) (*http.Response, error)
} = (*doer)(nil)

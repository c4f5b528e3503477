package agent

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors; Run and New wrap them, test with errors.Is.
var (
	// ErrTooManyRounds: the model still asked for tools after Config.MaxRounds LLM calls.
	ErrTooManyRounds = errors.New("too many tool rounds")
	// ErrTimeout: the provider did not answer in time (the ctx deadline or the HTTP client's
	// timeout passed). A ctx deadline also matches context.DeadlineExceeded.
	ErrTimeout = errors.New("llm provider timeout")
	// ErrProvider: the provider answered with an error status (see [*ProviderError] for the
	// status), answered something that is not a usable completion, or could not be reached.
	ErrProvider = errors.New("llm provider error")
	// ErrUnknownProvider: Config.Provider (or the pack's llm.provider) names no provider.
	ErrUnknownProvider = errors.New("unknown llm provider")
)

// ProviderError is the error for a provider that answered with an HTTP error status. It
// matches [ErrProvider] with errors.Is. Its message never contains the API key.
type ProviderError struct {
	Provider   string // openai, anthropic or ollama
	StatusCode int    // the HTTP status
	Message    string // the provider's message, API key redacted
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("%s: status %d: %s", e.Provider, e.StatusCode, e.Message)
}

// Unwrap returns [ErrProvider].
func (e *ProviderError) Unwrap() error { return ErrProvider }

// redactor removes a secret from error texts.
type redactor string

const redacted = "[redacted]"

func (r redactor) String(s string) string {
	if len(r) < 4 { // too short to be a key, and replacing it would mangle the text
		return s
	}
	return strings.ReplaceAll(s, string(r), redacted)
}

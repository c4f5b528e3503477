package agent

import (
	"context"

	"github.com/tmc/langchaingo/llms"
)

// Observer is told of each LLM call (telemetry implements it). It is called concurrently; end
// is called exactly once, with the tokens the provider reported (0 when it reported none).
type Observer interface {
	StartLLMCall(ctx context.Context, provider, model string) (_ context.Context, end func(inputTokens, outputTokens int, err error))
}

type nopObserver struct{}

func (nopObserver) StartLLMCall(ctx context.Context, _, _ string) (context.Context, func(int, int, error)) {
	return ctx, func(int, int, error) {}
}

// usage reads the tokens of a response: langchaingo puts the provider's usage in the first
// choice's GenerationInfo (openai: PromptTokens/CompletionTokens; anthropic:
// InputTokens/OutputTokens; every choice repeats it).
func usage(resp *llms.ContentResponse) (in, out int) {
	if resp == nil || len(resp.Choices) == 0 || resp.Choices[0] == nil {
		return 0, 0
	}
	info := resp.Choices[0].GenerationInfo
	return firstInt(info, "PromptTokens", "InputTokens"), firstInt(info, "CompletionTokens", "OutputTokens")
}

func firstInt(info map[string]any, keys ...string) int {
	for _, k := range keys {
		switch v := info[k].(type) {
		case int:
			return v
		case int64:
			return int(v)
		case int32:
			return int(v)
		case float64:
			return int(v)
		}
	}
	return 0
}

var _ Observer = nopObserver{}

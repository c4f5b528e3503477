package agent

import (
	"context"
	"fmt"

	"github.com/tmc/langchaingo/llms"
)

// Complete answers one prompt without tools (MCP sampling: a server has the pack's LLM write
// something during a call). maxTokens > 0 bounds the answer. It returns the text and the model
// that wrote it.
func (m *Model) Complete(ctx context.Context, system string, msgs []Message, maxTokens int) (text, model string, err error) {
	var lm []llms.MessageContent
	if system != "" {
		lm = append(lm, llms.TextParts(llms.ChatMessageTypeSystem, system))
	}
	if lm, err = m.appendMessages(lm, msgs...); err != nil {
		return "", "", fmt.Errorf("complete: %w", err)
	}
	opts := m.callOpts
	if maxTokens > 0 {
		opts = append(opts[:len(opts):len(opts)], llms.WithMaxTokens(maxTokens))
	}
	p := &probe{}
	resp, err := m.call(context.WithValue(ctx, probeKey{}, p), lm, opts, p)
	if err != nil {
		return "", "", fmt.Errorf("complete: %w", err)
	}
	return resp.Choices[0].Content, m.cfg.Model, nil
}

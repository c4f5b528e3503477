package flows

import (
	"context"
	"fmt"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/mcp"
)

// NewSampler returns what answers the MCP servers' sampling requests: the pack's LLM, without
// tools (the pool lets only servers whose pack entry allows sampling use it, within its token
// limit).
func NewSampler(m *agent.Model) mcp.Sampler { return sampler{m} }

type sampler struct{ m *agent.Model }

func (s sampler) Sample(ctx context.Context, r mcp.SampleRequest) (mcp.SampleResult, error) {
	msgs := make([]agent.Message, 0, len(r.Messages))
	for _, m := range r.Messages {
		role := agent.RoleUser
		if m.Role == "assistant" {
			role = agent.RoleAssistant
		}
		msgs = append(msgs, agent.Message{Role: role, Content: m.Text})
	}
	text, model, err := s.m.Complete(ctx, r.SystemPrompt, msgs, r.MaxTokens)
	if err != nil {
		return mcp.SampleResult{}, fmt.Errorf("sample for MCP server %s: %w", r.Server, err)
	}
	return mcp.SampleResult{Text: text, Model: model}, nil
}

package mcp

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sampler answers a server's sampling request with the pack's LLM, without tools (package
// agent's Model does, wired by cmd).
type Sampler interface {
	Sample(ctx context.Context, r SampleRequest) (SampleResult, error)
}

// SampleRequest is what a server asked the LLM. Messages are text only.
type SampleRequest struct {
	Server       string
	SystemPrompt string
	Messages     []SampleMessage
	MaxTokens    int
}

// SampleMessage is one message of a sampling request: Role "user" or "assistant".
type SampleMessage struct {
	Role string
	Text string
}

// SampleResult is the LLM's answer.
type SampleResult struct {
	Text  string
	Model string
}

// samples reports whether this slot's server may sample (the pack allows it and there is an
// LLM to sample with).
func (c *conn) samples() bool {
	_, ok := c.srv.SamplingAllowed()
	return ok && c.p.sampler != nil
}

//lint:file-ignore SA1019 sampling is deprecated from protocol 2026-07-28 only; servers of 2025-11-25 use it

// sample runs a server's sampling request on the pack's LLM, within the pack's token limit, and
// tells the person whose call is in flight (when there is exactly one).
func (c *conn) sample(ctx context.Context, req *mcpsdk.CreateMessageRequest) (*mcpsdk.CreateMessageResult, error) {
	limit, _ := c.srv.SamplingAllowed()
	p := req.Params
	r := SampleRequest{Server: c.srv.Name, SystemPrompt: p.SystemPrompt, MaxTokens: limit}
	if p.MaxTokens > 0 && int(p.MaxTokens) < limit {
		r.MaxTokens = int(p.MaxTokens)
	}
	for _, m := range p.Messages {
		t, ok := m.Content.(*mcpsdk.TextContent)
		if !ok {
			return nil, &jsonrpc.Error{Code: codeInvalidParams, Message: "packbot samples text messages only"}
		}
		r.Messages = append(r.Messages, SampleMessage{Role: string(m.Role), Text: t.Text})
	}
	if lc, _ := c.single(); lc != nil && lc.asker != nil {
		lc.timer.pause()
		defer lc.timer.resume()
		lc.asker.Sampled(lc.ctx, c.srv.Name)
	}
	res, err := c.p.sampler.Sample(ctx, r)
	if err != nil {
		c.log().Warn("sampling request failed", slog.Any("err", err))
		return nil, fmt.Errorf("sampling: %w", err)
	}
	c.log().Info("sampling request answered", slog.Int("messages", len(r.Messages)), slog.Int("max_tokens", r.MaxTokens))
	return &mcpsdk.CreateMessageResult{Content: &mcpsdk.TextContent{Text: res.Text}, Model: res.Model, Role: "assistant", StopReason: "endTurn"}, nil
}

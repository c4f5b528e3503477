package agent_test

import (
	"strings"
	"testing"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/agent/agenttest"
)

// BenchmarkRun measures one plain-answer turn against the local scripted server, HTTP round
// trip included: the overhead of the agent and langchaingo layers, not of any LLM.
func BenchmarkRun(b *testing.B) {
	benchTurn(b, nil)
}

// BenchmarkRunAttached is BenchmarkRun with one attached resource of 16 KiB (the chat's bound
// for one resource) in the system prompt: the per-turn cost of an attachment.
func BenchmarkRunAttached(b *testing.B) {
	doc := strings.Repeat("A line of the attached HR policy document. ", 16<<10/44)
	benchTurn(b, []agent.ContextItem{{Kind: agent.ContextResource, Title: "Policy", Source: "hr hollyhr://policies/data-handling", Text: doc}})
}

func benchTurn(b *testing.B, attached []agent.ContextItem) {
	srv := agenttest.New(b)
	srv.Script(func(agenttest.Request) agenttest.Response { return agenttest.Response{Text: "ok"} })
	m := newModel(b, srv, agent.Config{})
	history := []agent.Message{
		{Role: agent.RoleUser, Content: "earlier question"},
		{Role: agent.RoleAssistant, Content: "earlier answer"},
	}
	turn := agent.Turn{System: "You are a bot.", History: history, User: "hello", Context: attached}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Run(b.Context(), turn, nil); err != nil {
			b.Fatal(err)
		}
	}
}

package agent_test

import (
	"testing"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/agent/agenttest"
)

// BenchmarkRun measures one plain-answer turn against the local scripted server, HTTP round
// trip included: the overhead of the agent and langchaingo layers, not of any LLM.
func BenchmarkRun(b *testing.B) {
	srv := agenttest.New(b)
	srv.Script(func(agenttest.Request) agenttest.Response { return agenttest.Response{Text: "ok"} })
	m := newModel(b, srv, agent.Config{})
	history := []agent.Message{
		{Role: agent.RoleUser, Content: "earlier question"},
		{Role: agent.RoleAssistant, Content: "earlier answer"},
	}
	turn := agent.Turn{System: "You are a bot.", History: history, User: "hello"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Run(b.Context(), turn, nil); err != nil {
			b.Fatal(err)
		}
	}
}

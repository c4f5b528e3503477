package agent_test

import (
	"context"
	"fmt"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/packs"
)

func ExampleModel_Run() {
	// A scripted OpenAI-compatible server stands in for the LLM: it asks for the weather tool
	// once, then repeats the tool's result.
	srv := agenttest.Start()
	defer srv.Close()
	srv.Script(agenttest.Sequence(
		agenttest.Response{ToolCalls: []agenttest.ToolCall{{Name: "weather", Arguments: `{"city":"Paris"}`}}},
		agenttest.Response{Text: "It is sunny in Paris."},
	))

	m, err := agent.New(agent.Config{BaseURL: srv.URL, APIKey: "sk-example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	reply, err := m.Run(context.Background(), agent.Turn{
		System: "You answer weather questions.",
		User:   "What is the weather in Paris?",
		Tools:  []agent.ToolDef{{Name: "weather", Description: "Current weather of a city"}},
	}, func(_ context.Context, c agent.ToolCall) (string, error) {
		fmt.Printf("tool %s %s\n", c.Name, c.Arguments)
		return "sunny, 24°C", nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(reply.Text)
	fmt.Println(reply.LLMCalls, "LLM calls,", reply.ToolCalls, "tool call,", len(reply.Messages), "messages")
	// Output:
	// tool weather {"city":"Paris"}
	// It is sunny in Paris.
	// 2 LLM calls, 1 tool call, 4 messages
}

func ExampleFromPack() {
	env := map[string]string{"OLLAMA_ENDPOINT": "http://localhost:11434"}
	cfg, ok, err := agent.FromPack(packs.LLM{Provider: "ollama", Model: "llama3.1"}, func(k string) string { return env[k] })
	fmt.Println(cfg.Provider, cfg.BaseURL, ok, err)

	_, ok, err = agent.FromPack(packs.LLM{Provider: "anthropic"}, func(string) string { return "" })
	fmt.Println("anthropic without key:", ok, err)
	// Output:
	// ollama http://localhost:11434 true <nil>
	// anthropic without key: false <nil>
}

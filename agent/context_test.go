package agent_test

import (
	"strings"
	"testing"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/agent/agenttest"
)

// TestRunPrompt: a prompt's messages are the turn's input, in order, and the reply's first
// messages; the model answers the last user message.
func TestRunPrompt(t *testing.T) {
	srv := agenttest.New(t)
	m := newModel(t, srv, agent.Config{})
	prompt := []agent.Message{
		{Role: agent.RoleUser, Content: "Review the write update_person."},
		{Role: agent.RoleAssistant, Content: "Which part?"},
		{Role: agent.RoleUser, Content: "The name."},
	}
	reply, err := m.Run(t.Context(), agent.Turn{System: "sys", User: "ignored", Prompt: prompt}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != "you said: The name." || len(reply.Messages) != 4 || reply.Messages[1].Content != "Which part?" {
		t.Errorf("reply = %+v", reply)
	}
	msgs := srv.Requests()[0].Messages
	if len(msgs) != 4 || msgs[1].Content != prompt[0].Content || msgs[2].Role != "assistant" || msgs[3].Content != "The name." {
		t.Errorf("request messages = %+v", msgs)
	}
	for _, m := range msgs {
		if strings.Contains(m.Content, "ignored") {
			t.Error("User was sent with a prompt")
		}
	}

	// A prompt that ends with the assistant's words is followed by a request to go on.
	reply, err = m.Run(t.Context(), agent.Turn{Prompt: []agent.Message{{Role: agent.RoleAssistant, Content: "Let me start:"}}}, nil)
	if err != nil || len(reply.Messages) != 3 || reply.Messages[1].Role != agent.RoleUser {
		t.Errorf("assistant-ended prompt: %+v, %v", reply, err)
	}
	if _, err := m.Run(t.Context(), agent.Turn{Prompt: []agent.Message{{Role: agent.RoleTool, Content: "x"}}}, nil); err == nil {
		t.Error("a prompt with a tool message was sent")
	}
}

// TestRunContext: attached resources and loaded skills are in the system prompt of every call,
// after the pack's text, each under its heading.
func TestRunContext(t *testing.T) {
	srv := agenttest.New(t)
	m := newModel(t, srv, agent.Config{})
	turn := agent.Turn{System: "You are a bot.", User: "hi", Context: []agent.ContextItem{
		{Kind: agent.ContextResource, Title: "Policy", Source: "hr hollyhr://policies/data-handling", Text: "Redact payroll."},
		{Kind: agent.ContextSkill, Title: "safe-write", Source: "hr skill://hollyhr/safe-write/SKILL.md", Text: "1. Prepare."},
	}}
	if _, err := m.Run(t.Context(), turn, nil); err != nil {
		t.Fatal(err)
	}
	sys := srv.Requests()[0].System()
	for _, want := range []string{"You are a bot.", "## Documents the user attached", "### Policy (hr hollyhr://policies/data-handling)\nRedact payroll.",
		"## Skills the user loaded", "### safe-write (hr skill://hollyhr/safe-write/SKILL.md)\n1. Prepare."} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys)
		}
	}
	if strings.Index(sys, "You are a bot.") != 0 {
		t.Errorf("the pack's prompt is not first:\n%s", sys)
	}
	if _, err := m.Run(t.Context(), agent.Turn{User: "hi"}, nil); err != nil {
		t.Fatal(err)
	}
	if sys := srv.Requests()[1].System(); sys != "" {
		t.Errorf("a turn without context or system sent %q", sys)
	}
}

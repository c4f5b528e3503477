package agenttest

import (
	"strings"
	"testing"
)

func TestDev(t *testing.T) {
	tools := []Tool{{Name: "send"}, {Name: "send_money"}, {Name: "get_exchange_rate"}}
	user := func(text string) Request {
		return Request{Tools: tools, Messages: []Message{{Role: "system", Content: "be nice"}, {Role: "user", Content: text}}}
	}
	for _, c := range []struct{ text, tool, args string }{
		{`please send_money {"recipient":"rcp-globex","amount":12.5} now`, "send_money", `{"recipient":"rcp-globex","amount":12.5}`},
		{`get_exchange_rate {bad} {"from":"EUR","to":"USD"}`, "get_exchange_rate", `{"from":"EUR","to":"USD"}`},
		{"get_exchange_rate please", "get_exchange_rate", "{}"},
		{`send {"a":{"b":1}}`, "send", `{"a":{"b":1}}`},
	} {
		got := Dev(user(c.text))
		if len(got.ToolCalls) != 1 || got.ToolCalls[0].Name != c.tool || got.ToolCalls[0].Arguments != c.args {
			t.Errorf("Dev(%q) = %+v, want %s %s", c.text, got, c.tool, c.args)
		}
	}

	got := Dev(user("hello"))
	if len(got.ToolCalls) != 0 || !strings.Contains(got.Text, "you said: hello") || !strings.Contains(got.Text, "send, send_money, get_exchange_rate") {
		t.Errorf("Dev(hello) = %+v", got)
	}
	got = Dev(Request{Messages: []Message{{Role: "user", Content: "send_money {}"}}})
	if len(got.ToolCalls) != 0 || !strings.Contains(got.Text, "no tools are offered") {
		t.Errorf("Dev without tools = %+v", got)
	}
	got = Dev(Request{Tools: tools, Messages: []Message{
		{Role: "user", Content: "send_money {}"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "send_money"}}},
		{Role: "tool", ToolCallID: "c1", Content: "sent 12.50 EUR"},
	}})
	if got.Text != "send_money said: sent 12.50 EUR" {
		t.Errorf("Dev after a tool result = %+v", got)
	}
}

func TestListen(t *testing.T) {
	s := Start()
	defer s.Close()
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") || !strings.HasSuffix(s.URL, "/v1") {
		t.Fatalf("URL %s", s.URL)
	}
}

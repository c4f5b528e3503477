package vsagenttest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/packbot/packbot/channel/vsagent/vsagenttest"
)

// TestAgent: messages are recorded by connection and answered with their id (201); a strict
// agent answers a message to a connection it does not hold with the VS Agent's 500; lookups of
// held connections find them completed, others 404; a message posted twice counts as re-sent.
func TestAgent(t *testing.T) {
	a := vsagenttest.New(t, &vsagenttest.Options{Strict: true})
	conn := a.Connect(vsagenttest.NewID())
	post := func(conn, id string) (int, string) {
		t.Helper()
		resp, err := http.Post(a.URL+"/v1/message", "application/json",
			strings.NewReader(`{"type":"text","id":"`+id+`","connectionId":"`+conn+`","content":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(conn, "m1"); code != http.StatusCreated || body != `{"id":"m1"}` {
		t.Errorf("a message to a held connection: %d %s", code, body)
	}
	if code, body := post("nobody", "m2"); code != http.StatusInternalServerError || !strings.Contains(body, "Connection with id nobody not found") {
		t.Errorf("a message to another connection: %d %s", code, body)
	}
	post(conn, "m1")
	if n, which := a.Resent(); n != 1 || len(which) != 1 {
		t.Errorf("Resent = %d %q, want 1", n, which)
	}
	if msgs := a.Messages(conn); len(msgs) != 2 || msgs[0].Content != "hi" || len(vsagenttest.FirstPosts(msgs)) != 1 {
		t.Errorf("messages of the connection: %+v", msgs)
	}
	for id, want := range map[string]int{conn: http.StatusOK, "nobody": http.StatusNotFound} {
		resp, err := http.Get(a.URL + "/v1/connections/" + id)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /v1/connections/%s: %d, want %d", id, resp.StatusCode, want)
		}
	}
	if a.Lookups() != 2 {
		t.Errorf("%d lookups counted", a.Lookups())
	}
}

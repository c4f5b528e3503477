package flows

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/store"
)

// TestDialogV1RowsLoad: sessions written by earlier releases (version 1: a kind, a step and a
// map of extras) load into the typed dialogs.
func TestDialogV1RowsLoad(t *testing.T) {
	opts := []option{{Text: "✅ vault", Value: "vault"}}
	q := question{ID: "q1", Options: opts}
	for _, c := range []struct {
		v1   string
		want dialog
	}{
		{`{"kind":"auth","request":"r1"}`, &authWait{Request: "r1"}},
		{`{"kind":"mcp-config","step":"server","question":"q1","options":[{"t":"✅ vault","v":"vault"}]}`, &mcpServer{question: q}},
		{`{"kind":"mcp-config","step":"existing","question":"q1","options":[{"t":"✅ vault","v":"vault"}],"server":"vault"}`,
			&mcpExisting{question: q, Server: "vault"}},
		{`{"kind":"mcp-config","step":"field","server":"vault","field":1}`, &mcpField{Server: "vault", Field: 1}},
		{`{"kind":"mcp-config","step":"server","question":"text","byText":true,"options":[{"t":"✅ vault","v":"vault"}]}`,
			&mcpServer{question: question{ID: "text", ByText: true, Options: opts}}},
		{`{"kind":"approval-confirm","question":"q1","options":[{"t":"✅ vault","v":"vault"}],"server":"bank","extra":{"tool":"send_money","args":"{\"amount\":5}"}}`,
			&approvalConfirm{question: q, Server: "bank", Tool: "send_money", Args: `{"amount":5}`}},
		{`{"kind":"my-requests","question":"q1","options":[{"t":"✅ vault","v":"vault"}]}`, &myRequests{question: q}},
		{`{"kind":"my-request","question":"q1","options":[{"t":"✅ vault","v":"vault"}],"extra":{"id":"a1"}}`, &myRequest{chosenRequest{question: q, ID: "a1"}}},
		{`{"kind":"pending","question":"q1","options":[{"t":"✅ vault","v":"vault"}]}`, &pendingList{question: q}},
		{`{"kind":"pending-request","question":"q1","options":[{"t":"✅ vault","v":"vault"}],"extra":{"id":"a1"}}`, &pendingRequest{chosenRequest{question: q, ID: "a1"}}},
		{`{"kind":"mcp-config","step":"gone"}`, nil},
		{`{"kind":"something-else"}`, nil},
		{`not json`, nil},
		{``, nil},
	} {
		got := decodeDialog(dialogTable(), []byte(c.v1))
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %#v, want %#v", c.v1, got, c.want)
		}
	}
}

// TestDialogEncoding: every kind of the table encodes as version 2 with its name and reads back
// the same; the session's state follows the kind (only the MCP configuration is MCP_CONFIG).
func TestDialogEncoding(t *testing.T) {
	q := question{ID: "q1", ByText: true, Options: []option{{Text: "a", Value: "b"}}}
	table := dialogTable()
	all := []dialog{&authWait{Request: "r"}, &mcpServer{question: q}, &mcpExisting{question: q, Server: "s"}, &mcpField{Server: "s", Field: 2},
		&approvalConfirm{question: q, Server: "s", Tool: "t", Args: `not even json`}, &myRequests{question: q}, &myRequest{chosenRequest{question: q, ID: "i"}},
		&pendingList{question: q}, &pendingRequest{chosenRequest{question: q, ID: "i"}},
		&promptList{question: q}, &resourceList{question: q}, &skillList{question: q},
		&contextArgs{question: q, Server: "s", Prompt: "p", Title: "P", Order: []string{"a", "b"}, Index: 1, Args: map[string]string{"a": "x"}},
		&approvalProof{Request: "r", Tool: "t", Ticket: approvals.ProofTicket{Approval: "a", Approver: "bob@acme.corp",
			Asked: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), MaxAge: 5 * time.Minute}}}
	if len(all) != len(table) {
		t.Fatalf("%d kinds tested, %d in the table", len(all), len(table))
	}
	for _, d := range all {
		b := encodeDialog(d)
		if !strings.HasPrefix(string(b), `{"v":2,"dialog":"`+d.kind()+`"`) {
			t.Errorf("encoding %s", b)
		}
		if got := decodeDialog(table, b); !reflect.DeepEqual(got, d) {
			t.Errorf("%s read back as %#v", b, got)
		}
		r, ok := table[d.kind()]
		if !ok || r.new().kind() != d.kind() {
			t.Errorf("%s: no row, or its new makes another kind", d.kind())
		}
		wantState := store.StateChat
		switch d.(type) {
		case *authWait:
			wantState = store.StateAuth
		case *mcpServer, *mcpExisting, *mcpField:
			wantState = store.StateMCPConfig
		}
		if r.state != wantState {
			t.Errorf("%s: state %s, want %s", d.kind(), r.state, wantState)
		}
	}
	if encodeDialog(nil) != nil || decodeDialog(table, []byte(`{"v":2,"dialog":"nope"}`)) != nil || decodeDialog(table, []byte(`{"v":2,"dialog":"auth","request":5}`)) != nil {
		t.Fatal("no dialog, an unknown kind or a bad field must read as no dialog")
	}
}

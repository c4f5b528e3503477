package vsagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/vsagent/vsagenttest"
)

var fixedNow = time.Date(2026, 3, 1, 10, 20, 30, 123456789, time.FixedZone("CET", 3600))

// TestOutboundJSON checks the exact JSON posted to the admin API for every outbound type. "<id>"
// stands for the message's fresh UUID, which must also be what the method returns.
func TestOutboundJSON(t *testing.T) {
	f := newFixture(t, Config{Now: func() time.Time { return fixedNow }})
	f.wallet("c1")
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		send func() (string, error) // returns the id when the method has one
		want string
	}{
		{"text", func() (string, error) {
			return f.ch.SendText(ctx, "c1", channel.Text{Content: "hello\nworld"})
		}, `{"type":"text","id":"<id>","connectionId":"c1","timestamp":"2026-03-01T09:20:30.123Z","content":"hello\nworld"}`},
		{"text reply", func() (string, error) {
			return f.ch.SendText(ctx, "c1", channel.Text{Content: "yes", ReplyTo: "in-1"})
		}, `{"type":"text","id":"<id>","connectionId":"c1","timestamp":"2026-03-01T09:20:30.123Z","threadId":"in-1","content":"yes"}`},
		{"contextual menu", func() (string, error) {
			return "", f.ch.SendMenu(ctx, "c1", channel.Menu{Title: "Menu", Description: "Authenticated as Ana", Options: []channel.MenuOption{
				{ID: "logout", Title: "Log out"},
				{ID: "approvals", Title: "(2) Pending approvals", Description: "two waiting"},
				{ID: "admin", Title: "Admin", Disabled: true},
			}})
		}, `{"type":"contextual-menu-update","id":"<id>","connectionId":"c1","timestamp":"2026-03-01T09:20:30.123Z","title":"Menu","description":"Authenticated as Ana",
			"options":[{"id":"logout","title":"Log out"},{"id":"approvals","title":"(2) Pending approvals","description":"two waiting"}]}`},
		{"empty contextual menu", func() (string, error) {
			return "", f.ch.SendMenu(ctx, "c1", channel.Menu{Title: "Menu"})
		}, `{"type":"contextual-menu-update","id":"<id>","connectionId":"c1","timestamp":"2026-03-01T09:20:30.123Z","title":"Menu","options":[]}`},
		{"question", func() (string, error) {
			return f.ch.AskQuestion(ctx, "c1", channel.Question{Text: "send_money needs approval. Submit a request?", Detail: "amount: 100 EUR", Options: []string{"Yes", "No"}})
		}, `{"type":"menu-display","id":"<id>","connectionId":"c1","timestamp":"2026-03-01T09:20:30.123Z","prompt":"send_money needs approval. Submit a request?\n\namount: 100 EUR",
			"menuItems":[{"id":"<id>:Yes","text":"Yes"},{"id":"<id>:No","text":"No"}]}`},
		{"question without detail", func() (string, error) {
			return f.ch.AskQuestion(ctx, "c1", channel.Question{Text: "Continue?", Options: []string{"Sí"}})
		}, `{"type":"menu-display","id":"<id>","connectionId":"c1","timestamp":"2026-03-01T09:20:30.123Z","prompt":"Continue?","menuItems":[{"id":"<id>:Sí","text":"Sí"}]}`},
		{"proof request", func() (string, error) {
			return f.ch.RequestProof(ctx, "c1", channel.ProofRequest{Purpose: "log in",
				AnonCreds: &channel.AnonCredsRequest{CredentialDefinitionID: "cd-1", Attributes: []string{"email", "name"}},
				W3C:       &channel.W3CRequest{CredentialType: "EmployeeCredential", Issuers: []string{"did:web:x"}}})
		}, `{"type":"identity-proof-request","id":"<id>","connectionId":"c1","timestamp":"2026-03-01T09:20:30.123Z",
			"requestedProofItems":[{"id":"1","type":"verifiable-credential","credentialDefinitionId":"cd-1","attributes":["email","name"],"description":"log in"}]}`},
		{"proof request, all attributes", func() (string, error) {
			return f.ch.RequestProof(ctx, "c1", channel.ProofRequest{AnonCreds: &channel.AnonCredsRequest{CredentialDefinitionID: "cd-1"}})
		}, `{"type":"identity-proof-request","id":"<id>","connectionId":"c1","timestamp":"2026-03-01T09:20:30.123Z",
			"requestedProofItems":[{"id":"1","type":"verifiable-credential","credentialDefinitionId":"cd-1"}]}`},
		{"invitation", func() (string, error) {
			return "", f.ch.SendInvitation(ctx, "c1", channel.Invitation{DID: "did:web:issuer.example", Label: "Acme issuer"})
		}, `{"type":"invitation","id":"<id>","connectionId":"c1","timestamp":"2026-03-01T09:20:30.123Z","did":"did:web:issuer.example","label":"Acme issuer"}`},
		{"receipts", func() (string, error) {
			return "", f.ch.SendReceipts(ctx, "c1", channel.Receipts{MessageIDs: []string{"in-1", "in-2"}, State: channel.ReceiptViewed})
		}, `{"type":"receipts","id":"<id>","connectionId":"c1","timestamp":"2026-03-01T09:20:30.123Z",
			"receipts":[{"messageId":"in-1","state":"viewed","timestamp":"2026-03-01T09:20:30.123Z"},{"messageId":"in-2","state":"viewed","timestamp":"2026-03-01T09:20:30.123Z"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			returned, err := tc.send()
			if err != nil {
				t.Fatal(err)
			}
			body := f.agent.lastSent(t)
			var m struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(body, &m); err != nil || !isUUID(m.ID) {
				t.Fatalf("id %q (%v) is not a UUID", m.ID, err)
			}
			if returned != "" && returned != m.ID {
				t.Errorf("returned %q, posted id %q", returned, m.ID)
			}
			got := canonical(t, strings.ReplaceAll(string(body), m.ID, "<id>"))
			if want := canonical(t, tc.want); got != want {
				t.Errorf("posted\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// canonical re-encodes JSON with sorted keys, so that documents compare by content.
func canonical(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSendIDs: each message gets a fresh id; Send returns the id the VS Agent answers, except
// AskQuestion, whose id must be the one inside the option ids.
func TestSendIDs(t *testing.T) {
	f := newFixture(t, Config{})
	f.wallet("c1")
	ctx := t.Context()
	a, err := f.ch.SendText(ctx, "c1", channel.Text{Content: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.ch.SendText(ctx, "c1", channel.Text{Content: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("two messages with id %s", a)
	}

	f.agent.SetAnswer(func(w http.ResponseWriter, _ vsagenttest.Message) bool {
		fmt.Fprint(w, `{"id":"renamed-by-the-vs-agent"}`)
		return true
	})
	if id, err := f.ch.SendText(ctx, "c1", channel.Text{ID: "bot-id", Content: "c"}); err != nil || id != "bot-id" {
		t.Errorf("SendText = %q, %v; want the bot's id, whatever the VS Agent answers", id, err)
	}
	qid, err := f.ch.AskQuestion(ctx, "c1", channel.Question{Text: "?", Options: []string{"Yes"}})
	if err != nil {
		t.Fatal(err)
	}
	var posted wireMsg
	if err := json.Unmarshal(f.agent.lastSent(t), &posted); err != nil {
		t.Fatal(err)
	}
	if qid != posted.ID || posted.MenuItems[0].ID != qid+":Yes" {
		t.Errorf("question id %q; posted %q with item %q", qid, posted.ID, posted.MenuItems[0].ID)
	}
	if !strings.Contains(f.logs.String(), "VS Agent renamed a question") {
		t.Error("renamed question not logged")
	}

	f.agent.SetAnswer(func(w http.ResponseWriter, _ vsagenttest.Message) bool {
		w.WriteHeader(http.StatusOK) // no body: sent, but no id
		return true
	})
	id, err := f.ch.SendText(ctx, "c1", channel.Text{Content: "d"})
	if err != nil || !isUUID(id) {
		t.Errorf("SendText without an id in the answer = %q, %v; want the id sent", id, err)
	}
}

// TestSendErrors: the admin API down or failing is an error naming the status and the message
// type, never the content; an unknown connection and an invalid message map to the sentinels.
func TestSendErrors(t *testing.T) {
	const secret = "my password is hunter2"
	ctx := t.Context()

	t.Run("admin API down", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		f := newFixture(t, Config{AdminURL: down.URL})
		_, err := f.ch.SendText(ctx, "c1", channel.Text{Content: secret})
		if err == nil || !strings.Contains(err.Error(), "text message") || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("err = %v", err)
		}
		var se *StatusError
		if errors.As(err, &se) {
			t.Errorf("network failure reported as status %d", se.StatusCode)
		}
	})

	for _, tc := range []struct {
		name   string
		status int
		body   string
		is     error // nil: neither sentinel
	}{
		{"500", http.StatusInternalServerError, `{"statusCode":500,"error":"something went wrong: Error: ledger unreachable"}`, nil},
		{"502 no body", http.StatusBadGateway, ``, nil},
		{"unknown connection", http.StatusInternalServerError, `{"statusCode":500,"error":"something went wrong: Error: Connection with id c1 not found"}`, channel.ErrUnknownConnection},
		{"terminated connection", http.StatusInternalServerError, `{"statusCode":500,"error":"something went wrong: Error: This connection has been terminated. No further messages are possible"}`, channel.ErrUnknownConnection},
		{"validation", http.StatusBadRequest, `{"statusCode":400,"message":["content must be a string"]}`, channel.ErrRefused},
		{"too large", http.StatusRequestEntityTooLarge, ``, channel.ErrRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{})
			f.wallet("c1")
			f.agent.SetAnswer(func(w http.ResponseWriter, _ vsagenttest.Message) bool {
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
				return true
			})
			_, err := f.ch.SendText(ctx, "c1", channel.Text{Content: secret})
			var se *StatusError
			if !errors.As(err, &se) || se.StatusCode != tc.status || se.Type != "text" {
				t.Fatalf("err = %v, want a StatusError %d for text", err, tc.status)
			}
			msg := err.Error()
			if !strings.Contains(msg, fmt.Sprint(tc.status)) || !strings.Contains(msg, "text") || strings.Contains(msg, "hunter2") {
				t.Errorf("error %q", msg)
			}
			for _, s := range []error{channel.ErrUnknownConnection, channel.ErrRefused} {
				if errors.Is(err, s) != (s == tc.is) {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, errors.Is(err, s))
				}
			}
			if strings.Contains(f.logs.String(), "hunter2") {
				t.Error("content logged")
			}
		})
	}

	t.Run("cancelled", func(t *testing.T) {
		f := newFixture(t, Config{})
		f.wallet("c1")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := f.ch.SendText(cctx, "c1", channel.Text{Content: "x"}); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})

	t.Run("no connection", func(t *testing.T) {
		f := newFixture(t, Config{})
		if _, err := f.ch.SendText(ctx, "", channel.Text{Content: "x"}); !errors.Is(err, channel.ErrUnknownConnection) {
			t.Errorf("err = %v", err)
		}
		if f.agent.count() != 0 {
			t.Error("posted a message without a connection")
		}
	})

	t.Run("after Run", func(t *testing.T) {
		f := newFixture(t, Config{})
		f.wallet("c1")
		if _, err := f.ch.SendText(ctx, "c1", channel.Text{Content: "before Run"}); err != nil {
			t.Fatalf("send before Run: %v", err)
		}
		rctx, stop := context.WithCancel(ctx)
		stop()
		if err := f.ch.Run(rctx, channel.HandlerFunc(func(context.Context, string, channel.Event) error { return nil })); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ch.SendText(ctx, "c1", channel.Text{Content: "x"}); !errors.Is(err, ErrClosed) {
			t.Errorf("err = %v, want ErrClosed", err)
		}
		if err := f.ch.SendMenu(ctx, "c1", channel.Menu{}); !errors.Is(err, ErrClosed) {
			t.Errorf("err = %v, want ErrClosed", err)
		}
	})
}

// TestSendRefused: messages the VS Agent API cannot carry are refused before any I/O.
func TestSendRefused(t *testing.T) {
	f := newFixture(t, Config{})
	f.wallet("c1")
	ctx := t.Context()
	for name, send := range map[string]func() error{
		"question without options": func() error {
			_, err := f.ch.AskQuestion(ctx, "c1", channel.Question{Text: "?"})
			return err
		},
		"question with an empty option": func() error {
			_, err := f.ch.AskQuestion(ctx, "c1", channel.Question{Text: "?", Options: []string{"Yes", ""}})
			return err
		},
		"question with duplicate options": func() error {
			_, err := f.ch.AskQuestion(ctx, "c1", channel.Question{Text: "?", Options: []string{"Yes", "No", "Yes"}})
			return err
		},
		"proof request without a credential definition": func() error {
			_, err := f.ch.RequestProof(ctx, "c1", channel.ProofRequest{W3C: &channel.W3CRequest{CredentialType: "EmployeeCredential"}})
			return err
		},
		"invitation by URL": func() error {
			return f.ch.SendInvitation(ctx, "c1", channel.Invitation{URL: "https://issuer.example/invite?oob=x"})
		},
		"receipts without ids": func() error {
			return f.ch.SendReceipts(ctx, "c1", channel.Receipts{State: channel.ReceiptViewed})
		},
		"receipts with an unknown state": func() error {
			return f.ch.SendReceipts(ctx, "c1", channel.Receipts{MessageIDs: []string{"m"}, State: "deleted"})
		},
		"menu option without id": func() error {
			return f.ch.SendMenu(ctx, "c1", channel.Menu{Options: []channel.MenuOption{{Title: "x"}}})
		},
		"menu with duplicate ids": func() error {
			return f.ch.SendMenu(ctx, "c1", channel.Menu{Options: []channel.MenuOption{{ID: "a"}, {ID: "a", Disabled: true}}})
		},
	} {
		if err := send(); !errors.Is(err, channel.ErrRefused) {
			t.Errorf("%s: err = %v, want ErrRefused", name, err)
		}
	}
	if n := f.agent.count(); n != 0 {
		t.Errorf("%d messages posted", n)
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		admin, endpoint string
	}{
		{"http://vs-agent:3000", "http://vs-agent:3000/v1/message"},
		{"http://vs-agent:3000/", "http://vs-agent:3000/v1/message"},
		{"https://agents.example/acme/", "https://agents.example/acme/v1/message"},
		{"http://127.0.0.1:3100", "http://127.0.0.1:3100/v1/message"},
	} {
		c, err := New(Config{AdminURL: tc.admin})
		if err != nil || c.endpoint != tc.endpoint {
			t.Errorf("New(%q): endpoint %q, %v; want %q", tc.admin, c.endpoint, err, tc.endpoint)
			continue
		}
		if c.maxBody != DefaultMaxBodyBytes || c.client == nil || c.log == nil || c.Name() != "vsagent" {
			t.Errorf("defaults not applied: %+v", c)
		}
	}
	for _, admin := range []string{"", "vs-agent:3000", "ftp://vs-agent", "http://", "http://u:p@vs-agent", "http://vs-agent?x=1", "http://vs-agent/#f", "http://[::1"} {
		if _, err := New(Config{AdminURL: admin}); err == nil {
			t.Errorf("New(%q) accepted", admin)
		}
	}
	if _, err := New(Config{AdminURL: "http://vs-agent", MaxBodyBytes: -1}); err == nil {
		t.Error("negative MaxBodyBytes accepted")
	}
	c, err := New(Config{AdminURL: "http://vs-agent", MaxBodyBytes: 10, HTTPClient: http.DefaultClient})
	if err != nil || c.maxBody != 10 || c.client != http.DefaultClient {
		t.Errorf("config not kept: %v", err)
	}
	if !reflect.DeepEqual(c.locks.m, map[string]*connLock{}) {
		t.Error("locks not empty")
	}
}

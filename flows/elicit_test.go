package flows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/toolcall"
)

func answerEv(text string) channel.Event {
	return channel.QuestionAnswered{Conn: "conn-1", Response: text}
}

func textEv(text string) channel.Event { return channel.TextReceived{Conn: "conn-1", Content: text} }

// newAsker is the asker of a call made for the fixture's user, on conv.
func newAsker(f *fixture, conv Conversation) *asker {
	return &asker{e: f.e, conv: conv, lang: "en", cancel: func(error) {}, session: f.s}
}

// TestElicitForm: a form is asked field by field — a typed number out of range is asked
// again, a boolean and an enum are questions, a default and a skip are options — then
// confirmed; the answers go back to the server only.
func TestElicitForm(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	tr := f.tr
	low, high := 1.0, 30.0
	fields := []mcp.ElicitField{
		{Name: "days", Title: "Days", Type: mcp.FieldInteger, Required: true, Min: &low, Max: &high, Description: "How many."},
		{Name: "halfDay", Type: mcp.FieldBoolean, Required: true},
		{Name: "kind", Type: mcp.FieldString, Enum: []string{"vac", "sick"}, EnumTitles: []string{"Vacation", "Sick"}, Required: true},
		{Name: "note", Type: mcp.FieldString, Default: "none", Format: "email"},
		{Name: "tags", Type: mcp.FieldArray, Enum: []string{"a", "b"}, EnumTitles: []string{"A", "B"}},
	}
	conv := newFakeConv(textEv("45"), textEv("3"), answerEv(tr("YES")), answerEv("Vacation"),
		answerEv(tr("ELICIT_USE_DEFAULT", "value", "none")), answerEv("Unrelated"), answerEv(tr("ELICIT_SKIP")), answerEv(tr("ELICIT_ACCEPT")))
	res, err := newAsker(f, conv).Elicit(t.Context(), mcp.Elicitation{Server: "records", Mode: mcp.ElicitForm, Message: "Details", Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != mcp.ActionAccept || res.Content["days"] != int64(3) || res.Content["halfDay"] != true || res.Content["kind"] != "vac" ||
		res.Content["note"] != "none" || len(res.Content) != 4 {
		t.Fatalf("result %+v", res)
	}
	sent := strings.Join(conv.texts(), "\n---\n")
	for _, want := range []string{tr("ELICIT_INTRO", "server", "records", "message", "Details"), tr("ELICIT_INVALID_MAX", "field", "Days", "limit", "30"),
		tr("ELICIT_HINT_MAX", "limit", "30"), tr("CHOOSE_OPTION"), tr("ELICIT_CONFIRM", "server", "records")} {
		if !strings.Contains(sent, want) {
			t.Fatalf("sent %q\nlacks %q", sent, want)
		}
	}
}

// TestElicitRefusals: Decline and Cancel are offered on every question and told to the user;
// too many answers that do not fit cancel; the time limit cancels; URL mode waits for "done" or
// the server's completion.
func TestElicitRefusals(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	tr := f.tr
	field := []mcp.ElicitField{{Name: "n", Type: mcp.FieldNumber, Required: true}}
	for _, c := range []struct {
		answers []channel.Event
		action  string
		told    string
	}{
		{[]channel.Event{answerEv(tr("ELICIT_DECLINE"))}, mcp.ActionDecline, tr("ELICIT_DECLINED", "server", "s")},
		{[]channel.Event{textEv(tr("ELICIT_CANCEL"))}, mcp.ActionCancel, tr("ELICIT_CANCELLED", "server", "s")},
		{[]channel.Event{textEv("x"), textEv("x"), textEv("x"), textEv("x"), textEv("x")}, mcp.ActionCancel, tr("ELICIT_CANCELLED", "server", "s")},
		{[]channel.Event{textEv("4"), answerEv(tr("ELICIT_DECLINE"))}, mcp.ActionDecline, tr("ELICIT_DECLINED", "server", "s")},
	} {
		conv := newFakeConv(c.answers...)
		res, err := newAsker(f, conv).Elicit(t.Context(), mcp.Elicitation{Server: "s", Mode: mcp.ElicitForm, Fields: field})
		sent := conv.texts()
		if err != nil || res.Action != c.action || sent[len(sent)-1] != c.told {
			t.Fatalf("%v: %+v, %v, told %q", c.answers, res, err, sent)
		}
	}
	// No answer: the time limit cancels, and says so.
	f.e.elicitTimeout = 20 * time.Millisecond
	conv := newFakeConv()
	res, err := newAsker(f, conv).Elicit(t.Context(), mcp.Elicitation{Server: "s", Mode: mcp.ElicitForm, Fields: field})
	if sent := conv.texts(); err != nil || res.Action != mcp.ActionCancel || sent[len(sent)-1] != tr("ELICIT_TIMEOUT", "server", "s") {
		t.Fatalf("timeout: %+v, %v, %q", res, err, sent)
	}
	f.e.elicitTimeout = time.Second
	// The conversation fails: an error.
	conv = newFakeConv()
	conv.sendErr = errBoom
	if _, err := newAsker(f, conv).Elicit(t.Context(), mcp.Elicitation{Server: "s", Mode: mcp.ElicitForm, Fields: field}); !errors.Is(err, errBoom) {
		t.Fatalf("send error: %v", err)
	}
	// URL mode: done, declined, or completed by the server.
	conv = newFakeConv(answerEv(tr("ELICIT_URL_DONE")))
	if res, err := newAsker(f, conv).Elicit(t.Context(), mcp.Elicitation{Server: "s", Mode: mcp.ElicitURL, URL: "https://x.example", Message: "m"}); err != nil || res.Action != mcp.ActionAccept ||
		conv.texts()[0] != tr("ELICIT_URL", "server", "s", "message", "m", "url", "https://x.example") {
		t.Fatalf("url done: %+v, %v, %q", res, err, conv.texts())
	}
	conv = newFakeConv(answerEv(tr("ELICIT_DECLINE")))
	if res, err := newAsker(f, conv).Elicit(t.Context(), mcp.Elicitation{Server: "s", Mode: mcp.ElicitURL}); err != nil || res.Action != mcp.ActionDecline {
		t.Fatalf("url declined: %+v, %v", res, err)
	}
	done := make(chan struct{})
	close(done)
	conv = newFakeConv()
	if res, err := newAsker(f, conv).Elicit(t.Context(), mcp.Elicitation{Server: "s", Mode: mcp.ElicitURL, Done: done}); err != nil || res.Action != mcp.ActionAccept {
		t.Fatalf("url completed: %+v, %v", res, err)
	}
}

// TestProgressAndCancel: a call's progress reaches the user at most every few seconds, the
// first time with how to cancel and a menu with the cancel item; /cancel cancels the call,
// which is audited as cancelled; sampling is told.
func TestProgressAndCancel(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	conv := newFakeConv()
	f.conv = conv
	f.tools.during = func(ctx context.Context, c mcp.Call) error {
		a := newAsker(f, conv)
		a.Progress(ctx, mcp.Progress{Server: c.Server, Tool: c.Tool, Progress: 1, Total: 4})
		a.Progress(ctx, mcp.Progress{Server: c.Server, Tool: c.Tool, Progress: 2}) // too soon: dropped
		f.now = f.now.Add(progressEvery)
		a.Progress(ctx, mcp.Progress{Server: c.Server, Tool: c.Tool, Message: "half way"})
		f.now = f.now.Add(progressEvery)
		a.Progress(ctx, mcp.Progress{Server: c.Server, Tool: c.Tool, Progress: 2.5})
		a.Sampled(ctx, c.Server)
		if c.Tool == "list_transfers" {
			conv.push(textEv("/cancel"))
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	}
	f.want(f.say("/call bank/get_exchange_rate"), key("TOOL_RESULT", "tool", "get_exchange_rate", "result", "result of get_exchange_rate"))
	got := conv.texts()
	want := []string{tr(f, "MCP_PROGRESS", "tool", "get_exchange_rate", "server", "bank", "detail", "25%") + "\n" + f.tr("MCP_PROGRESS_CANCEL_HINT"),
		tr(f, "MCP_PROGRESS", "tool", "get_exchange_rate", "server", "bank", "detail", "half way"),
		tr(f, "MCP_PROGRESS", "tool", "get_exchange_rate", "server", "bank", "detail", "2.5"),
		tr(f, "MCP_SAMPLING", "server", "bank")}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("sent %q\nwant %q", got, want)
	}
	if m := conv.sent[1].Menu; m == nil || !strings.Contains(menuIDs(*m), cancelOption) {
		t.Fatalf("no menu with the cancel item: %+v", conv.sent[1])
	}
	f.login("ana@acme.corp", "employee")
	fx, err := f.handle(channel.TextReceived{Conn: "conn-1", Content: "/call list_transfers"})
	if err != nil {
		t.Fatal(err)
	}
	f.want(outTexts(fx.Out), key("MCP_CALL_CANCELLED", "tool", "list_transfers", "server", "bank"))
	if len(fx.Audit) != 1 || fx.Audit[0].Error != toolcall.ErrCancelledByUser.Error() || f.s.MenuDigest != "" {
		t.Fatalf("audit %+v", fx.Audit)
	}
	if !isCancel(channel.MenuSelected{OptionID: cancelOption}) || isCancel(channel.ProfileReceived{}) || isAnswer(channel.MenuSelected{}) {
		t.Fatal("isCancel / isAnswer")
	}
	// Progress messages that cannot be sent are logged, not fatal.
	conv.sendErr = errBoom
	a := newAsker(f, conv)
	a.Progress(t.Context(), mcp.Progress{Server: "bank", Tool: "x"})
	a.Sampled(t.Context(), "bank")
}

func tr(f *fixture, key string, args ...string) string { return f.tr(key, args...) }

// TestInterrupted: an event cut off after it began a tool call or a credential test is not
// handled again: the user is told, a tool call is audited as interrupted, a configuration ends
// and its draft goes.
func TestInterrupted(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.login("ana@acme.corp", "employee")
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "mcp-config"})
	f.answer(f.options()[0])
	f.say("acct")
	if len(f.st.creds) != 1 || f.s.State != store.StateMCPConfig {
		t.Fatalf("draft %d, state %s", len(f.st.creds), f.s.State)
	}
	fx, err := f.e.Handle(t.Context(), Input{Session: &f.s, Event: textEv("tok"), Interrupted: []Step{
		{Kind: StepCredentialTest, Server: "vault"},
		{Kind: StepToolCall, Server: "bank", Tool: "list_transfers", Fingerprint: "fp"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.want(outTexts(fx.Out), key("MCP_CONFIG_INTERRUPTED", "server", "vault"), key("TOOL_INTERRUPTED", "tool", "list_transfers", "server", "bank"))
	if len(f.st.creds) != 0 || f.s.State != store.StateChat || len(fx.Audit) != 1 || fx.Audit[0].ArgsFingerprint != "fp" ||
		!strings.Contains(fx.Audit[0].Error, "interrupted") || fx.Audit[0].Identity != "ana@acme.corp" {
		t.Fatalf("after: %d drafts, state %s, audit %+v", len(f.st.creds), f.s.State, fx.Audit)
	}
	// Without a journal or an event id, the engine records nothing and makes its own ids.
	fx, err = f.e.Handle(t.Context(), Input{Session: &f.s, Event: textEv("/call list_transfers")})
	if err != nil || len(fx.Audit) != 1 {
		t.Fatalf("no journal: %+v, %v", fx, err)
	}
}

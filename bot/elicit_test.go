package bot_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
)

// elicitUser connects a guest in lang to a harness with the HollyHR-shaped records server.
func elicitUser(ctx context.Context, t *testing.T, h *harness, lang string) *user {
	t.Helper()
	u := h.connect(ctx, map[string]string{"name": "Eli"}, lang)
	_ = u.text(ctx) // the greeting
	h.waitTools("records")
	return u
}

// prepare prepares a write and returns its confirmation token.
func (u *user) prepare(ctx context.Context, op string) string {
	u.t.Helper()
	got := u.say(ctx, `/call records/prepare_api_write {"operation":"`+op+`","body":{"name":"Ana"}}`)
	var out struct {
		Token string `json:"confirmationToken"`
	}
	i := strings.Index(got, "{")
	if i < 0 {
		u.t.Fatalf("prepare answered %q\n%s", got, u.h.logs.String())
	}
	if err := json.Unmarshal([]byte(got[i:]), &out); err != nil || out.Token == "" {
		u.t.Fatalf("prepare answered %q (%v)", got, err)
	}
	return out.Token
}

// commit asks for the commit of token and returns the elicitation's question (after its intro).
func (u *user) commit(ctx context.Context, token, lang string) channeltest.Received {
	u.t.Helper()
	if err := u.w.SendText(ctx, `/call records/commit_api_write {"confirmationToken":"`+token+`"}`, ""); err != nil {
		u.t.Fatal(err)
	}
	intro := u.text(ctx)
	if want := u.h.cat.T(lang, "ELICIT_INTRO", "server", "records", "message", "Approve this write? "); !strings.HasPrefix(intro, want) ||
		!strings.Contains(intro, `"operation":"update_person"`) {
		u.t.Fatalf("intro %q, want %q + the frozen payload", intro, want)
	}
	q := u.question(ctx)
	tr := func(k string) string { return u.h.cat.T(lang, k) }
	if want := []string{tr("ELICIT_ACCEPT"), tr("ELICIT_DECLINE"), tr("ELICIT_CANCEL")}; strings.Join(q.Question.Options, "|") != strings.Join(want, "|") {
		u.t.Fatalf("options %q, want %q", q.Question.Options, want)
	}
	return q
}

// secretNote is a typed form answer that must appear nowhere but in the server's result.
const secretNote = "nota-7Qx9-privada"

func commits(h *harness) int { return h.records.Stats().Executions["commit_api_write"] }

// TestElicitationCommit: a HollyHR-shaped commit asks its user through form elicitation; Accept
// commits once, Decline, Cancel and no answer fail closed and the user is told.
func TestElicitationCommit(t *testing.T) {
	for _, lang := range []string{"en", "es"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			h := newHarness(t, harnessOptions{writes: true, elicitTimeout: time.Second})
			u := elicitUser(ctx, t, h, lang)
			tr := func(k string, args ...string) string { return h.cat.T(lang, k, args...) }

			tok := u.prepare(ctx, "update_person")
			q := u.commit(ctx, tok, lang)
			u.answer(ctx, q, tr("ELICIT_ACCEPT"))
			if got := u.text(ctx); !strings.Contains(got, `"committed":true`) {
				t.Fatalf("accepted commit answered %q", got)
			}
			if n := commits(h); n != 1 {
				t.Fatalf("%d commits after Accept, want 1", n)
			}

			for _, c := range []struct{ option, told string }{{"ELICIT_DECLINE", "ELICIT_DECLINED"}, {"ELICIT_CANCEL", "ELICIT_CANCELLED"}} {
				tok := u.prepare(ctx, "update_person")
				q := u.commit(ctx, tok, lang)
				u.answer(ctx, q, tr(c.option))
				if got := u.text(ctx); got != tr(c.told, "server", "records") {
					t.Fatalf("%s: told %q, want %s", c.option, got, c.told)
				}
				if got := u.text(ctx); !strings.Contains(got, "did not approve") {
					t.Fatalf("%s: result %q, want the server's refusal", c.option, got)
				}
			}
			// No answer: the time limit cancels.
			tok = u.prepare(ctx, "update_person")
			_ = u.commit(ctx, tok, lang)
			if got := u.text(ctx); got != tr("ELICIT_TIMEOUT", "server", "records") {
				t.Fatalf("unanswered: told %q", got)
			}
			if got := u.text(ctx); !strings.Contains(got, "did not approve") {
				t.Fatalf("unanswered: result %q", got)
			}
			if n := commits(h); n != 1 {
				t.Fatalf("%d commits, want only the accepted one", n)
			}
			// The bot goes on: the answers were taken as answers, not handled as messages.
			if got := u.say(ctx, "/whoami"); got != tr("WHOAMI_GUEST", "roles", "guest") {
				t.Fatalf("after the questions: %q", got)
			}
		})
	}
}

// TestElicitationForm: enum and boolean fields are questions with options, a number out of
// range is asked again, a string offers its default; the answers reach the server.
func TestElicitationForm(t *testing.T) {
	for _, lang := range []string{"en", "es"} {
		t.Run(lang, func(t *testing.T) {
			ctx := testCtx(t)
			h := newHarness(t, harnessOptions{writes: true, idle: 100 * time.Millisecond})
			u := elicitUser(ctx, t, h, lang)
			tr := func(k string, args ...string) string { return h.cat.T(lang, k, args...) }

			if err := u.w.SendText(ctx, `/call records/request_time_off {"reason":"trip"}`, ""); err != nil {
				t.Fatal(err)
			}
			if got := u.text(ctx); got != tr("ELICIT_INTRO", "server", "records", "message", "Details of the time-off request") {
				t.Fatalf("intro %q", got)
			}
			// Fields come in name order: days, halfDay, kind, note.
			q := u.question(ctx)
			if !strings.HasPrefix(q.Question.Text, tr("ELICIT_FIELD", "field", "Days")) || !strings.Contains(q.Question.Text, tr("ELICIT_HINT_MAX", "limit", "30")) {
				t.Fatalf("days question %q", q.Question.Text)
			}
			if err := u.w.SendText(ctx, "45", ""); err != nil {
				t.Fatal(err)
			}
			if got := u.text(ctx); got != tr("ELICIT_INVALID_MAX", "field", "Days", "limit", "30") {
				t.Fatalf("out of range: %q", got)
			}
			q = u.question(ctx) // asked again
			if err := u.w.SendText(ctx, "2.5", ""); err != nil {
				t.Fatal(err)
			}
			q = u.question(ctx)
			if !strings.HasPrefix(q.Question.Text, "Half day") {
				t.Fatalf("half-day question %q", q.Question.Text)
			}
			u.answer(ctx, q, tr("YES"))
			q = u.question(ctx)
			if want := "Vacation|Sick leave|Personal|" + tr("ELICIT_DECLINE") + "|" + tr("ELICIT_CANCEL"); strings.Join(q.Question.Options, "|") != want {
				t.Fatalf("kind options %q, want %q", q.Question.Options, want)
			}
			u.answer(ctx, q, "Sick leave")
			q = u.question(ctx)
			useDefault := tr("ELICIT_USE_DEFAULT", "value", "none")
			if q.Question.Options[0] != useDefault || q.Question.Options[1] != tr("ELICIT_SKIP") {
				t.Fatalf("note options %q", q.Question.Options)
			}
			// Typed instead of the default: a value to look for in the logs.
			if err := u.w.SendText(ctx, secretNote, ""); err != nil {
				t.Fatal(err)
			}
			q = u.question(ctx)
			if !strings.HasPrefix(q.Question.Text, tr("ELICIT_CONFIRM", "server", "records")) || !strings.Contains(q.Question.Text, "Days: 2.5") ||
				!strings.Contains(q.Question.Text, "Kind: Sick leave") {
				t.Fatalf("confirmation %q", q.Question.Text)
			}
			u.answer(ctx, q, tr("ELICIT_ACCEPT"))
			got := u.text(ctx)
			for _, want := range []string{`"days":2.5`, `"halfDay":true`, `"kind":"sick"`, `"note":"` + secretNote + `"`} {
				if !strings.Contains(got, want) {
					t.Fatalf("result %q lacks %s", got, want)
				}
			}
			if n := strings.Count(h.logs.String(), secretNote); n > 0 {
				t.Fatalf("an answer was logged %d times:\n%s", n, h.logs.String())
			}
			// The answers were taken as answers only: never handled as messages of their own
			// (a typed value would have gone to the LLM).
			h.waitIdle(ctx)
			for _, r := range h.llm.Requests() {
				if last := r.LastUser(); last == "45" || last == "2.5" {
					t.Fatalf("the answer %q was also handled as a chat message", last)
				}
			}
			if logs := h.logs.String(); strings.Contains(logs, "this handling is dropped") {
				t.Fatalf("an answer was handled again:\n%s", logs)
			}
		})
	}
}

// waitToolErrors waits until the records server counted n tool errors of tool.
func waitToolErrors(ctx context.Context, t *testing.T, h *harness, tool string, n int) {
	t.Helper()
	for h.records.Stats().ToolErrors[tool] < n {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %d tool errors, want %d", tool, h.records.Stats().ToolErrors[tool], n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func hasOption(m channel.Menu, id string) bool {
	return slices.ContainsFunc(m.Options, func(o channel.MenuOption) bool { return o.ID == id })
}

// TestProgressAndCancel: a call's progress reaches its user with how to cancel it (a command,
// and a menu item sent with it); /cancel and the item both stop the call — the server sees the
// cancellation — and the user is told; the menu loses the item afterwards.
func TestProgressAndCancel(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{writes: true})
	u := elicitUser(ctx, t, h, "es")
	tr := func(k string, args ...string) string { return h.cat.T("es", k, args...) }

	if got := u.say(ctx, "/cancel"); got != tr("NO_RUNNING_CALL") {
		t.Fatalf("/cancel with no call: %q", got)
	}
	for i, cancel := range []func(){
		func() {
			if err := u.w.SendText(ctx, "/cancel", ""); err != nil {
				t.Fatal(err)
			}
		},
		func() { u.selectItem(ctx, "cancel-call") },
	} {
		if err := u.w.SendText(ctx, `/call records/export_records {}`, ""); err != nil {
			t.Fatal(err)
		}
		want := tr("MCP_PROGRESS", "tool", "export_records", "server", "records", "detail", "exporting") + "\n" + tr("MCP_PROGRESS_CANCEL_HINT")
		if got := u.text(ctx); got != want {
			t.Fatalf("progress %q, want %q", got, want)
		}
		u.waitMenu(ctx, func(m channel.Menu) bool { return hasOption(m, "cancel-call") })
		cancel()
		if got := u.text(ctx); got != tr("MCP_CALL_CANCELLED", "tool", "export_records", "server", "records") {
			t.Fatalf("cancelled: %q", got)
		}
		waitToolErrors(ctx, t, h, "export_records", i+1)
		u.waitMenu(ctx, func(m channel.Menu) bool { return !hasOption(m, "cancel-call") })
	}
	// The cancel item of a call that has ended is answered, not an error.
	u.selectItem(ctx, "cancel-call")
	if got := u.text(ctx); got != tr("NO_RUNNING_CALL") {
		t.Fatalf("stale cancel item: %q", got)
	}
}

// TestURLElicitationAndSampling: a URL elicitation sends the link and waits for "Done"; a
// server's sampling request runs on the pack's LLM without tools, within the pack's token limit,
// and the user is told.
func TestURLElicitationAndSampling(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{writes: true})
	u := elicitUser(ctx, t, h, "en")
	tr := func(k string, args ...string) string { return h.cat.T("en", k, args...) }

	if err := u.w.SendText(ctx, `/call records/link_account {}`, ""); err != nil {
		t.Fatal(err)
	}
	q := u.question(ctx)
	if want := tr("ELICIT_URL", "server", "records", "message", "Link your account", "url", "https://records.example/link"); q.Question.Text != want {
		t.Fatalf("URL question %q, want %q", q.Question.Text, want)
	}
	u.answer(ctx, q, tr("ELICIT_URL_DONE"))
	if got := u.text(ctx); !strings.Contains(got, `"action":"accept"`) {
		t.Fatalf("URL elicitation result %q", got)
	}

	h.llm.Script(func(r agenttest.Request) agenttest.Response {
		return agenttest.Response{Text: "summary of " + r.LastUser()}
	})
	if got := u.say(ctx, `/call records/summarize_record {}`); got != tr("MCP_SAMPLING", "server", "records") {
		t.Fatalf("sampling notice %q", got)
	}
	if got := u.text(ctx); !strings.Contains(got, `"summary":"summary of record 42"`) {
		t.Fatalf("sampling result %q", got)
	}
	req := lastRequest(h)
	if len(req.ToolNames()) != 0 || req.System() != "Summarise HR records." || !strings.Contains(string(req.Raw), `"max_completion_tokens":50`) {
		t.Fatalf("sampling request: tools %v, system %q, body %s", req.ToolNames(), req.System(), req.Raw)
	}
}

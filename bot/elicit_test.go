package bot_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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

func commits(h *harness) int { return h.records.Stats().Executions["commit_api_write"] }

// TestElicitationCommit: a HollyHR-shaped commit asks its user through form elicitation; Accept
// commits once, Decline, Cancel and no answer fail closed and the user is told.
func TestElicitationCommit(t *testing.T) {
	for _, lang := range []string{"en", "es"} {
		t.Run(lang, func(t *testing.T) {
			ctx := testCtx(t)
			h := newHarness(t, harnessOptions{writes: true, elicitTimeout: 2 * time.Second})
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
			h := newHarness(t, harnessOptions{writes: true})
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
			u.answer(ctx, q, useDefault)
			q = u.question(ctx)
			if !strings.HasPrefix(q.Question.Text, tr("ELICIT_CONFIRM", "server", "records")) || !strings.Contains(q.Question.Text, "Days: 2.5") ||
				!strings.Contains(q.Question.Text, "Kind: Sick leave") {
				t.Fatalf("confirmation %q", q.Question.Text)
			}
			u.answer(ctx, q, tr("ELICIT_ACCEPT"))
			got := u.text(ctx)
			for _, want := range []string{`"days":2.5`, `"halfDay":true`, `"kind":"sick"`, `"note":"none"`} {
				if !strings.Contains(got, want) {
					t.Fatalf("result %q lacks %s", got, want)
				}
			}
			if strings.Contains(h.logs.String(), "Sick leave") || strings.Contains(h.logs.String(), "2.5") {
				t.Fatalf("an answer was logged:\n%s", h.logs.String())
			}
		})
	}
}

package main

// End-to-end test of elicitation over the VS Agent channel: `packbot serve` (vsagent, SQLite, no
// language model: the calls are /call commands) relays the questions of HollyHR-shaped writes
// (the demo bank with demoserver's Writes) to the wallet — questions as "menu-display", answers
// as "menu-select" or typed texts — in English and Spanish. The bank's counters prove how many
// times a write was committed.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/packbot/packbot/mcp/demoserver"
)

// vaElicitPack: the bank's write tools, open to guests; no login needed.
var vaElicitPack = vaPackHead("e2e-elicit") + `  servers:
    - name: records
      transport: streamable-http
      url: %s
      allowlist: [prepare_api_write, commit_api_write, request_time_off]
      toolAccess:
        roles:
          guest: [prepare_api_write, commit_api_write, request_time_off]
`

// guest connects a wallet in lang and waits for the greeting.
func (b *vaBot) guest(ctx context.Context, t *testing.T, name, lang string) *vaUser {
	t.Helper()
	u := &vaUser{b: b, conn: uuid.NewString(), lang: lang, name: name}
	b.connected(t, u.conn)
	b.received(t, u.conn, "profile", `"displayName":"`+name+`","preferredLanguage":"`+lang+`"`)
	u.textIs(ctx, t, 0, vaGreeting[lang])
	return u
}

// call sends a /call and returns the mark before it.
func (u *vaUser) call(t *testing.T, tool, args string) int {
	t.Helper()
	from := u.mark()
	u.b.text(t, u.conn, "/call records/"+tool+" "+args)
	return from
}

// option returns a matcher of an option text.
func option(want string) func(string) bool { return func(s string) bool { return s == want } }

func TestVSAgentElicitation(t *testing.T) {
	b := startVABot(t, vaElicitPack, &demoserver.Options{Name: "records", Writes: true}, "PACKBOT_ELICITATION_TIMEOUT=2s")
	commits := func() int { return b.bank.Stats().Executions["commit_api_write"] }

	t.Run("commit", func(t *testing.T) {
		for _, lang := range []string{"en", "es"} {
			ctx := e2eCtx(t)
			u := b.guest(ctx, t, "Eli-"+lang, lang)
			tr := func(k string, args ...string) string { return b.cat.T(lang, k, args...) }
			prepare := func() string {
				from := u.call(t, "prepare_api_write", `{"operation":"update_person","body":{"name":"Ana"}}`)
				got := u.text(ctx, t, from, "prepared", func(s string) bool { return strings.Contains(s, "confirmationToken") })
				var out struct {
					Token string `json:"confirmationToken"`
				}
				if err := json.Unmarshal([]byte(got[strings.Index(got, "{"):]), &out); err != nil {
					t.Fatalf("prepared %q: %v", got, err)
				}
				return out.Token
			}
			// ask commits a prepared write and returns the confirmation question.
			ask := func() (e2ePosted, int) {
				from := u.call(t, "commit_api_write", `{"confirmationToken":"`+prepare()+`"}`)
				intro := tr("ELICIT_INTRO", "server", "records", "message", "Approve this write? ")
				u.text(ctx, t, from, "ELICIT_INTRO", func(s string) bool {
					return strings.HasPrefix(s, intro) && strings.Contains(s, `"operation":"update_person"`)
				})
				q := u.question(ctx, t, from, "ELICIT_CONFIRM", option(tr("ELICIT_CONFIRM", "server", "records")))
				if got, want := strings.Join(vaItemTexts(q), "|"), tr("ELICIT_ACCEPT")+"|"+tr("ELICIT_DECLINE")+"|"+tr("ELICIT_CANCEL"); got != want {
					t.Fatalf("%s: options %q, want %q", lang, got, want)
				}
				return q, u.mark()
			}
			before := commits()
			q, from := ask()
			u.answer(t, q, "Accept", option(tr("ELICIT_ACCEPT")))
			u.text(ctx, t, from, "committed", func(s string) bool { return strings.Contains(s, `"committed":true`) })
			if got := commits(); got != before+1 {
				t.Fatalf("%s: %d commits after Accept, want %d", lang, got, before+1)
			}
			for _, c := range []struct{ option, told string }{{"ELICIT_DECLINE", "ELICIT_DECLINED"}, {"ELICIT_CANCEL", "ELICIT_CANCELLED"}} {
				q, from := ask()
				u.answer(t, q, c.option, option(tr(c.option)))
				u.textIs(ctx, t, from, tr(c.told, "server", "records"))
				u.text(ctx, t, from, "refusal", func(s string) bool { return strings.Contains(s, "did not approve") })
			}
			_, from = ask() // unanswered: PACKBOT_ELICITATION_TIMEOUT cancels it
			u.textIs(ctx, t, from, tr("ELICIT_TIMEOUT", "server", "records"))
			u.text(ctx, t, from, "refusal", func(s string) bool { return strings.Contains(s, "did not approve") })
			if got := commits(); got != before+1 {
				t.Fatalf("%s: %d commits, want only the accepted one (%d)", lang, got, before+1)
			}
		}
	})

	t.Run("form", func(t *testing.T) {
		for _, lang := range []string{"en", "es"} {
			ctx := e2eCtx(t)
			u := b.guest(ctx, t, "Form-"+lang, lang)
			tr := func(k string, args ...string) string { return b.cat.T(lang, k, args...) }
			from := u.call(t, "request_time_off", `{"reason":"trip"}`)
			u.textIs(ctx, t, from, tr("ELICIT_INTRO", "server", "records", "message", "Details of the time-off request"))
			u.question(ctx, t, from, "days", func(p string) bool { return strings.HasPrefix(p, "Days\n") })
			from = u.mark()
			u.b.text(t, u.conn, "45")
			u.textIs(ctx, t, from, tr("ELICIT_INVALID_MAX", "field", "Days", "limit", "30"))
			u.question(ctx, t, from, "days again", func(p string) bool { return strings.HasPrefix(p, "Days\n") })
			from = u.mark()
			u.b.text(t, u.conn, "2.5")
			q := u.question(ctx, t, from, "half day", option("Half day"))
			from = u.mark()
			u.answer(t, q, "Yes", option(tr("YES")))
			q = u.question(ctx, t, from, "kind", option("Kind"))
			from = u.mark()
			u.answer(t, q, "Sick leave", option("Sick leave"))
			q = u.question(ctx, t, from, "note", func(p string) bool { return strings.HasPrefix(p, "Note") })
			from = u.mark()
			u.answer(t, q, "default", option(tr("ELICIT_USE_DEFAULT", "value", "none")))
			q = u.question(ctx, t, from, "confirmation", func(p string) bool {
				return strings.HasPrefix(p, tr("ELICIT_CONFIRM", "server", "records")) && strings.Contains(p, "Kind: Sick leave")
			})
			from = u.mark()
			u.answer(t, q, "Accept", option(tr("ELICIT_ACCEPT")))
			u.text(ctx, t, from, "result", func(s string) bool {
				return strings.Contains(s, `"days":2.5`) && strings.Contains(s, `"halfDay":true`) && strings.Contains(s, `"kind":"sick"`) && strings.Contains(s, `"note":"none"`)
			})
		}
	})
}

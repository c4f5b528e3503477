package main

// End-to-end test of elicitation over the embedded DIDComm channel: `packbot serve` and scripted
// `packbot wallet` processes (guests, in English and Spanish) exchanging encrypted envelopes;
// the HollyHR-shaped writes of the demo server (its Writes) over streamable HTTP ask the wallet
// through form elicitation. The server's counters prove how many times a write was committed.

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
)

func TestE2EElicitationDIDComm(t *testing.T) {
	records := demoserver.New(&demoserver.Options{Name: "records", Writes: true})
	rs := httptest.NewServer(records.Handler())
	t.Cleanup(rs.Close)
	e := newE2EPack(t, "testdata/elicitation", false, "E2E_RECORDS_URL="+rs.URL+"/mcp", "PACKBOT_ELICITATION_TIMEOUT=2s")
	p, err := packs.Load(packs.Options{Path: "testdata/elicitation", Env: packs.MapEnv(map[string]string{"E2E_RECORDS_URL": rs.URL})})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := i18n.New(p)
	if err != nil {
		t.Fatal(err)
	}
	commits := func() int { return records.Stats().Executions["commit_api_write"] }

	for _, lang := range []string{"en", "es"} {
		t.Run(lang, func(t *testing.T) {
			ctx := e2eCtx(t)
			tr := func(k string, args ...string) string { return cat.T(lang, k, args...) }
			w := e.wallet(ctx, "eli-"+lang, lang)
			_ = w.text() // the greeting
			prepare := func() string {
				got := w.say(`/call records/prepare_api_write {"operation":"update_person","body":{"name":"Ana"}}`)
				var out struct {
					Token string `json:"confirmationToken"`
				}
				i := strings.Index(got, "{")
				if i < 0 || json.Unmarshal([]byte(got[i:]), &out) != nil || out.Token == "" {
					t.Fatalf("prepared %q", got)
				}
				return out.Token
			}
			// ask commits a prepared write and checks the question: intro, then the confirmation.
			ask := func() {
				intro := w.say(`/call records/commit_api_write {"confirmationToken":"` + prepare() + `"}`)
				if want := tr("ELICIT_INTRO", "server", "records", "message", "Approve this write? "); !strings.HasPrefix(intro, want) ||
					!strings.Contains(intro, `"operation":"update_person"`) {
					t.Fatalf("intro %q", intro)
				}
			}
			before := commits()
			ask()
			w.answer(tr("ELICIT_ACCEPT"))
			if got := w.text(); !strings.Contains(got, `"committed":true`) {
				t.Fatalf("accepted: %q", got)
			}
			for _, c := range []struct{ option, told string }{{"ELICIT_DECLINE", "ELICIT_DECLINED"}, {"ELICIT_CANCEL", "ELICIT_CANCELLED"}} {
				ask()
				w.answer(tr(c.option))
				if got := w.text(); got != tr(c.told, "server", "records") {
					t.Fatalf("%s: told %q", c.option, got)
				}
				if got := w.text(); !strings.Contains(got, "did not approve") {
					t.Fatalf("%s: result %q", c.option, got)
				}
			}
			ask()
			_ = w.next("question") // left unanswered
			if got := w.text(); got != tr("ELICIT_TIMEOUT", "server", "records") {
				t.Fatalf("unanswered: told %q", got)
			}
			if got := w.text(); !strings.Contains(got, "did not approve") {
				t.Fatalf("unanswered: result %q", got)
			}
			if got := commits(); got != before+1 {
				t.Fatalf("%d commits, want %d (only the accepted one)", got, before+1)
			}

			// A form: a number out of range is asked again; enum, boolean and a default.
			if got := w.say(`/call records/request_time_off {"reason":"trip"}`); got != tr("ELICIT_INTRO", "server", "records", "message", "Details of the time-off request") {
				t.Fatalf("form intro %q", got)
			}
			if q := w.next("question"); !strings.HasPrefix(q["text"].(string), "Days\n") {
				t.Fatalf("days question %v", q)
			}
			if got := w.say("45"); got != tr("ELICIT_INVALID_MAX", "field", "Days", "limit", "30") {
				t.Fatalf("out of range: %q", got)
			}
			_ = w.next("question")
			w.do(map[string]any{"action": "text", "content": "2.5"})
			w.answer(tr("YES"))
			w.answer("Sick leave")
			w.answer(tr("ELICIT_USE_DEFAULT", "value", "none"))
			w.answer(tr("ELICIT_ACCEPT"))
			got := w.text()
			for _, want := range []string{`"days":2.5`, `"halfDay":true`, `"kind":"sick"`, `"note":"none"`} {
				if !strings.Contains(got, want) {
					t.Fatalf("form result %q lacks %s", got, want)
				}
			}
		})
	}
}

package bot_test

import (
	"context"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/telemetry"
)

// rateQuestion is the chat message of the telemetry tests: the scripted model answers it with a
// call of get_exchange_rate {"from":"EUR","to":"USD"}.
const rateQuestion = "what is the rate for my kraken-7731 savings today?"

// newObservedHarness is a harness whose parts report to a Telemetry; rec, when set, records
// its spans. o.store, when nil, is a new store.
func newObservedHarness(t *testing.T, rec *telemetry.Recorder, o harnessOptions) (*harness, *telemetry.Telemetry) {
	t.Helper()
	if o.store == nil {
		o.store = openStore(t, false)
	}
	tel, err := telemetry.New(t.Context(), &telemetry.Options{Store: o.store, PackID: "bot-test", Recorder: rec,
		Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	o.tel = tel
	h := newHarness(t, o)
	h.llm.Script(bankScript)
	return h, tel
}

// TestTraceOfChatMessage: one chat message whose LLM turn calls a tool is one trace — its
// acceptance, its handling, the flow, both LLM calls and the MCP call — and no span attribute
// holds the message's text, the tool's arguments or the reply.
func TestTraceOfChatMessage(t *testing.T) {
	ctx := testCtx(t)
	rec := telemetry.NewRecorder()
	h, _ := newObservedHarness(t, rec, harnessOptions{})
	u := h.login(ctx, "ana@acme.corp", "Ana", "employee", "en")
	rec.Reset()

	reply := u.say(ctx, rateQuestion)
	spans := waitSpans(t, rec, func(ss []telemetry.Span) bool {
		return slices.ContainsFunc(ss, func(s telemetry.Span) bool {
			return s.Name == telemetry.SpanHandle && s.Attributes["packbot.event.kind"] == "text"
		})
	})
	var trace string
	for _, s := range spans {
		if s.Name == telemetry.SpanAccept && s.Attributes["packbot.event.kind"] == "text" {
			trace = s.TraceID
		}
	}
	count := map[string]int{}
	for _, s := range spans {
		// The spans of other events (the login's handling ending, a menu refresh) are
		// checked for secrets too, not counted.
		if kind, ok := s.Attributes["packbot.event.kind"]; !ok || kind == "text" {
			count[s.Name]++
			if s.TraceID != trace {
				t.Errorf("span %s is in trace %s, want %s (all: %+v)", s.Name, s.TraceID, trace, spans)
			}
		}
		for k, v := range s.Attributes {
			for _, secret := range []string{rateQuestion, "kraken-7731", "EUR", "USD", `"from"`, reply} {
				if strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s=%q holds %q", s.Name, k, v, secret)
				}
			}
		}
	}
	for name, want := range map[string]int{telemetry.SpanAccept: 1, telemetry.SpanHandle: 1, telemetry.SpanFlow: 1,
		telemetry.SpanLLM: 2, telemetry.SpanMCP: 1} {
		if count[name] != want {
			t.Errorf("%d spans %s, want %d (all: %+v)", count[name], name, want, spans)
		}
	}
	for _, s := range spans {
		switch s.Name {
		case telemetry.SpanMCP:
			if s.Attributes["packbot.mcp.server"] != "bank" || s.Attributes["packbot.mcp.tool"] != "get_exchange_rate" ||
				s.Attributes["packbot.mcp.failure_class"] != "ok" {
				t.Errorf("MCP span attributes %v", s.Attributes)
			}
		case telemetry.SpanLLM:
			if s.Attributes["gen_ai.system"] != "openai" || s.Attributes["gen_ai.request.model"] != "scripted" {
				t.Errorf("LLM span attributes %v", s.Attributes)
			}
		case telemetry.SpanHandle:
			if s.Attributes["packbot.channel"] != "memory" || s.Attributes["packbot.outcome"] != "completed" || s.Parent == "" {
				t.Errorf("handle span %+v: want a child of the accept span, completed", s)
			}
		}
	}
}

// TestTraceOfApprovalRequest: the answer that submits an approval request is one trace with
// the approval step (server, tool, status), and no argument in any attribute.
func TestTraceOfApprovalRequest(t *testing.T) {
	ctx := testCtx(t)
	rec := telemetry.NewRecorder()
	h, _ := newObservedHarness(t, rec, harnessOptions{})
	u := h.login(ctx, "ana@acme.corp", "Ana", "employee", "en")
	if err := u.w.SendText(ctx, sendMoney, ""); err != nil {
		t.Fatal(err)
	}
	q := u.question(ctx)
	rec.Reset()
	u.answer(ctx, q, "Yes")
	u.text(ctx) // submitted
	spans := waitSpans(t, rec, func(ss []telemetry.Span) bool {
		return slices.ContainsFunc(ss, func(s telemetry.Span) bool {
			return s.Name == telemetry.SpanHandle && s.Attributes["packbot.event.kind"] == "question-answered"
		})
	})
	var handle, approval *telemetry.Span
	for i, s := range spans {
		switch {
		case s.Name == telemetry.SpanHandle && s.Attributes["packbot.event.kind"] == "question-answered":
			handle = &spans[i]
		case s.Name == telemetry.SpanApproval:
			approval = &spans[i]
		}
		for k, v := range s.Attributes {
			for _, secret := range []string{"rcp-globex", "EUR", "amount", "ana@acme.corp"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s=%q holds %q", s.Name, k, v, secret)
				}
			}
		}
	}
	if handle == nil || approval == nil {
		t.Fatalf("no handling or approval span: %+v", spans)
	}
	if approval.TraceID != handle.TraceID || approval.Attributes["packbot.approval.step"] != "submit" ||
		approval.Attributes["packbot.mcp.server"] != "bank" || approval.Attributes["packbot.mcp.tool"] != "send_money" ||
		approval.Attributes["packbot.approval.status"] != "PENDING" {
		t.Errorf("approval span %+v, handling span %+v", *approval, *handle)
	}
}

// waitSpans waits until the recorded spans satisfy ok (the handling's spans end after the
// reply is delivered); the test's deadline bounds it.
func waitSpans(t *testing.T, rec *telemetry.Recorder, ok func([]telemetry.Span) bool) []telemetry.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ss, _ := rec.Wait(ctx, ok) // on timeout the caller's checks say what is missing
	return ss
}

// TestMetricsAfterChatTurn scrapes the metrics after a chat turn with a tool call and an
// approval request: every family is there, with the labels of what happened.
func TestMetricsAfterChatTurn(t *testing.T) {
	ctx := testCtx(t)
	rec := telemetry.NewRecorder()
	h, tel := newObservedHarness(t, rec, harnessOptions{})
	u := h.login(ctx, "ana@acme.corp", "Ana", "employee", "en")
	u.say(ctx, rateQuestion)
	if err := u.w.SendText(ctx, sendMoney, ""); err != nil { // needs a finance manager's approval
		t.Fatal(err)
	}
	u.answer(ctx, u.question(ctx), "Yes")
	u.text(ctx) // submitted
	// The answer's handling ends (its metrics recorded, then its span ended) after its reply.
	waitSpans(t, rec, func(ss []telemetry.Span) bool {
		return slices.ContainsFunc(ss, func(s telemetry.Span) bool {
			return s.Name == telemetry.SpanHandle && s.Attributes["packbot.event.kind"] == "question-answered"
		})
	})
	srv := httptest.NewServer(tel.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{
		`packbot_messages_total{channel="memory",kind="text",outcome="completed"} 2`,
		`packbot_event_handling_seconds_count{channel="memory",kind="text"} 2`,
		`packbot_llm_call_seconds_count{model="scripted",outcome="ok",provider="openai"} 2`,
		`packbot_llm_tokens_total{model="scripted",provider="openai",type="input"}`,
		`packbot_mcp_calls_total{class="ok",server="bank",tool="get_exchange_rate"} 1`,
		`packbot_mcp_call_seconds_count{server="bank",tool="get_exchange_rate"} 1`,
		`packbot_approval_steps_total{status="PENDING",step="submit"} 1`,
		`packbot_approvals{status="PENDING"} 1`,
		`packbot_approvals{status="APPROVED"} 0`,
		`packbot_inbox_pending `,
		`packbot_inbox_oldest_age_seconds `,
		`packbot_inbox_parked 0`,
		`packbot_outbox_pending `,
		`packbot_outbox_oldest_age_seconds `,
		`packbot_store_scrape_errors 0`,
		`packbot_pack_info{id="bot-test",source="",version=""} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}

// TestTraceAcrossRestart: an event accepted by one process and handled by the next (the first
// stopped while it ran) is one trace: the stored trace context crosses the inbox, sealed.
func TestTraceAcrossRestart(t *testing.T) {
	ctx := testCtx(t)
	st := sqliteStore(t)
	rec := telemetry.NewRecorder()
	hold := newHoldCall("get_exchange_rate")
	h, _ := newObservedHarness(t, rec, harnessOptions{store: st, bankMiddleware: hold.wrap, drain: 50 * time.Millisecond})
	u := h.connect(ctx, map[string]string{"email": "t@acme.corp"}, "en")
	u.text(ctx)
	if err := u.w.SendText(ctx, rateQuestion, ""); err != nil {
		t.Fatal(err)
	}
	<-hold.held
	h.stop()
	close(hold.release)

	h2, _ := newObservedHarness(t, rec, harnessOptions{store: st, restore: map[string]map[string]string{u.w.Conn(): {"email": "t@acme.corp"}}})
	u2 := &user{h: h2, t: t, w: h2.restored[u.w.Conn()]}
	u2.text(ctx) // the call was interrupted
	spans := waitSpans(t, rec, func(ss []telemetry.Span) bool {
		return slices.ContainsFunc(ss, func(s telemetry.Span) bool {
			return s.Name == telemetry.SpanHandle && s.Attributes["packbot.event.kind"] == "text" && s.Attributes["packbot.outcome"] == "completed"
		})
	})
	var accept *telemetry.Span
	for i, s := range spans {
		if s.Name == telemetry.SpanAccept && s.Attributes["packbot.event.kind"] == "text" {
			accept = &spans[i]
		}
	}
	if accept == nil {
		t.Fatalf("no accept span: %+v", spans)
	}
	handlings := 0
	for _, s := range spans {
		if s.Name == telemetry.SpanHandle && s.Attributes["packbot.event.kind"] == "text" {
			handlings++
			if s.TraceID != accept.TraceID || s.Parent != accept.SpanID {
				t.Errorf("handling %+v is not a child of the acceptance %+v", s, *accept)
			}
		}
	}
	if handlings != 2 {
		t.Errorf("%d handlings of the message, want 2 (the cut-off one and the next process's): %+v", handlings, spans)
	}
}

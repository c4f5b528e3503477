package flows

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

// TestApprovalConfirm: a call whose decision is APPROVAL asks whether to submit a request;
// No submits nothing, Yes submits it (with an id derived from the event) and the session
// stays in CHAT all along — approval dialogs never look like configuration.
func TestApprovalConfirm(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.login("ana@acme.corp", "employee")
	f.want(f.say(`/call send_money {"amount":5}`), key("APPROVAL_CONFIRM", "tool", "send_money", "server", "bank", "roles", "finance-manager",
		"summary", "amount: 5"))
	if f.s.State != store.StateChat || strings.Contains(menuIDs(f.e.Menu(t.Context(), f.s)), "abort-config") {
		t.Fatalf("state %s", f.s.State)
	}
	f.want(f.answer(f.tr("NO")), key("APPROVAL_NOT_SUBMITTED"))
	f.say(`/call send_money {"amount":5}`)
	if got := f.answer(f.tr("YES")); len(got) != 0 || len(f.appr.submitted) != 1 || f.s.Flow != nil {
		t.Fatalf("yes: %q, submitted %+v", got, f.appr.submitted)
	}
	r := f.appr.submitted[0]
	if r.ID != derivedID("conn-1/"+itoa(f.n), "approval") || string(r.Arguments) != `{"amount":5}` || r.Caller.Identity != "ana@acme.corp" || r.Policy == nil {
		t.Fatalf("request %+v", r)
	}
	// The roles changed meanwhile: the decision is taken again when the user says yes.
	f.say(`/call send_money {"amount":6}`)
	f.s.Roles = []string{"guest-ish"}
	f.want(f.answer(f.tr("YES")), key("TOOL_DENIED", "tool", "send_money", "server", "bank"))
	f.s.Roles = []string{"employee"}
	f.say(`/call send_money {"amount":6}`)
	f.appr.submitErr = errBoom
	if _, err := f.handle(channel.QuestionAnswered{Conn: "conn-1", QuestionID: f.e.dialogOf(f.s).open().ID, Response: f.tr("YES")}); err == nil {
		t.Fatal("a failed submit was not an error")
	}
	// Self-approval allowed (payments, for its approvers): the call runs at once.
	f.appr.submitErr = nil
	f.s.Roles = []string{"finance-manager"}
	f.s.Identity = "fm@acme.corp"
	f.want(f.say(`/call create_invoice {}`), key("TOOL_RESULT", "tool", "create_invoice", "result", "result of create_invoice"))

	// Without an approvals service, the call is answered APPROVAL_REQUIRED and nothing is asked.
	g := newFixture(t, fixtureOptions{noAppr: true})
	g.login("ana@acme.corp", "employee")
	g.want(g.say(`/call send_money {}`), key("APPROVAL_REQUIRED", "tool", "send_money", "server", "bank", "roles", "finance-manager"))
	g.s.Flow = encodeDialog(&approvalConfirm{question: question{ID: "q", Options: []option{{Text: "y", Value: choiceYes}}}})
	g.want(g.do(channel.QuestionAnswered{Conn: "conn-1", QuestionID: "q", Response: "y"}), key("UNEXPECTED_ANSWER"))
	g.want(g.run((*turn).myRequests), key("UNKNOWN_MENU_OPTION"))
	g.want(g.run((*turn).pendingApprovals), key("UNKNOWN_MENU_OPTION"))
}

// TestMyRequests: the requester lists their pending requests, sees one, cancels it or goes
// back; a request resolved meanwhile is said so.
func TestMyRequests(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.login("ana@acme.corp", "employee")
	f.want(f.run((*turn).myRequests), key("MY_REQUESTS_NONE"))
	anaRequests(t, f)
	f.want(f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "my-approval-requests"}), key("MY_REQUESTS_TITLE"))
	opts := f.options()
	if len(opts) != 2 || opts[0] != f.tr("MY_REQUEST_OPTION", "tool", "send_money", "server", "bank", "date", "2026-01-02 03:04")+" #req-aaaa" {
		t.Fatalf("options %q", opts)
	}
	a := f.appr.byID["req-aaaaaaaa-1"]
	f.want(f.answer(opts[0]), key("APPROVAL_DETAILS", "requester", "Ana", "tool", "send_money", "server", "bank", "description", "",
		"summary", `summary of {"amount":5}`, "fingerprint", a.Fingerprint, "expires", "2026-01-02 04:04 UTC"))
	f.want(f.answer(f.tr("BACK")), key("MY_REQUESTS_TITLE"))
	f.answer(opts[0])
	f.want(f.answer(f.tr("CANCEL_REQUEST")), key("APPROVAL_YOU_CANCELLED", "tool", "send_money"))
	if f.appr.byID["req-aaaaaaaa-1"].Status != store.ApprovalCancelled {
		t.Fatal("not cancelled")
	}
	// Cancelled meanwhile (another replica, the expiry): said so.
	f.run((*turn).myRequests)
	f.answer(f.options()[0])
	f.appr.byID["req-bbbbbbbb-2"] = withStatus(f.appr.byID["req-bbbbbbbb-2"], store.ApprovalExpired)
	f.want(f.answer(f.tr("CANCEL_REQUEST")), key("APPROVAL_ALREADY_RESOLVED"))
	submit(t, f, "req-cccccccc-3", "ana@acme.corp")
	f.run((*turn).myRequests)
	f.appr.byID["req-cccccccc-3"] = withStatus(f.appr.byID["req-cccccccc-3"], store.ApprovalExpired)
	f.want(f.answer(f.options()[0]), key("APPROVAL_ALREADY_RESOLVED"))
	f.appr.listErr = errBoom
	if _, err := f.handle(channel.MenuSelected{Conn: "conn-1", OptionID: "my-approval-requests"}); err == nil {
		t.Log("the menu item is hidden when counts fail; the list error is checked directly")
	}
	var fx Effects
	if err := (&turn{e: f.e, conn: "conn-1", s: &f.s, fx: &fx}).myRequests(t.Context()); err == nil {
		t.Fatal("a list error was not an error")
	}
	f.appr.listErr = nil
	f.s.Flow = encodeDialog(&myRequests{question: question{ID: "q", Options: []option{{Text: "x", Value: "nope"}}}})
	if _, err := f.handle(channel.QuestionAnswered{Conn: "conn-1", QuestionID: "q", Response: "x"}); err == nil {
		t.Fatal("an unknown request was not an error")
	}
}

// TestPendingApprovals: an approver lists the requests they may decide, approves (the quorum
// runs the call, with the approver's conversation) or rejects; votes short of the quorum are
// counted; refusals come back as messages.
func TestPendingApprovals(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.login("fm@acme.corp", "finance-manager")
	f.want(f.run((*turn).pendingApprovals), key("PENDING_NONE"))
	anaRequests(t, f)
	var ran []string
	f.appr.onApproved = func(_ context.Context, a store.Approval) { ran = append(ran, a.ID) }
	if m := f.e.Menu(t.Context(), f.s); !strings.Contains(menuIDs(m), "pending-approvals") {
		t.Fatalf("menu %s", menuIDs(m))
	}
	f.want(f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "pending-approvals"}), key("PENDING_TITLE"))
	opts := f.options()
	if opts[0] != f.tr("PENDING_OPTION", "requester", "Ana", "tool", "send_money", "server", "bank")+" #req-aaaa" {
		t.Fatalf("options %q", opts)
	}
	f.answer(opts[0])
	f.want(f.answer(f.tr("BACK")), key("PENDING_TITLE"))
	f.answer(opts[0])
	f.want(f.answer(f.tr("APPROVE")), key("APPROVAL_YOU_APPROVED", "requester", "Ana", "tool", "send_money"))
	if len(ran) != 1 {
		t.Fatalf("ran %v", ran)
	}
	f.e.InvalidateCounts([]string{"fm@acme.corp"})
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "pending-approvals"})
	f.answer(f.options()[0])
	f.want(f.answer(f.tr("REJECT")), key("APPROVAL_YOU_REJECTED", "requester", "Ana", "tool", "send_money"))

	// A quorum of two: the first vote is recorded.
	a := submit(t, f, "req-cccccccc-3", "ana@acme.corp")
	a.Quorum = 2
	f.appr.byID[a.ID] = a
	f.run((*turn).pendingApprovals)
	f.answer(f.options()[0])
	f.want(f.answer(f.tr("APPROVE")), key("APPROVAL_VOTE_RECORDED", "votes", "1", "quorum", "2"))
	// Refusals.
	for err, k := range map[error][]string{
		store.ErrAlreadyVoted:    key("APPROVAL_ALREADY_VOTED"),
		approvals.ErrOwnRequest:  key("APPROVAL_OWN_REQUEST"),
		approvals.ErrNotApprover: key("APPROVAL_NOT_APPROVER"),
		store.ErrAlreadyResolved: key("APPROVAL_ALREADY_RESOLVED"),
		store.ErrNotFound:        key("APPROVAL_ALREADY_RESOLVED"),
		approvals.ErrToolGone:    key("APPROVAL_TOOL_GONE", "tool", a.Tool),
	} {
		f.want(f.run(func(t *turn, ctx context.Context) error { return t.approvalError(ctx, a, err) }), k)
	}
	if err := (&turn{e: f.e}).approvalError(t.Context(), a, errBoom); err != errBoom {
		t.Fatalf("other errors pass: %v", err)
	}
	f.s.Roles = []string{"employee"}
	f.s.Flow = encodeDialog(&pendingRequest{chosenRequest{question: question{ID: "q", Options: []option{{Text: "x", Value: choiceApprove}}}, ID: a.ID}})
	f.want(f.do(channel.QuestionAnswered{Conn: "conn-1", QuestionID: "q", Response: "x"}), key("APPROVAL_NOT_APPROVER"))
	f.appr.listErr = errBoom
	var fx Effects
	if err := (&turn{e: f.e, conn: "conn-1", s: &f.s, fx: &fx}).pendingApprovals(t.Context()); err == nil {
		t.Fatal("a list error was not an error")
	}
	// Guests have no approvals.
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "logout"})
	f.want(f.run((*turn).pendingApprovals), key("UNKNOWN_MENU_OPTION"))
}

// TestBadgeCounts: the menu's badges come from the approvals service, cached per identity and
// role set until invalidated; a failing count shows none.
func TestBadgeCounts(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.login("ana@acme.corp", "employee")
	submit(t, f, "req-aaaaaaaa-1", "ana@acme.corp")
	if m := f.e.Menu(t.Context(), f.s); !strings.Contains(menuIDs(m), "my-approval-requests") {
		t.Fatalf("menu %s", menuIDs(m))
	}
	submit(t, f, "req-bbbbbbbb-2", "ana@acme.corp")
	if c := f.e.counts(t.Context(), f.run0().caller()); c.ApprovalRequests != 1 {
		t.Fatalf("cached counts %+v", c)
	}
	f.e.InvalidateCounts([]string{"ana@acme.corp"})
	if c := f.e.counts(t.Context(), f.run0().caller()); c.ApprovalRequests != 2 {
		t.Fatalf("counts %+v", c)
	}
	f.e.InvalidateCounts([]string{"ana@acme.corp"})
	f.appr.countsErr = errBoom
	if c := f.e.counts(t.Context(), f.run0().caller()); c.ApprovalRequests != 0 {
		t.Fatalf("counts on error %+v", c)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	f.appr.countsErr = store.ErrUnavailable
	if c := f.e.counts(ctx, f.run0().caller()); c.ApprovalRequests != 0 {
		t.Fatalf("counts while the store is down %+v", c)
	}
	if f.e.Render("", approvalsMessage()) == "" {
		t.Fatal("render")
	}
}

// anaRequests are two requests of ana's to send money.
func anaRequests(t *testing.T, f *fixture) {
	t.Helper()
	submit(t, f, "req-aaaaaaaa-1", "ana@acme.corp")
	submit(t, f, "req-bbbbbbbb-2", "ana@acme.corp")
}

func submit(t *testing.T, f *fixture, id, requester string) store.Approval {
	t.Helper()
	a, err := f.appr.Submit(t.Context(), approvals.Request{ID: id, Caller: callerOf(requester), Server: "bank", Tool: "send_money",
		Arguments: []byte(`{"amount":5}`), Policy: &f.e.pack.MCP.Servers[0].ToolAccess.Approval[0]})
	if err != nil {
		t.Fatal(err)
	}
	return a.Approval
}

func itoa(n int) string { return strconv.Itoa(n) }

func withStatus(a store.Approval, status string) store.Approval {
	a.Status = status
	return a
}

// callerOf is identity logged in as an employee, named after its local part ("Ana").
func callerOf(identity string) rbac.Caller {
	local, _, _ := strings.Cut(identity, "@")
	return rbac.Caller{Identity: identity, DisplayName: strings.ToUpper(local[:1]) + local[1:], Roles: []string{"employee"}, Authenticated: true}
}

// run0 is a turn of the fixture's session.
func (f *fixture) run0() *turn { return &turn{e: f.e, conn: "conn-1", s: &f.s, fx: &Effects{}} }

func approvalsMessage() i18n.Message {
	return i18n.Message{Key: "APPROVAL_EXPIRED", Args: []string{"tool", "x"}}
}

// TestBadgeEffects: the badges an approval step changed are effects of its event (the bot
// refreshes those menus after the commit), and this event's own menu counts again at once.
func TestBadgeEffects(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.login("fm@acme.corp", "finance-manager")
	anaRequests(t, f)
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "pending-approvals"})
	f.answer(f.options()[0])
	if m := f.e.Menu(t.Context(), f.s); !strings.Contains(menuTitles(m), "(2)") {
		t.Fatalf("menu before the decision %q", menuTitles(m))
	}
	q := f.e.dialogOf(f.s).open()
	fx, err := f.handle(channel.QuestionAnswered{Conn: "conn-1", QuestionID: q.ID, Response: f.tr("APPROVE")})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fx.Badges, []string{"ana@acme.corp", "fm@acme.corp"}) {
		t.Fatalf("badges %q, want the requester's and the approver's", fx.Badges)
	}
	if m := f.e.Menu(t.Context(), f.s); !strings.Contains(menuTitles(m), "(1)") {
		t.Fatalf("menu after the decision %q: the cached count was kept", menuTitles(m))
	}
	// A refused step changes nobody's badges.
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "my-approval-requests"})
	fx, err = f.handle(channel.MenuSelected{Conn: "conn-1", OptionID: "pending-approvals"})
	if err != nil || len(fx.Badges) != 0 {
		t.Fatalf("listing: badges %q, %v", fx.Badges, err)
	}
}

func menuTitles(m channel.Menu) string {
	var ts []string
	for _, o := range m.Options {
		ts = append(ts, o.Title)
	}
	return strings.Join(ts, " | ")
}

// TestStaleBadgeOnSelect: an approver whose cached count is stale (a request made on another
// replica, whose refresh is still on its way) and who opens the pending approvals from its
// notice gets the list: the count is read again before the item is refused.
func TestStaleBadgeOnSelect(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.login("fm@acme.corp", "finance-manager")
	if m := f.e.Menu(t.Context(), f.s); strings.Contains(menuIDs(m), "pending-approvals") {
		t.Fatalf("menu before any request: %s", menuIDs(m))
	}
	anaRequests(t, f) // behind this engine's back: its cache still counts none
	f.want(f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "pending-approvals"}), key("PENDING_TITLE"))
	f.want(f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "my-approval-requests"}), key("UNKNOWN_MENU_OPTION"))
}

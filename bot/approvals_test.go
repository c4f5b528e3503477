package bot_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
)

const sendMoney = `/call send_money {"recipient":"rcp-globex","amount":5,"currency":"EUR"}`

// login connects a user with claims in lang, and logs them in.
func (h *harness) login(ctx context.Context, email, name, roles, lang string) *user {
	h.t.Helper()
	u := h.connect(ctx, map[string]string{"email": email, "name": name, "roles": roles}, lang)
	u.text(ctx) // greeting
	u.login(ctx)
	return u
}

// request makes u ask for call and confirm the approval request; it returns the notice that
// the request was submitted.
func (u *user) request(ctx context.Context, call string) string {
	u.t.Helper()
	if err := u.w.SendText(ctx, call, ""); err != nil {
		u.t.Fatal(err)
	}
	q := u.question(ctx)
	u.answer(ctx, q, u.h.cat.T(u.lang(), "YES"))
	return u.text(ctx)
}

func (u *user) lang() string {
	if u.menu != nil && u.menu.Title == u.h.cat.T("es", "ROOT_TITLE") {
		return "es"
	}
	return "en"
}

// badge waits until u's menu shows the option id with the badge count n (0: not shown).
func (u *user) badge(ctx context.Context, id string, n int) {
	u.t.Helper()
	u.waitMenu(ctx, func(m channel.Menu) bool {
		for _, o := range m.Options {
			if o.ID == id {
				return n > 0 && strings.HasPrefix(o.Title, "("+itoa(n)+") ")
			}
		}
		return n == 0
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// decide makes approver u open the pending approvals, pick the request of tool, and choose
// option (Approve, Reject); it returns the answer.
func (u *user) decide(ctx context.Context, tool, option string) string {
	u.t.Helper()
	u.selectItem(ctx, "pending-approvals")
	list := u.question(ctx)
	u.answer(ctx, list, tool+" on")
	details := u.question(ctx)
	if !strings.Contains(details.Question.Text, "Fingerprint: ") {
		u.t.Fatalf("details %q", details.Question.Text)
	}
	u.answer(ctx, details, option)
	return u.text(ctx)
}

// TestApprovalApproved: an employee asks for send_money and confirms; the manager is told, both
// badges count it; the manager approves from the pending-approvals menu; the tool runs once and
// its result reaches the employee, in Spanish, while the manager reads English.
func TestApprovalApproved(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	bob := h.login(ctx, "bob@acme.corp", "Bob", "finance-manager", "en")
	ana := h.login(ctx, "ana@acme.corp", "Ana", "employee", "es")

	if got := ana.request(ctx, sendMoney); !strings.HasPrefix(got, strings.Split(h.cat.T("es", "APPROVAL_SUBMITTED", "tool", "send_money"), "#")[0]) {
		t.Fatalf("submitted notice %q", got)
	}
	if got := bob.text(ctx); got != h.cat.T("en", "APPROVAL_NEW", "requester", "Ana", "tool", "send_money", "server", "bank",
		"summary", `recipient: "rcp-globex", amount: 5, currency: "EUR"`) {
		t.Fatalf("manager's notice %q", got)
	}
	ana.badge(ctx, "my-approval-requests", 1)
	bob.badge(ctx, "pending-approvals", 1)
	if n := h.bank.Stats().SendMoneyExecutions; n != 0 {
		t.Fatalf("send_money ran %d times before approval", n)
	}

	if got := bob.decide(ctx, "send_money", "Approve"); got != h.cat.T("en", "APPROVAL_YOU_APPROVED", "requester", "Ana", "tool", "send_money") {
		t.Fatalf("manager's answer %q", got)
	}
	res := ana.text(ctx)
	if want := h.cat.T("es", "APPROVAL_APPROVED_RESULT", "tool", "send_money", "approver", "Bob", "result", ""); !strings.HasPrefix(res, want) || !strings.Contains(res, "T-") {
		t.Fatalf("requester's result %q", res)
	}
	if n := h.bank.Stats().SendMoneyExecutions; n != 1 {
		t.Fatalf("send_money ran %d times", n)
	}
	ana.badge(ctx, "my-approval-requests", 0)
	bob.badge(ctx, "pending-approvals", 0)
	rows, err := h.st.ListAudit(ctx, store.AuditQuery{Identity: "ana@acme.corp", Tool: "send_money"})
	if err != nil || len(rows) < 2 || rows[0].Outcome != store.OutcomeExecuted || rows[0].ApprovalID == "" {
		t.Fatalf("audit %+v %v", rows, err)
	}
}

// TestApprovalRejectCancelExpire: the other ends of a request.
func TestApprovalRejectCancelExpire(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	bob := h.login(ctx, "bob@acme.corp", "Bob", "finance-manager", "en")
	ana := h.login(ctx, "ana@acme.corp", "Ana", "employee", "en")

	ana.request(ctx, sendMoney)
	bob.text(ctx)
	if got := bob.decide(ctx, "send_money", "Reject"); got != h.cat.T("en", "APPROVAL_YOU_REJECTED", "requester", "Ana", "tool", "send_money") {
		t.Fatalf("reject answer %q", got)
	}
	if got := ana.text(ctx); got != h.cat.T("en", "APPROVAL_REJECTED", "tool", "send_money", "approver", "Bob") {
		t.Fatalf("rejected notice %q", got)
	}

	ana.request(ctx, sendMoney)
	bob.text(ctx)
	ana.badge(ctx, "my-approval-requests", 1)
	ana.selectItem(ctx, "my-approval-requests")
	ana.answer(ctx, ana.question(ctx), "send_money on")
	ana.answer(ctx, ana.question(ctx), h.cat.T("en", "CANCEL_REQUEST"))
	if got := ana.text(ctx); got != h.cat.T("en", "APPROVAL_YOU_CANCELLED", "tool", "send_money") {
		t.Fatalf("cancel answer %q", got)
	}
	if got := bob.text(ctx); got != h.cat.T("en", "APPROVAL_CANCELLED", "requester", "Ana", "tool", "send_money") {
		t.Fatalf("cancelled notice %q", got)
	}
	bob.badge(ctx, "pending-approvals", 0)

	ana.request(ctx, sendMoney)
	bob.text(ctx)
	h.offset.Store(int64(31 * time.Minute)) // the policy's 30 minutes have passed
	h.appr.Sweep(ctx)
	if got := ana.text(ctx); got != h.cat.T("en", "APPROVAL_EXPIRED", "tool", "send_money") {
		t.Fatalf("expired notice %q", got)
	}
	bob.badge(ctx, "pending-approvals", 0)
	if n := h.bank.Stats().SendMoneyExecutions; n != 0 {
		t.Fatalf("send_money ran %d times", n)
	}
}

// TestSelfApprovalQuorumAndOwnRequest: a manager's own send_money runs at once (self-approval);
// create_invoice needs two distinct managers and its requester may not approve it.
func TestSelfApprovalQuorumAndOwnRequest(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	bob := h.login(ctx, "bob@acme.corp", "Bob", "finance-manager", "en")
	cy := h.login(ctx, "cy@acme.corp", "Cy", "finance-manager", "en")
	dee := h.login(ctx, "dee@acme.corp", "Dee", "finance-manager", "en")

	if got := bob.say(ctx, sendMoney); !strings.HasPrefix(got, "send_money:") {
		t.Fatalf("self-approved call %q", got)
	}
	if n := h.bank.Stats().SendMoneyExecutions; n != 1 {
		t.Fatalf("send_money ran %d times", n)
	}

	const invoice = `/call create_invoice {"customer":"Globex","amount":10,"currency":"EUR"}`
	bob.request(ctx, invoice)
	cy.text(ctx)
	dee.text(ctx)
	bob.badge(ctx, "pending-approvals", 0) // his own request is not his to decide
	list, err := h.st.ListApprovals(ctx, store.ApprovalQuery{Requester: "bob@acme.corp", Status: store.ApprovalPending})
	if err != nil || len(list) != 1 {
		t.Fatalf("bob's requests %v %v", list, err)
	}
	_, err = h.appr.Decide(ctx, rbac.Caller{Identity: "bob@acme.corp", Roles: []string{"finance-manager"}, Authenticated: true}, list[0].ID, true)
	if !errors.Is(err, approvals.ErrOwnRequest) {
		t.Fatalf("approving one's own request: %v", err)
	}
	if got := cy.decide(ctx, "create_invoice", "Approve"); got != h.cat.T("en", "APPROVAL_VOTE_RECORDED", "votes", "1", "quorum", "2") {
		t.Fatalf("first approval %q", got)
	}
	cy.badge(ctx, "pending-approvals", 0) // voted already
	if n := h.bank.Stats().Executions["create_invoice"]; n != 0 {
		t.Fatalf("create_invoice ran after one approval of two")
	}
	if got := dee.decide(ctx, "create_invoice", "Approve"); got != h.cat.T("en", "APPROVAL_YOU_APPROVED", "requester", "Bob", "tool", "create_invoice") {
		t.Fatalf("second approval %q", got)
	}
	if got := bob.text(ctx); !strings.HasPrefix(got, h.cat.T("en", "APPROVAL_APPROVED_RESULT", "tool", "create_invoice", "approver", "Dee", "result", "")) {
		t.Fatalf("result %q", got)
	}
	if n := h.bank.Stats().Executions["create_invoice"]; n != 1 {
		t.Fatalf("create_invoice ran %d times", n)
	}
	if got := cy.text(ctx); got != h.cat.T("en", "APPROVAL_APPROVED_OTHERS", "requester", "Bob", "tool", "create_invoice", "approver", "Dee") {
		t.Fatalf("other approver's notice %q", got)
	}
}

// TestApprovalRolesRevoked: the requester logs in again without the role before the approval:
// the approved call does not run and the requester is told why.
func TestApprovalRolesRevoked(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true})
	bob := h.login(ctx, "bob@acme.corp", "Bob", "finance-manager", "en")
	ana := h.login(ctx, "ana@acme.corp", "Ana", "employee", "en")
	ana.request(ctx, sendMoney)
	bob.text(ctx)
	// The request's event is done on ana's first connection (its menu shows the badge) before
	// she logs in on another: else that event's commit, later than the login, would make the
	// first connection the most recent one, where her notices go.
	ana.badge(ctx, "my-approval-requests", 1)
	ana2 := h.login(ctx, "ana@acme.corp", "Ana", "intern", "en") // a new login, without the role
	bob.decide(ctx, "send_money", "Approve")
	// Notices go to the identity's most recent connection.
	if got := ana2.text(ctx); got != h.cat.T("en", "APPROVAL_REVOKED", "tool", "send_money") {
		t.Fatalf("revoked notice %q", got)
	}
	if n := h.bank.Stats().SendMoneyExecutions; n != 0 {
		t.Fatalf("send_money ran %d times", n)
	}
}

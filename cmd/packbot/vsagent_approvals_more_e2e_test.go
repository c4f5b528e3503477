package main

// More end-to-end approval cases over the VS Agent channel, each its own test: a request
// cancelled by its requester, a request that expires, a finance manager's self-approved call, a
// quorum of two, and a manager's own request that self-approval does not let them decide.
// `packbot serve` runs as its own process with PACKBOT_CHANNEL=vsagent and SQLite, without a
// language model (the calls are /call commands); the test plays the VS Agent and the wallets
// with the helpers of vsagent_approvals_e2e_test.go (vaBot, vaUser) and serves the demo bank,
// whose counters prove what ran. Texts are computed from the same pack and catalog.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/i18n"
)

// vaMorePack: the approvals bank of vsagent_approvals_e2e_test.go (same greetings, same login),
// with one approval policy per tool of the bank:
//
//	send_money       a finance manager's approval, self-approval off (cancel, own request)
//	list_recipients  expires after 0.05 minutes (3 s) (expire)
//	get_balances     finance managers approve their own calls (self-approval)
//	create_invoice   two distinct finance managers must approve (quorum)
var vaMorePack = vaPackHead("e2e-approvals-more") + `  servers:
    - name: bank
      transport: streamable-http
      url: %s
      accessMode: admin-controlled
      allowlist: [send_money, list_recipients, get_balances, create_invoice]
      toolAccess:
        default: none
        roles:
          employee: [send_money, list_recipients, create_invoice]
          finance-manager: [send_money, list_recipients, get_balances, create_invoice]
        approval:
          - tools: [send_money]
            approvers: [finance-manager]
            allowSelfApproval: false
          - tools: [list_recipients]
            approvers: [finance-manager]
            timeoutMinutes: 0.05
          - tools: [get_balances]
            approvers: [finance-manager]
            allowSelfApproval: true
          - tools: [create_invoice]
            approvers: [finance-manager]
            quorum: 2
`

// vaMoreCall is a /call of a tool of the bank, with its arguments as approvers see them.
type vaMoreCall struct {
	tool, args, summary string
}

var (
	vaMoreSend       = vaMoreCall{"send_money", `{"recipient":"rcp-globex","amount":5,"currency":"EUR"}`, vaSummary}
	vaMoreRecipients = vaMoreCall{"list_recipients", `{}`, "{}"}
	vaMoreInvoice    = vaMoreCall{"create_invoice", `{"customer":"Globex","amount":10,"currency":"EUR"}`, `customer: "Globex", amount: 10, currency: "EUR"`}
)

// vaMoreLogAll logs, when t failed, every message posted to users.
func vaMoreLogAll(t *testing.T, users ...*vaUser) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, u := range users {
				for _, m := range u.b.admin.messages(u.conn) {
					t.Logf("posted to %s: %s %v", u.name, m.Type, m.Raw)
				}
			}
		}
	})
}

// vaMoreRequest makes requester u /call c, checks the confirmation question and answers Yes; it
// returns the short id of the submitted request, read from the "submitted" notice.
func vaMoreRequest(ctx context.Context, t *testing.T, u *vaUser, c vaMoreCall) string {
	t.Helper()
	cat := u.b.cat
	from := u.mark()
	u.b.text(t, u.conn, "/call "+c.tool+" "+c.args)
	wantPrompt := cat.T(u.lang, "APPROVAL_CONFIRM", "tool", c.tool, "server", "bank", "roles", "finance-manager", "summary", c.summary)
	q := u.question(ctx, t, from, "confirmation", func(p string) bool { return p == wantPrompt })
	from = u.mark()
	u.answer(t, q, "Yes", func(s string) bool { return s == cat.T(u.lang, "YES") })
	const id = "\x00"
	parts := strings.Split(cat.T(u.lang, "APPROVAL_SUBMITTED", "tool", c.tool, "id", id), id)
	got := u.text(ctx, t, from, "APPROVAL_SUBMITTED", func(s string) bool {
		return strings.HasPrefix(s, parts[0]) && strings.HasSuffix(s, parts[1]) && len(s) == len(parts[0])+8+len(parts[1])
	})
	return got[len(parts[0]) : len(parts[0])+8]
}

// vaMoreNew is the notice telling an approver in lang of requester's request for c.
func vaMoreNew(b *vaBot, lang, requester string, c vaMoreCall) string {
	return b.cat.T(lang, "APPROVAL_NEW", "requester", requester, "tool", c.tool, "server", "bank", "summary", c.summary)
}

// vaMoreOpen makes approver u open the pending approvals, checks that they list exactly the
// requests of want (requester → short id, all for c.tool), choose requester's, and returns the
// details question (Approve, Reject, Back), left unanswered.
func vaMoreOpen(ctx context.Context, t *testing.T, u *vaUser, c vaMoreCall, requester string, want map[string]string) e2ePosted {
	t.Helper()
	cat := u.b.cat
	item := func(who string) string {
		return cat.T(u.lang, "PENDING_OPTION", "requester", who, "tool", c.tool, "server", "bank") + " #" + want[who]
	}
	var items []string
	for who := range want {
		items = append(items, item(who))
	}
	from := u.mark()
	u.b.received(t, u.conn, "contextual-menu-select", `"selectionId":"pending-approvals"`)
	list := u.question(ctx, t, from, "pending approvals", func(p string) bool { return p == cat.T(u.lang, "PENDING_TITLE") })
	if got := slices.Sorted(slices.Values(vaItemTexts(list))); !slices.Equal(got, slices.Sorted(slices.Values(items))) {
		t.Fatalf("%s: pending approvals %q, want %q", u.name, got, items)
	}
	from = u.mark()
	u.answer(t, list, requester, func(s string) bool { return s == item(requester) })
	return u.question(ctx, t, from, "the details of "+requester+"'s request", vaMoreDetails(cat, u.lang, requester, c).MatchString)
}

// vaMoreDetails matches the details of requester's request for c in lang: requester, tool,
// server and arguments as asked, any description, a SHA-256 fingerprint, an expiry.
func vaMoreDetails(cat *i18n.Catalog, lang, requester string, c vaMoreCall) *regexp.Regexp {
	const description, fingerprint, expires = "\x01", "\x02", "\x03"
	text := cat.T(lang, "APPROVAL_DETAILS", "requester", requester, "tool", c.tool, "server", "bank",
		"description", description, "summary", c.summary, "fingerprint", fingerprint, "expires", expires)
	re := strings.NewReplacer(description, "(?s:.*)", fingerprint, "[0-9a-f]{64}", expires, ".+").Replace(regexp.QuoteMeta(text))
	return regexp.MustCompile("^" + re + "$")
}

// vaMoreChoose answers the details question with option (APPROVE, REJECT) and waits for the
// text key with args.
func vaMoreChoose(ctx context.Context, t *testing.T, u *vaUser, details e2ePosted, option, key string, args ...string) {
	t.Helper()
	cat := u.b.cat
	from := u.mark()
	u.answer(t, details, option, func(s string) bool { return s == cat.T(u.lang, option) })
	u.textIs(ctx, t, from, cat.T(u.lang, key, args...))
}

// vaMoreSelect selects menu item id and returns the first text or question posted after.
func vaMoreSelect(ctx context.Context, t *testing.T, u *vaUser, id string) e2ePosted {
	t.Helper()
	from := u.mark()
	u.b.received(t, u.conn, "contextual-menu-select", fmt.Sprintf(`"selectionId":%q`, id))
	return u.next(ctx, t, from, "an answer to "+id, func(m e2ePosted) bool { return m.Type == "text" || m.Type == "menu-display" })
}

// TestVSAgentApprovalsMoreCancel: the requester (Spanish) cancels her pending request from
// my-approval-requests; the approver, who had opened it, is told it was cancelled by the
// requester, his badge goes, and approving it afterwards is refused; the tool never runs.
func TestVSAgentApprovalsMoreCancel(t *testing.T) {
	t.Parallel()
	b := startVAApprovalsBot(t, vaMorePack)
	ctx := e2eCtx(t)
	cat := b.cat
	bob := b.login(ctx, t, "bob@acme.corp", "Bob", "finance-manager", "en")
	ana := b.login(ctx, t, "ana@acme.corp", "Ana", "employee", "es")
	vaMoreLogAll(t, bob, ana)

	bobFrom := bob.mark()
	short := vaMoreRequest(ctx, t, ana, vaMoreSend)
	bob.textIs(ctx, t, bobFrom, vaMoreNew(b, "en", "Ana", vaMoreSend))
	bob.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 1)
	ana.badge(ctx, t, "my-approval-requests", "MY_APPROVAL_REQUESTS", 1)
	details := vaMoreOpen(ctx, t, bob, vaMoreSend, "Ana", map[string]string{"Ana": short})

	list := vaMoreSelect(ctx, t, ana, "my-approval-requests")
	if p, _ := list.Raw["prompt"].(string); list.Type != "menu-display" || p != cat.T("es", "MY_REQUESTS_TITLE") {
		t.Fatalf("my approval requests answered %s %q %q", list.Type, list.Content, p)
	}
	items := vaItemTexts(list)
	wantPrefix := cat.T("es", "MY_REQUEST_OPTION", "tool", "send_money", "server", "bank", "date", "")
	if len(items) != 1 || !strings.HasPrefix(items[0], wantPrefix) || !strings.HasSuffix(items[0], " #"+short) {
		t.Fatalf("the requester's list %q, want one %q… #%s", items, wantPrefix, short)
	}
	from := ana.mark()
	ana.answer(t, list, "her request", func(s string) bool { return s == items[0] })
	mine := ana.question(ctx, t, from, "her request's details", vaMoreDetails(cat, "es", "Ana", vaMoreSend).MatchString)
	if got, want := vaItemTexts(mine), []string{cat.T("es", "CANCEL_REQUEST"), cat.T("es", "BACK")}; !slices.Equal(got, want) {
		t.Fatalf("the requester's options %q, want %q", got, want)
	}
	bobFrom, from = bob.mark(), ana.mark()
	ana.answer(t, mine, "CANCEL_REQUEST", func(s string) bool { return s == cat.T("es", "CANCEL_REQUEST") })
	ana.textIs(ctx, t, from, cat.T("es", "APPROVAL_YOU_CANCELLED", "tool", "send_money"))
	bob.textIs(ctx, t, bobFrom, cat.T("en", "APPROVAL_CANCELLED", "requester", "Ana", "tool", "send_money"))
	bob.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 0)
	ana.badge(ctx, t, "my-approval-requests", "MY_APPROVAL_REQUESTS", 0)

	vaMoreChoose(ctx, t, bob, details, "APPROVE", "APPROVAL_ALREADY_RESOLVED")
	if st := b.bank.Stats(); st.SendMoneyExecutions != 0 || st.TotalExecutions != 0 {
		t.Fatalf("tools ran after a cancellation: %+v", st)
	}
}

// TestVSAgentApprovalsMoreExpire: a request under a 3-second policy is left undecided; the
// sweeper expires it, the requester is told, both badges go, and the approver who had opened it
// is told it was already resolved when he approves; it is no longer listed.
func TestVSAgentApprovalsMoreExpire(t *testing.T) {
	t.Parallel()
	b := startVAApprovalsBot(t, vaMorePack)
	ctx := e2eCtx(t)
	cat := b.cat
	bob := b.login(ctx, t, "bob@acme.corp", "Bob", "finance-manager", "en")
	ana := b.login(ctx, t, "ana@acme.corp", "Ana", "employee", "es")
	vaMoreLogAll(t, bob, ana)

	bobFrom, anaFrom := bob.mark(), ana.mark()
	asked := time.Now()
	short := vaMoreRequest(ctx, t, ana, vaMoreRecipients)
	bob.textIs(ctx, t, bobFrom, vaMoreNew(b, "en", "Ana", vaMoreRecipients))
	bob.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 1)
	ana.badge(ctx, t, "my-approval-requests", "MY_APPROVAL_REQUESTS", 1)

	// The manager opens the request before it expires (3 s), and decides only after. On a
	// machine too slow to get there in time, the request is gone from his menu or his list.
	var details *e2ePosted
	switch r := vaMoreSelect(ctx, t, bob, "pending-approvals"); {
	case r.Type == "text":
		if r.Content != cat.T("en", "UNKNOWN_MENU_OPTION") {
			t.Fatalf("pending approvals: %q", r.Content)
		}
		t.Logf("the request expired before the manager could open the list")
	default:
		item := cat.T("en", "PENDING_OPTION", "requester", "Ana", "tool", "list_recipients", "server", "bank") + " #" + short
		from := bob.mark()
		bob.answer(t, r, "Ana's request", func(s string) bool { return s == item })
		d := bob.next(ctx, t, from, "the details", func(m e2ePosted) bool { return m.Type == "text" || m.Type == "menu-display" })
		if d.Type == "text" {
			if d.Content != cat.T("en", "APPROVAL_ALREADY_RESOLVED") {
				t.Fatalf("choosing the request: %q", d.Content)
			}
			t.Logf("the request expired before the manager could open it")
		} else {
			details = &d
		}
	}

	ana.textIs(ctx, t, anaFrom, cat.T("es", "APPROVAL_EXPIRED", "tool", "list_recipients"))
	if elapsed := time.Since(asked); elapsed < 2900*time.Millisecond {
		t.Errorf("the request expired %v after it was asked, before its 3 s", elapsed)
	}
	ana.badge(ctx, t, "my-approval-requests", "MY_APPROVAL_REQUESTS", 0)
	bob.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 0)
	if details != nil {
		vaMoreChoose(ctx, t, bob, *details, "APPROVE", "APPROVAL_ALREADY_RESOLVED")
	}
	if r := vaMoreSelect(ctx, t, bob, "pending-approvals"); r.Type != "text" ||
		r.Content != cat.T("en", "UNKNOWN_MENU_OPTION") && r.Content != cat.T("en", "PENDING_NONE") {
		t.Fatalf("pending approvals after the expiry: %s %q %v", r.Type, r.Content, r.Raw["prompt"])
	}
	if st := b.bank.Stats(); st.Executions["list_recipients"] != 0 || st.TotalExecutions != 0 {
		t.Fatalf("tools ran after an expiry: %+v", st)
	}
}

// TestVSAgentApprovalsMoreSelfApproval: a finance manager's own get_balances, whose policy lets
// finance managers approve their own calls, runs at once: no question, no request, no notice to
// the other manager.
func TestVSAgentApprovalsMoreSelfApproval(t *testing.T) {
	t.Parallel()
	b := startVAApprovalsBot(t, vaMorePack)
	ctx := e2eCtx(t)
	cat := b.cat
	cy := b.login(ctx, t, "cy@acme.corp", "Cy", "finance-manager", "en")
	bob := b.login(ctx, t, "bob@acme.corp", "Bob", "finance-manager", "en")
	vaMoreLogAll(t, bob, cy)

	cyFrom, from := cy.mark(), bob.mark()
	b.text(t, bob.conn, "/call get_balances {}")
	r := bob.next(ctx, t, from, "an answer", func(m e2ePosted) bool { return m.Type == "text" || m.Type == "menu-display" })
	if r.Type != "text" {
		t.Fatalf("a self-approved call asked %v", r.Raw)
	}
	if prefix := cat.T("en", "TOOL_RESULT", "tool", "get_balances", "result", ""); !strings.HasPrefix(r.Content, prefix) || !strings.Contains(r.Content, `"balances"`) {
		t.Fatalf("self-approved call answered %q, want %q…", r.Content, prefix)
	}
	if n := b.bank.Stats().Executions["get_balances"]; n != 1 {
		t.Fatalf("get_balances ran %d times, want 1", n)
	}

	// Then a call that does need the other manager: the first text Cy gets is its notice, and
	// Bob has one request open, not two.
	vaMoreRequest(ctx, t, bob, vaMoreSend)
	cy.text(ctx, t, cyFrom, "a notice", func(string) bool { return true })
	if got, want := e2eTexts(cy.b.admin.messages(cy.conn)[cyFrom:]), vaMoreNew(b, "en", "Bob", vaMoreSend); len(got) == 0 || got[0] != want {
		t.Fatalf("the other manager's texts %q, want first %q", got, want)
	}
	bob.badge(ctx, t, "my-approval-requests", "MY_APPROVAL_REQUESTS", 1)
	if n := b.bank.Stats().TotalExecutions; n != 1 {
		t.Fatalf("%d executions, want the one self-approved call", n)
	}
}

// TestVSAgentApprovalsMoreQuorum: create_invoice needs two of three finance managers. The first
// approval is recorded (1 of 2) and runs nothing; the second runs the tool once and the
// requester gets its result; the third manager, who had the request open, is told it was
// approved, and his late approval is refused.
func TestVSAgentApprovalsMoreQuorum(t *testing.T) {
	t.Parallel()
	b := startVAApprovalsBot(t, vaMorePack)
	ctx := e2eCtx(t)
	cat := b.cat
	bob := b.login(ctx, t, "bob@acme.corp", "Bob", "finance-manager", "en")
	cy := b.login(ctx, t, "cy@acme.corp", "Cy", "finance-manager", "en")
	dee := b.login(ctx, t, "dee@acme.corp", "Dee", "finance-manager", "es")
	ana := b.login(ctx, t, "ana@acme.corp", "Ana", "employee", "es")
	vaMoreLogAll(t, bob, cy, dee, ana)
	invoices := func() int { return b.bank.Stats().Executions["create_invoice"] }

	marks := map[*vaUser]int{bob: bob.mark(), cy: cy.mark(), dee: dee.mark()}
	anaFrom := ana.mark()
	short := vaMoreRequest(ctx, t, ana, vaMoreInvoice)
	for _, m := range []*vaUser{bob, cy, dee} {
		m.textIs(ctx, t, marks[m], vaMoreNew(b, m.lang, "Ana", vaMoreInvoice))
		m.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 1)
	}
	pending := map[string]string{"Ana": short}
	late := vaMoreOpen(ctx, t, dee, vaMoreInvoice, "Ana", pending)

	vaMoreChoose(ctx, t, bob, vaMoreOpen(ctx, t, bob, vaMoreInvoice, "Ana", pending), "APPROVE", "APPROVAL_VOTE_RECORDED", "votes", "1", "quorum", "2")
	bob.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 0) // he has voted
	if n := invoices(); n != 0 {
		t.Fatalf("create_invoice ran %d times after one approval of two", n)
	}

	marks = map[*vaUser]int{bob: bob.mark(), dee: dee.mark()}
	vaMoreChoose(ctx, t, cy, vaMoreOpen(ctx, t, cy, vaMoreInvoice, "Ana", pending), "APPROVE", "APPROVAL_YOU_APPROVED", "requester", "Ana", "tool", "create_invoice")
	prefix := cat.T("es", "APPROVAL_APPROVED_RESULT", "tool", "create_invoice", "approver", "Cy", "result", "")
	result := ana.text(ctx, t, anaFrom, "APPROVAL_APPROVED_RESULT", func(s string) bool { return strings.HasPrefix(s, prefix) })
	if !strings.Contains(result, `"INV-`) {
		t.Errorf("the requester's result shows no invoice: %q", result)
	}
	if n := invoices(); n != 1 {
		t.Fatalf("create_invoice ran %d times, want 1", n)
	}
	for _, m := range []*vaUser{dee, bob} {
		m.textIs(ctx, t, marks[m], cat.T(m.lang, "APPROVAL_APPROVED_OTHERS", "requester", "Ana", "tool", "create_invoice", "approver", "Cy"))
	}
	vaMoreChoose(ctx, t, dee, late, "APPROVE", "APPROVAL_ALREADY_RESOLVED")
	cy.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 0)
	dee.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 0)
	ana.badge(ctx, t, "my-approval-requests", "MY_APPROVAL_REQUESTS", 0)
	if n := invoices(); n != 1 {
		t.Fatalf("create_invoice ran %d times in all, want 1", n)
	}
	if got := e2eTexts(b.admin.messages(ana.conn)[anaFrom:]); len(slices.DeleteFunc(slices.Clone(got), func(s string) bool { return !strings.HasPrefix(s, prefix) })) != 1 {
		t.Errorf("the requester got the result other than once: %q", got)
	}
}

// TestVSAgentApprovalsMoreOwnRequestRefused: with self-approval off, a finance manager's own
// send_money waits for another manager: it is not on his pending approvals (no badge, no menu
// option, not listed once another request is) while the other manager sees it and approves it.
func TestVSAgentApprovalsMoreOwnRequestRefused(t *testing.T) {
	t.Parallel()
	b := startVAApprovalsBot(t, vaMorePack)
	ctx := e2eCtx(t)
	cat := b.cat
	bob := b.login(ctx, t, "bob@acme.corp", "Bob", "finance-manager", "en")
	cy := b.login(ctx, t, "cy@acme.corp", "Cy", "finance-manager", "en")
	ana := b.login(ctx, t, "ana@acme.corp", "Ana", "employee", "en")
	vaMoreLogAll(t, bob, cy, ana)

	cyFrom, bobFrom := cy.mark(), bob.mark()
	bobShort := vaMoreRequest(ctx, t, bob, vaMoreSend)
	cy.textIs(ctx, t, cyFrom, vaMoreNew(b, "en", "Bob", vaMoreSend))
	cy.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 1)
	opts := bob.menuWith(ctx, t, "counted his request", func(o map[string]string) bool {
		return o["my-approval-requests"] == "(1) "+cat.T("en", "MY_APPROVAL_REQUESTS")
	})
	if title, ok := opts["pending-approvals"]; ok {
		t.Fatalf("the requester's menu offers his own request to decide: %q", title)
	}
	if r := vaMoreSelect(ctx, t, bob, "pending-approvals"); r.Type != "text" ||
		r.Content != cat.T("en", "UNKNOWN_MENU_OPTION") && r.Content != cat.T("en", "PENDING_NONE") {
		t.Fatalf("the requester's pending approvals: %s %q %v", r.Type, r.Content, r.Raw["prompt"])
	}
	if got := e2eTexts(b.admin.messages(bob.conn)[bobFrom:]); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "New approval request") }) {
		t.Errorf("the requester was told of his own request as an approver: %q", got)
	}
	if n := b.bank.Stats().SendMoneyExecutions; n != 0 {
		t.Fatalf("send_money ran %d times before any approval", n)
	}

	// Once Ana asks too, Bob has one request to decide — hers, never his own.
	cyFrom, bobFrom = cy.mark(), bob.mark()
	anaFrom := ana.mark()
	anaShort := vaMoreRequest(ctx, t, ana, vaMoreSend)
	for _, m := range []*vaUser{bob, cy} {
		from := map[*vaUser]int{bob: bobFrom, cy: cyFrom}[m]
		m.textIs(ctx, t, from, vaMoreNew(b, "en", "Ana", vaMoreSend))
	}
	bob.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 1)
	cy.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 2)
	details := vaMoreOpen(ctx, t, bob, vaMoreSend, "Ana", map[string]string{"Ana": anaShort})
	vaMoreChoose(ctx, t, bob, details, "REJECT", "APPROVAL_YOU_REJECTED", "requester", "Ana", "tool", "send_money")
	ana.textIs(ctx, t, anaFrom, cat.T("en", "APPROVAL_REJECTED", "tool", "send_money", "approver", "Bob"))

	// The other manager approves Bob's request: it runs once and Bob gets the result.
	cy.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 1)
	bobFrom = bob.mark()
	details = vaMoreOpen(ctx, t, cy, vaMoreSend, "Bob", map[string]string{"Bob": bobShort})
	vaMoreChoose(ctx, t, cy, details, "APPROVE", "APPROVAL_YOU_APPROVED", "requester", "Bob", "tool", "send_money")
	prefix := cat.T("en", "APPROVAL_APPROVED_RESULT", "tool", "send_money", "approver", "Cy", "result", "")
	if got := bob.text(ctx, t, bobFrom, "APPROVAL_APPROVED_RESULT", func(s string) bool { return strings.HasPrefix(s, prefix) }); !strings.Contains(got, `"T-`) {
		t.Errorf("the requester's result shows no transfer: %q", got)
	}
	if n := b.bank.Stats().SendMoneyExecutions; n != 1 {
		t.Fatalf("send_money ran %d times, want 1", n)
	}
	bob.badge(ctx, t, "my-approval-requests", "MY_APPROVAL_REQUESTS", 0)
	cy.badge(ctx, t, "pending-approvals", "PENDING_APPROVALS", 0)
}

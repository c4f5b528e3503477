package main

// The approval rounds of the crash tests (crash_vsagent_test.go): an employee asks for
// send_money, a finance manager approves it, round after round, each step waiting for its answer
// whatever crash comes between; then the bank's ledger and the notices are checked.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// crashUser is a logged-in wallet of the approval rounds.
type crashUser struct {
	v    *crashVA
	conn string
	name string
}

func (u *crashUser) mark() int { return len(u.v.admin.messages(u.conn)) }

// next waits for the first message posted to u after index from, and not posted before (a
// redelivery), that satisfies ok.
func (u *crashUser) next(ctx context.Context, from int, what string, ok func(e2ePosted) bool) (e2ePosted, error) {
	var found e2ePosted
	msgs, err := u.v.admin.waitFor(ctx, u.conn, func(m []e2ePosted) bool {
		seen := map[string]bool{}
		for _, x := range m[:min(from, len(m))] {
			seen[x.ID] = true
		}
		for _, x := range m[min(from, len(m)):] {
			if !seen[x.ID] && ok(x) {
				found = x
				return true
			}
			seen[x.ID] = true
		}
		return false
	})
	if err != nil {
		return found, fmt.Errorf("%s: no %s (%w); texts since: %q; questions since: %q", u.name, what, err,
			e2eTexts(msgs[min(from, len(msgs)):]), vaPrompts(msgs[min(from, len(msgs)):]))
	}
	return found, nil
}

func isText(want ...string) func(e2ePosted) bool {
	return func(m e2ePosted) bool { return m.Type == "text" && slices.Contains(want, m.Content) }
}

func isQuestion(ok func(prompt string) bool) func(e2ePosted) bool {
	return func(m e2ePosted) bool { p, _ := m.Raw["prompt"].(string); return m.Type == "menu-display" && ok(p) }
}

// menu waits until u's latest menu (redeliveries aside) satisfies ok.
func (u *crashUser) menu(ctx context.Context, what string, ok func(opts map[string]string) bool) error {
	var last map[string]string
	_, err := u.v.admin.waitFor(ctx, u.conn, func(m []e2ePosted) bool {
		menus := e2eOfType(firstPosts(m), "contextual-menu-update")
		if len(menus) == 0 {
			return false
		}
		last = vaMenuOptions(menus[len(menus)-1])
		return ok(last)
	})
	if err != nil {
		return fmt.Errorf("%s: the menu never %s (%w); latest: %q", u.name, what, err, last)
	}
	return nil
}

// badge waits until u's menu shows item id as "(n) <label>", or does not show it when n is 0.
func (u *crashUser) badge(ctx context.Context, id, labelKey string, n int) error {
	want := fmt.Sprintf("(%d) %s", n, u.v.cat.T("en", labelKey))
	return u.menu(ctx, fmt.Sprintf("showed %s as %q", id, want), func(opts map[string]string) bool {
		title, ok := opts[id]
		return (n == 0 && !ok) || (n > 0 && title == want)
	})
}

// choose answers question q with the option whose text is text.
func (u *crashUser) choose(ctx context.Context, q e2ePosted, text string) error {
	i := slices.IndexFunc(vaItems(q), func(it vaItem) bool { return it.Text == text })
	if i < 0 {
		return fmt.Errorf("%s: question %q has no option %q: %q", u.name, q.Raw["prompt"], text, vaItemTexts(q))
	}
	return u.v.message(ctx, u.conn, uuid.NewString(), "menu-select", fmt.Sprintf(`"threadId":%q,"menuItems":[{"id":%q}]`, uuid.NewString(), vaItems(q)[i].ID))
}

func (u *crashUser) selectMenu(ctx context.Context, id string) error {
	return u.v.message(ctx, u.conn, uuid.NewString(), "contextual-menu-select", fmt.Sprintf(`"selectionId":%q`, id))
}

// login connects a wallet and logs it in with a verified credential (email, name, roles).
func (v *crashVA) login(ctx context.Context, email, name, roles string) (*crashUser, error) {
	u := &crashUser{v: v, conn: uuid.NewString(), name: name}
	if err := v.connected(ctx, u.conn); err != nil {
		return nil, err
	}
	if err := u.selectMenu(ctx, "authenticate"); err != nil {
		return nil, err
	}
	pr, err := u.next(ctx, 0, "identity-proof-request", func(m e2ePosted) bool { return m.Type == "identity-proof-request" })
	if err != nil {
		return nil, err
	}
	from := u.mark()
	if err := v.message(ctx, u.conn, uuid.NewString(), "identity-proof-submit", fmt.Sprintf(`"threadId":%q,"submittedProofItems":[{"id":"1",`+
		`"type":"verifiable-credential","proofExchangeId":%q,"verified":true,"claims":[{"name":"email","value":%q},{"name":"name","value":%q},`+
		`{"name":"roles","value":%q}]}]`, pr.Answered, uuid.NewString(), email, name, roles)); err != nil {
		return nil, err
	}
	if _, err := u.next(ctx, from, "welcome", isText(v.cat.T("en", "AUTH_SUCCESS_NAME", "name", name))); err != nil {
		return nil, err
	}
	return u, u.menu(ctx, "offered logout", func(opts map[string]string) bool { _, ok := opts["logout"]; return ok })
}

// approvalFigures counts the approval rounds by outcome.
type approvalFigures struct {
	rounds, results, interrupted, failed, alreadyResolved int
	amounts                                               []int // of the rounds whose result came back
}

// approvalRound: the requester asks for send_money of amount EUR and confirms; the approver is
// told and its badge shows the request; it approves; the requester gets the outcome; both
// badges go. Each step waits for its answer (redeliveries aside).
func (v *crashVA) approvalRound(ctx context.Context, req, appr *crashUser, amount int, f *approvalFigures) error {
	cat := v.cat
	summary := fmt.Sprintf(`recipient: "rcp-globex", amount: %d, currency: "EUR"`, amount)
	reqFrom, apprFrom := req.mark(), appr.mark()
	if err := v.message(ctx, req.conn, uuid.NewString(), "text",
		fmt.Sprintf(`"content":%q`, fmt.Sprintf(`/call send_money {"recipient":"rcp-globex","amount":%d,"currency":"EUR"}`, amount))); err != nil {
		return err
	}
	prompt := cat.T("en", "APPROVAL_CONFIRM", "tool", "send_money", "server", "bank", "roles", "finance-manager", "summary", summary)
	q, err := req.next(ctx, reqFrom, "confirmation", isQuestion(func(p string) bool { return p == prompt }))
	if err != nil {
		return err
	}
	from := req.mark()
	if err := req.choose(ctx, q, cat.T("en", "YES")); err != nil {
		return err
	}
	submitted := regexp.MustCompile(`#([0-9a-f]{8})\)`)
	sub, err := req.next(ctx, from, "APPROVAL_SUBMITTED", func(m e2ePosted) bool {
		const id = "\x00"
		parts := strings.Split(cat.T("en", "APPROVAL_SUBMITTED", "tool", "send_money", "id", id), id)
		return m.Type == "text" && strings.HasPrefix(m.Content, parts[0]) && strings.HasSuffix(m.Content, parts[1]) && submitted.MatchString(m.Content)
	})
	if err != nil {
		return err
	}
	short := submitted.FindStringSubmatch(sub.Content)[1]
	f.rounds++
	newNotice := cat.T("en", "APPROVAL_NEW", "requester", req.name, "tool", "send_money", "server", "bank", "summary", summary)
	if _, err := appr.next(ctx, apprFrom, "APPROVAL_NEW notice", isText(newNotice)); err != nil {
		return err
	}
	if err := appr.badge(ctx, "pending-approvals", "PENDING_APPROVALS", 1); err != nil {
		return err
	}
	if err := req.badge(ctx, "my-approval-requests", "MY_APPROVAL_REQUESTS", 1); err != nil {
		return err
	}

	from = appr.mark()
	if err := appr.selectMenu(ctx, "pending-approvals"); err != nil {
		return err
	}
	list, err := appr.next(ctx, from, "pending approvals", isQuestion(func(p string) bool { return p == cat.T("en", "PENDING_TITLE") }))
	if err != nil {
		return err
	}
	i := slices.IndexFunc(vaItems(list), func(it vaItem) bool { return strings.HasSuffix(it.Text, " #"+short) })
	if i < 0 {
		return fmt.Errorf("pending approvals %q lack #%s", vaItemTexts(list), short)
	}
	from = appr.mark()
	if err := appr.choose(ctx, list, vaItems(list)[i].Text); err != nil {
		return err
	}
	details, err := appr.next(ctx, from, "details", isQuestion(func(p string) bool {
		return strings.Contains(p, "Arguments: "+summary+"\n") && strings.Contains(p, "Fingerprint: ")
	}))
	if err != nil {
		return err
	}
	from = appr.mark()
	if err := appr.choose(ctx, details, cat.T("en", "APPROVE")); err != nil {
		return err
	}
	// A kill after the vote's commit and before the approver's answer makes the approver's choice
	// come again: it finds the request resolved.
	approved, resolved := cat.T("en", "APPROVAL_YOU_APPROVED", "requester", req.name, "tool", "send_money"), cat.T("en", "APPROVAL_ALREADY_RESOLVED")
	ans, err := appr.next(ctx, from, "the decision's answer", isText(approved, resolved))
	if err != nil {
		return err
	}
	if ans.Content == resolved {
		f.alreadyResolved++
	}
	result := cat.T("en", "APPROVAL_APPROVED_RESULT", "tool", "send_money", "approver", appr.name, "result", "")
	failed := cat.T("en", "APPROVAL_APPROVED_FAILED", "tool", "send_money", "approver", appr.name, "error", "")
	interrupted := cat.T("en", "APPROVAL_INTERRUPTED", "tool", "send_money")
	out, err := req.next(ctx, reqFrom, "the outcome notice", func(m e2ePosted) bool {
		return m.Type == "text" && (strings.HasPrefix(m.Content, result) || strings.HasPrefix(m.Content, failed) || m.Content == interrupted)
	})
	if err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(out.Content, result):
		var r struct {
			Transfer struct {
				SourceAmount float64 `json:"sourceAmount"`
			} `json:"transfer"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(out.Content, result)), &r); err != nil || r.Transfer.SourceAmount != float64(amount) {
			return fmt.Errorf("round of %d EUR: the result shows another transfer (%v): %q", amount, err, out.Content)
		}
		f.results++
		f.amounts = append(f.amounts, amount)
	case out.Content == interrupted:
		f.interrupted++
	default:
		f.failed++
	}
	if err := appr.badge(ctx, "pending-approvals", "PENDING_APPROVALS", 0); err != nil {
		return err
	}
	return req.badge(ctx, "my-approval-requests", "MY_APPROVAL_REQUESTS", 0)
}

// runApprovals logs a requester and an approver in, then runs approval rounds until load ends.
func (v *crashVA) runApprovals(ctx, load context.Context, f *approvalFigures) (req, appr *crashUser, err error) {
	if appr, err = v.login(ctx, "bob@acme.corp", "Bob", "finance-manager"); err != nil {
		return nil, nil, err
	}
	if req, err = v.login(ctx, "ana@acme.corp", "Ana", "employee"); err != nil {
		return nil, nil, err
	}
	for amount := 1; load.Err() == nil; amount++ {
		rctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		err := v.approvalRound(rctx, req, appr, amount, f)
		cancel()
		if err != nil {
			return req, appr, fmt.Errorf("approval round of %d EUR: %w", amount, err)
		}
	}
	return req, appr, nil
}

// checkApprovals checks the bank's ledger against the rounds: each amount transferred at most
// once, and exactly once when its result came back; no other transfer to rcp-globex.
func (v *crashVA) checkApprovals(t *testing.T, f *approvalFigures) int {
	t.Helper()
	transfers, err := v.bank.Ledger().Transfers("", 0)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[int]int{}
	for _, tr := range transfers {
		if !v.opening[tr.ID] {
			runs[int(tr.SourceAmount)]++
		}
	}
	executed := 0
	for amount, n := range runs {
		executed += n
		if n > 1 || amount < 1 || amount > f.rounds {
			t.Errorf("send_money of %d EUR ran %d times (rounds: %d)", amount, n, f.rounds)
		}
	}
	for _, amount := range f.amounts {
		if runs[amount] != 1 {
			t.Errorf("send_money of %d EUR: the requester got its result, the bank ran it %d times", amount, runs[amount])
		}
	}
	if got := v.bank.Stats().SendMoneyExecutions; got != executed || executed > f.rounds {
		t.Errorf("the bank counts %d executions of send_money, the ledger %d, for %d approved rounds", got, executed, f.rounds)
	}
	return executed
}

// checkNotices checks that each approval round's APPROVAL_NEW reached the approver once (as one
// message), and that the final menus show no badges.
func (v *crashVA) checkNotices(ctx context.Context, t *testing.T, req, appr *crashUser, f *approvalFigures) {
	t.Helper()
	for amount := 1; amount <= f.rounds; amount++ {
		summary := fmt.Sprintf(`recipient: "rcp-globex", amount: %d, currency: "EUR"`, amount)
		notice := v.cat.T("en", "APPROVAL_NEW", "requester", req.name, "tool", "send_money", "server", "bank", "summary", summary)
		if n := len(slices.DeleteFunc(e2eTexts(firstPosts(v.admin.messages(appr.conn))), func(s string) bool { return s != notice })); n != 1 {
			t.Errorf("the approver got the notice of the %d EUR request %d times", amount, n)
		}
	}
	if err := appr.badge(ctx, "pending-approvals", "PENDING_APPROVALS", 0); err != nil {
		t.Error(err)
	}
	if err := req.badge(ctx, "my-approval-requests", "MY_APPROVAL_REQUESTS", 0); err != nil {
		t.Error(err)
	}
}

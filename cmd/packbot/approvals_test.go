package main

// The approval rounds of the crash and replica tests, written once for both channels: an
// employee asks for send_money and confirms, a finance manager is told, sees the badge, opens
// the pending approvals and approves, the employee gets the outcome, the badges go. apWallet is
// what a round needs of a wallet; vaSide (VS Agent) and dcSide (DIDComm) provide it.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/packbot/packbot/i18n"
)

// apWallet is a wallet of the approval rounds. Waits look past a mark() and skip redeliveries.
type apWallet interface {
	who() string                      // the name on the wallet's credential
	catalog() (*i18n.Catalog, string) // the pack's catalog and the wallet's language
	mark() int
	// say sends a text and reports whether the channel acknowledged it (else it is not sent again).
	say(ctx context.Context, text string) (bool, error)
	// question returns the latest question after from whose prompt matches re; false: none came.
	question(ctx context.Context, from int, re *regexp.Regexp) (apQuestion, bool, error)
	choose(ctx context.Context, q apQuestion, option string) error
	selectMenu(ctx context.Context, id string) error
	// text waits for a text after from that matches re.
	text(ctx context.Context, from int, what string, re *regexp.Regexp) (string, error)
	badge(ctx context.Context, id, labelKey string, n int) error
	texts() []string // every text received, each once
}

type apQuestion struct {
	id, prompt string
	options    []string
	raw        e2ePosted // VS Agent
}

func pattern(w apWallet, key string, names ...string) *regexp.Regexp {
	cat, lang := w.catalog()
	return keyPattern(cat, lang, key, names...)
}

func str(w apWallet, key string, args ...string) string {
	cat, lang := w.catalog()
	return cat.T(lang, key, args...)
}

// apRequest makes req ask for send_money of amount EUR on server and confirm it; it returns the
// short id of the request. skipped: the request was not acknowledged, or the bot did not offer
// it (its MCP catalog not loaded yet after a start).
func apRequest(ctx context.Context, req apWallet, server string, amount int) (short string, skipped bool, err error) {
	from := req.mark()
	acked, err := req.say(ctx, fmt.Sprintf(`/call %s/send_money {"recipient":"rcp-globex","amount":%d,"currency":"EUR"}`, server, amount))
	if err != nil || !acked {
		return "", true, err
	}
	q, ok, err := req.question(ctx, from, pattern(req, "APPROVAL_CONFIRM", "tool", "server", "roles", summaryArg(amount)))
	if err != nil || !ok {
		return "", true, err
	}
	if err := req.choose(ctx, q, str(req, "YES")); err != nil {
		return "", false, err
	}
	sub, err := req.text(ctx, from, "APPROVAL_SUBMITTED", pattern(req, "APPROVAL_SUBMITTED", "tool=send_money", "id"))
	if err != nil {
		return "", false, err
	}
	return pattern(req, "APPROVAL_SUBMITTED", "tool=send_money", "id").FindStringSubmatch(sub)[1], false, nil
}

// apDecide makes approver appr open the pending approvals, choose the request short id of
// requester, check its details and approve it. resolved: the answer was that it was decided
// already (a kill after the vote's commit and before the answer makes the choice come again).
func apDecide(ctx context.Context, appr apWallet, requester, server, short string, amount int) (resolved bool, err error) {
	from := appr.mark()
	if err := appr.selectMenu(ctx, "pending-approvals"); err != nil {
		return false, err
	}
	list, ok, err := appr.question(ctx, from, pattern(appr, "PENDING_TITLE"))
	if err != nil || !ok {
		return false, fmt.Errorf("%s: no pending approvals (%v)", appr.who(), err)
	}
	i := slices.IndexFunc(list.options, func(o string) bool { return strings.HasSuffix(o, " #"+short) })
	if i < 0 {
		return false, fmt.Errorf("%s: pending approvals %q lack #%s", appr.who(), list.options, short)
	}
	from = appr.mark()
	if err := appr.choose(ctx, list, list.options[i]); err != nil {
		return false, err
	}
	details, ok, err := appr.question(ctx, from, pattern(appr, "APPROVAL_DETAILS", "requester="+requester, "tool=send_money", "server="+server,
		"description", summaryArg(amount), "fingerprint", "expires"))
	if err != nil || !ok {
		return false, fmt.Errorf("%s: no details of the request of %d EUR (%v)", appr.who(), amount, err)
	}
	from = appr.mark()
	if err := appr.choose(ctx, details, str(appr, "APPROVE")); err != nil {
		return false, err
	}
	ans, err := appr.text(ctx, from, "the decision's answer", apDecided(appr))
	return err == nil && !pattern(appr, "APPROVAL_YOU_APPROVED", "requester", "tool").MatchString(ans), err
}

// apDecided matches the approver's answer to an approval, first or again.
func apDecided(appr apWallet) *regexp.Regexp {
	return anyOf(pattern(appr, "APPROVAL_YOU_APPROVED", "requester", "tool"), pattern(appr, "APPROVAL_ALREADY_VOTED"), pattern(appr, "APPROVAL_ALREADY_RESOLVED"))
}

// apOutcomes are the outcome notices of an approved call, by key.
func apOutcomes(req apWallet) map[string]*regexp.Regexp {
	return map[string]*regexp.Regexp{
		"APPROVAL_APPROVED_RESULT": pattern(req, "APPROVAL_APPROVED_RESULT", "tool", "approver", "result"),
		"APPROVAL_APPROVED_FAILED": pattern(req, "APPROVAL_APPROVED_FAILED", "tool", "approver", "error"),
		"APPROVAL_INTERRUPTED":     pattern(req, "APPROVAL_INTERRUPTED", "tool"),
	}
}

// apOutcome waits for the outcome notice after from and returns its key.
func apOutcome(ctx context.Context, req apWallet, from int) (string, error) {
	outcomes := apOutcomes(req)
	res := make([]*regexp.Regexp, 0, len(outcomes))
	for _, re := range outcomes {
		res = append(res, re)
	}
	out, err := req.text(ctx, from, "the outcome notice", anyOf(res...))
	for key, re := range outcomes {
		if err == nil && re.MatchString(out) {
			return key, nil
		}
	}
	return "", err
}

func anyOf(res ...*regexp.Regexp) *regexp.Regexp {
	parts := make([]string, len(res))
	for i, re := range res {
		parts[i] = "(?:" + re.String() + ")"
	}
	return regexp.MustCompile(strings.Join(parts, "|"))
}

// approvalRounds counts the approval rounds by outcome.
type approvalRounds struct {
	server           string
	tried            int // the last amount asked for
	rounds, resolved int
	outcomes         map[string]int
	results          []int // the amounts whose result came back
}

// run runs rounds of amounts 1, 2, … until load ends; badges: check the badges.
func (f *approvalRounds) run(ctx, load context.Context, req, appr apWallet, badges bool) error {
	f.outcomes = map[string]int{}
	for amount := 1; load.Err() == nil; amount++ {
		if err := f.round(ctx, req, appr, amount, badges); err != nil {
			return fmt.Errorf("approval round of %d EUR: %w", amount, err)
		}
	}
	return nil
}

// round: one request of amount EUR, from the confirmation to the outcome; each step waits for
// its answer, whatever crash comes between.
func (f *approvalRounds) round(ctx context.Context, req, appr apWallet, amount int, badges bool) error {
	f.tried = amount
	from, apprFrom := req.mark(), appr.mark()
	short, skipped, err := apRequest(ctx, req, f.server, amount)
	if err != nil || skipped {
		return err
	}
	f.rounds++
	if _, err := appr.text(ctx, apprFrom, "APPROVAL_NEW", pattern(appr, "APPROVAL_NEW", "requester", "tool", "server", summaryArg(amount))); err != nil {
		return err
	}
	if badges {
		if err := appr.badge(ctx, "pending-approvals", "PENDING_APPROVALS", 1); err != nil {
			return err
		}
		if err := req.badge(ctx, "my-approval-requests", "MY_APPROVAL_REQUESTS", 1); err != nil {
			return err
		}
	}
	resolved, err := apDecide(ctx, appr, req.who(), f.server, short, amount)
	if err != nil {
		return err
	}
	if resolved {
		f.resolved++
	}
	key, err := apOutcome(ctx, req, from)
	if err != nil {
		return err
	}
	f.outcomes[key]++
	if key == "APPROVAL_APPROVED_RESULT" {
		f.results = append(f.results, amount)
	}
	if badges {
		if err := appr.badge(ctx, "pending-approvals", "PENDING_APPROVALS", 0); err != nil {
			return err
		}
		return req.badge(ctx, "my-approval-requests", "MY_APPROVAL_REQUESTS", 0)
	}
	return nil
}

// check checks the notices (each round's submitted, new-request, decision and outcome notices
// arrived once) and the ledger (no payment ran twice), and logs the figures.
func (f *approvalRounds) check(t *testing.T, req, appr apWallet, l ledger) {
	t.Helper()
	count := func(w apWallet, re *regexp.Regexp) int {
		return len(slices.DeleteFunc(w.texts(), func(s string) bool { return !re.MatchString(s) }))
	}
	outcomes := 0
	for _, re := range apOutcomes(req) {
		outcomes += count(req, re)
	}
	subs, news, decided := count(req, pattern(req, "APPROVAL_SUBMITTED", "tool", "id")),
		count(appr, pattern(appr, "APPROVAL_NEW", "requester", "tool", "server", "summary")), count(appr, apDecided(appr))
	if subs != f.rounds || news != f.rounds || decided != f.rounds || outcomes != f.rounds {
		t.Errorf("notices: %d submitted, %d new-request, %d answers to approvals, %d outcomes; want %d each (the rounds)",
			subs, news, decided, outcomes, f.rounds)
	}
	executed := l.check(t, f.tried, f.results)
	t.Logf("approvals: %d requested and approved, outcomes %v; send_money ran %d times; %d approver choices found the request decided",
		f.rounds, f.outcomes, executed, f.resolved)
}

// vaSide is a VS Agent wallet of the approval rounds.
type vaSide struct{ *vaUser }

func (u vaSide) who() string                      { return u.name }
func (u vaSide) catalog() (*i18n.Catalog, string) { return u.b.cat, u.lang }
func (u vaSide) texts() []string                  { return e2eTexts(firstPosts(u.b.agent.messages(u.conn))) }
func (u vaSide) choose(ctx context.Context, q apQuestion, option string) error {
	return u.vaUser.choose(ctx, q.raw, option, func(s string) bool { return s == option })
}

func (u vaSide) say(ctx context.Context, text string) (bool, error) {
	_, err := u.b.agent.text(ctx, u.conn, text)
	return err == nil, err
}

func (u vaSide) question(ctx context.Context, from int, re *regexp.Regexp) (apQuestion, bool, error) {
	m, err := u.await(ctx, from, "question "+re.String(), isQuestion(re.MatchString))
	p, _ := m.Raw["prompt"].(string)
	return apQuestion{prompt: p, options: vaItemTexts(m), raw: m}, err == nil, err
}

func (u vaSide) text(ctx context.Context, from int, what string, re *regexp.Regexp) (string, error) {
	m, err := u.await(ctx, from, what, func(m e2ePosted) bool { return m.Type == "text" && re.MatchString(m.Content) })
	return m.Content, err
}

// dcSide is a DIDComm wallet of the approval rounds.
type dcSide struct {
	*dcWallet
	cat  *i18n.Catalog
	lang string
}

func (w dcSide) who() string                      { return w.name }
func (w dcSide) catalog() (*i18n.Catalog, string) { return w.cat, w.lang }

func (w dcSide) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.events)
}

func (w dcSide) texts() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen, out := map[string]bool{}, []string(nil)
	for _, x := range w.textsLocked() {
		if !seen[x.id] {
			seen[x.id] = true
			out = append(out, x.content)
		}
	}
	return out
}

func (w dcSide) say(ctx context.Context, text string) (bool, error) {
	acked, gen, err := w.sendText(ctx, text, false)
	if err == nil && !acked {
		err = w.bot.settle(ctx, gen)
	}
	return acked, err
}

// question sends a probe (sync): the bot answers in order, so a question asked before the
// probe's answer has come.
func (w dcSide) question(ctx context.Context, from int, re *regexp.Regexp) (apQuestion, bool, error) {
	if err := w.sync(ctx); err != nil {
		return apQuestion{}, false, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.events) - 1; i >= from; i-- {
		if e := w.events[i]; e["event"] == "question" && re.MatchString(e["text"].(string)) {
			q := apQuestion{id: e["id"].(string), prompt: e["text"].(string)}
			for _, o := range e["options"].([]any) {
				q.options = append(q.options, o.(string))
			}
			return q, true, nil
		}
	}
	return apQuestion{}, false, nil
}

func (w dcSide) choose(ctx context.Context, q apQuestion, option string) error {
	return w.untilAcked(ctx, map[string]any{"action": "answer", "question": q.id, "response": option})
}

func (w dcSide) selectMenu(ctx context.Context, id string) error {
	return w.untilAcked(ctx, map[string]any{"action": "select", "option": id})
}

// text waits for a text after from that matches re and whose id did not come before from.
func (w dcSide) text(ctx context.Context, from int, what string, re *regexp.Regexp) (string, error) {
	found := ""
	err := w.wait(ctx, what, func() bool {
		seen := map[string]bool{}
		for i, e := range w.events {
			if e["event"] != "text" {
				continue
			}
			id, _ := e["id"].(string)
			if c := e["content"].(string); i >= from && !seen[id] && re.MatchString(c) {
				found = c
				return true
			}
			seen[id] = true
		}
		return false
	})
	return found, err
}

// badge waits until the latest menu shows item id as "(n) <label>", or does not show it when
// n is 0.
func (w dcSide) badge(ctx context.Context, id, labelKey string, n int) error {
	want := fmt.Sprintf("(%d) %s", n, w.cat.T(w.lang, labelKey))
	return w.wait(ctx, fmt.Sprintf("a menu showing %s as %q (0: hiding it)", id, want), func() bool {
		for i := len(w.events) - 1; i >= 0; i-- {
			if e := w.events[i]; e["event"] == "menu" {
				shown := false
				for _, o := range e["options"].([]any) {
					if o := o.(map[string]any); o["id"] == id {
						shown = n > 0 && o["title"] == want
						if n == 0 {
							return false
						}
					}
				}
				return shown || n == 0
			}
		}
		return n == 0
	})
}

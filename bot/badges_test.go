package bot_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/store"
)

// stepOrder records, in order, the completions of events and the menu refreshes the bot
// accepts, by connection.
type stepOrder struct {
	store.Store
	mu    sync.Mutex
	steps []string
}

func (s *stepOrder) CompleteEvent(ctx context.Context, c store.Completion) (store.Completed, error) {
	out, err := s.Store.CompleteEvent(ctx, c)
	if err == nil {
		s.record("complete " + c.Lease.ConnectionID)
	}
	return out, err
}

func (s *stepOrder) AcceptEvent(ctx context.Context, a store.Accept) (store.Accepted, error) {
	if a.Event.Kind == "bot.refresh-menu" {
		s.record("refresh " + a.Event.ConnectionID)
	}
	return s.Store.AcceptEvent(ctx, a)
}

func (s *stepOrder) record(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, step)
}

func (s *stepOrder) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.steps)
}

// wait waits until step was recorded after the first from steps.
func (s *stepOrder) wait(ctx context.Context, t *testing.T, from int, step string) {
	t.Helper()
	for !slices.Contains(s.seen()[from:], step) {
		select {
		case <-ctx.Done():
			t.Fatalf("no %q in %q", step, s.seen()[from:])
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestBadgesAfterCommit: the badge changes an approval step makes are effects of the event that
// made it: the other users' menus are refreshed after that event committed, never from inside
// it (where a store outage would hold the approver's event, and a commit that failed would
// leave refreshes of a decision handled again).
func TestBadgesAfterCommit(t *testing.T) {
	ctx := testCtx(t)
	order := &stepOrder{}
	h := newHarness(t, harnessOptions{wrap: func(st store.Store) store.Store { order.Store = st; return order }})
	ana, bob, details := requestToDecide(ctx, t, h)
	// The submit's refreshes are done: Ana's and Bob's menus.
	order.wait(ctx, t, 0, "refresh "+ana.w.Conn())
	order.wait(ctx, t, 0, "refresh "+bob.w.Conn())
	mark := len(order.seen())
	bob.answer(ctx, details, "Approve")
	bob.text(ctx) // "you approved"
	// Ana's menu loses her request: the refresh of her badge was accepted.
	requestGone(ctx, t, ana)
	order.wait(ctx, t, mark, "refresh "+ana.w.Conn())
	steps := order.seen()[mark:]
	first := slices.IndexFunc(steps, func(s string) bool { return strings.HasPrefix(s, "refresh ") })
	done := slices.Index(steps, "complete "+bob.w.Conn())
	if first < 0 || done < 0 || first < done {
		t.Fatalf("steps %q: want the approver's event completed before any menu refresh it caused", steps)
	}
}

// requestToDecide logs Ana (employee) and Bob (finance manager) in; Ana asks for a payment that
// needs approval, and Bob opens it: details is his question about it.
func requestToDecide(ctx context.Context, t *testing.T, h *harness) (ana, bob *user, details channeltest.Received) {
	t.Helper()
	ana = h.login(ctx, "ana@acme.corp", "Ana", "employee", "en")
	bob = h.login(ctx, "bob@acme.corp", "Bob", "finance-manager", "en")
	if err := ana.w.SendText(ctx, sendMoney, ""); err != nil {
		t.Fatal(err)
	}
	ana.answer(ctx, ana.question(ctx), "Yes")
	ana.text(ctx) // submitted
	ana.waitMenu(ctx, func(m channel.Menu) bool { return menuHas(m, "my-approval-requests", "(1)") })
	bob.selectItem(ctx, "pending-approvals")
	bob.answer(ctx, nextQuestion(ctx, bob), "Ana")
	return ana, bob, nextQuestion(ctx, bob)
}

// requestGone waits until Ana's menu no longer counts her request (her result comes first).
func requestGone(ctx context.Context, t *testing.T, ana *user) {
	t.Helper()
	for ana.menu == nil || menuHas(*ana.menu, "my-approval-requests", "(1)") {
		r, err := ana.w.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for Ana's menu: %v", err)
		}
		if r.Menu != nil {
			ana.menu = r.Menu
		}
	}
}

// menuHas reports whether m has option id with a title containing text.
func menuHas(m channel.Menu, id, text string) bool {
	return slices.ContainsFunc(m.Options, func(o channel.MenuOption) bool { return o.ID == id && strings.Contains(o.Title, text) })
}

// nextQuestion skips texts (notices) until a question comes.
func nextQuestion(ctx context.Context, u *user) channeltest.Received {
	u.t.Helper()
	for {
		if r := u.next(ctx); r.Question != nil {
			return r
		}
	}
}

// lossyRefresh, once armed, loses every menu refresh of one connection until the outbox
// deliverer claims a badge refresh: as a crash right after the event that caused them committed
// would lose the refreshes its worker was to make.
type lossyRefresh struct {
	store.Store
	mu         sync.Mutex
	conn       string // armed: the connection whose refreshes are lost
	lost       int
	fromOutbox bool
}

func (s *lossyRefresh) AcceptEvent(ctx context.Context, a store.Accept) (store.Accepted, error) {
	s.mu.Lock()
	lose := a.Event.Kind == "bot.refresh-menu" && a.Event.ConnectionID == s.conn && !s.fromOutbox
	if lose {
		s.lost++
	}
	s.mu.Unlock()
	if lose {
		return store.Accepted{}, errors.New("lost: the process died after the commit")
	}
	return s.Store.AcceptEvent(ctx, a)
}

func (s *lossyRefresh) ClaimOutbox(ctx context.Context, c store.OutboxClaim) ([]store.OutboxMessage, error) {
	msgs, err := s.Store.ClaimOutbox(ctx, c)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.fromOutbox = s.fromOutbox || (s.conn != "" && m.Kind == "menu-refresh")
	}
	return msgs, err
}

func (s *lossyRefresh) arm(conn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn = conn
}

// TestBadgeRefreshSurvivesLoss: the badge refreshes an event causes are committed with it (in the
// outbox): when the worker's own refresh is lost after the commit, the outbox deliverer does it,
// and the requester's menu still loses the decided request.
func TestBadgeRefreshSurvivesLoss(t *testing.T) {
	ctx := testCtx(t)
	lossy := &lossyRefresh{}
	h := newHarness(t, harnessOptions{wrap: func(st store.Store) store.Store { lossy.Store = st; return lossy }})
	ana, bob, details := requestToDecide(ctx, t, h)
	lossy.arm(ana.w.Conn())
	bob.answer(ctx, details, "Approve")
	bob.text(ctx) // "you approved"
	requestGone(ctx, t, ana)
	lossy.mu.Lock()
	defer lossy.mu.Unlock()
	// Some of the worker's refreshes may not have been lost: a kick of Ana's outbox can claim
	// the refresh before her worker gets to it.
	if !lossy.fromOutbox {
		t.Fatalf("Ana's menu refreshed with %d refreshes lost and none from the outbox", lossy.lost)
	}
}

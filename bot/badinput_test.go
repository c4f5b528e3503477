package bot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/store"
)

// TestBadInputChangesNothing: unknown menu options, answers to questions never asked, answers
// that are not an option, oversized texts and a corrupted flow state each get a clear answer and
// leave the session as it was.
func TestBadInputChangesNothing(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{noLLM: true, idle: 50 * time.Millisecond})
	u := h.login(ctx, "ana@acme.corp", "Ana", "employee", "en")
	// The menu follows the session's save.
	u.waitMenu(ctx, func(m channel.Menu) bool {
		return m.Description == h.cat.T("en", "MENU_STATUS_AUTHENTICATED", "name", "Ana")
	})
	before, err := h.st.GetSession(ctx, u.w.Conn())
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string) {
		t.Helper()
		after, err := h.st.GetSession(ctx, u.w.Conn())
		if err != nil {
			t.Fatal(err)
		}
		if after.State != before.State || after.Identity != before.Identity || string(after.Flow) != string(before.Flow) ||
			strings.Join(after.Roles, ",") != strings.Join(before.Roles, ",") {
			t.Fatalf("%s changed the session: %+v → %+v", what, before, after)
		}
	}

	u.selectItem(ctx, "no-such-item")
	if got := u.text(ctx); got != h.cat.T("en", "UNKNOWN_MENU_OPTION") {
		t.Fatalf("unknown menu option: %q", got)
	}
	same("an unknown menu option")
	u.selectItem(ctx, "authenticate") // hidden while logged in
	if got := u.text(ctx); got != h.cat.T("en", "UNKNOWN_MENU_OPTION") {
		t.Fatalf("hidden menu option: %q", got)
	}
	same("a hidden menu option")

	if err := u.w.Answer(ctx, "never-asked", "Yes"); err != nil {
		t.Fatal(err)
	}
	if got := u.text(ctx); got != h.cat.T("en", "UNEXPECTED_ANSWER") {
		t.Fatalf("answer to no question: %q", got)
	}
	same("an answer to no question")

	if got := u.say(ctx, strings.Repeat("x", 8001)); got != h.cat.T("en", "MESSAGE_TOO_LONG", "size", "8001", "limit", "8000") {
		t.Fatalf("oversized text: %q", got)
	}
	same("an oversized text")

	// A question is open: an answer that is none of its options is refused, the question stays.
	if err := u.w.SendText(ctx, sendMoney, ""); err != nil {
		t.Fatal(err)
	}
	q := u.question(ctx)
	if err := u.w.Answer(ctx, q.ID, "Maybe"); err != nil {
		t.Fatal(err)
	}
	if got := u.text(ctx); got != h.cat.T("en", "CHOOSE_OPTION") {
		t.Fatalf("answer outside the options: %q", got)
	}
	if now, _ := h.st.GetSession(ctx, u.w.Conn()); !strings.Contains(string(now.Flow), `"approval-confirm"`) || !strings.Contains(string(now.Flow), q.ID) {
		t.Fatalf("the open question is gone: %s", now.Flow)
	}

	// A flow state the bot cannot read (written by a broken or future version) is no flow.
	h.waitIdle(ctx) // the connection's worker keeps the session while it holds the connection
	if _, err := h.st.UpdateSession(ctx, u.w.Conn(), func(s store.Session) (store.Session, error) {
		s.Flow = []byte(`{not json`)
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := u.w.Answer(ctx, q.ID, "Yes"); err != nil {
		t.Fatal(err)
	}
	if got := u.text(ctx); got != h.cat.T("en", "UNEXPECTED_ANSWER") {
		t.Fatalf("answer with a corrupted flow: %q", got)
	}
	if n, _ := h.st.CountApprovals(ctx, store.ApprovalQuery{Requester: "ana@acme.corp"}); n != 0 {
		t.Fatalf("%d approval requests after refused answers", n)
	}
}

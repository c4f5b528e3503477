package main

// Crash tests of the embedded DIDComm channel: `packbot serve` on PostgreSQL is killed with
// SIGKILL at random moments under chat load from scripted `packbot wallet` processes, with
// approvals running, and restarted on the same database, address and DIDComm keys. A wallet
// counts a message as acknowledged only when its envelope got a 2xx (the bot answers 202 only
// once the event is committed); the terminal wallet does not send an envelope again by itself,
// so a message that got no 2xx is left as it is (answered at most once) and the next one is
// sent. The scripted LLM echoes each message ("you said: <message>"), and every message holds
// its wallet's name and a sequence number, so each reply names the message it answers.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
)

// crashDIDCommKey is PACKBOT_DIDCOMM_KEY of the crash tests: every restart unlocks the same
// DIDComm keys, so that the wallets' connections survive.
const crashDIDCommKey = "7f3c9a51d2e84b06a1c57e9d3b2f4a6810c9e7d5b3a1f2e4c6d8b0a2c4e6f8a1"

// crashBot is what the actors know of the bot: whether it runs, and its generation (one per
// start).
type crashBot struct {
	mu      sync.Mutex
	up      bool
	gen     int
	changed chan struct{}
}

func newCrashBot() *crashBot { return &crashBot{up: true, gen: 1, changed: make(chan struct{})} }

func (b *crashBot) set(up bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.up = up
	if up {
		b.gen++
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *crashBot) state() (up bool, gen int, changed <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.up, b.gen, b.changed
}

// settle waits, after a send of generation gen that got no 2xx, until sending again makes
// sense: the bot runs again (a later generation), or it still runs (it refused the envelope,
// e.g. while starting) and a short backoff has passed.
func (b *crashBot) settle(ctx context.Context, gen int) error {
	for {
		up, g, changed := b.state()
		if up && g != gen {
			return nil
		}
		var backoff <-chan time.Time
		if up {
			backoff = time.After(50 * time.Millisecond)
		}
		select {
		case <-backoff:
			return nil
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type crashText struct{ id, replyTo, content string }

type crashQuestion struct {
	id, text string
	options  []string
}

// crashSent is one text a wallet sent: acknowledged (2xx) or not.
type crashSent struct {
	content, id string
	acked, echo bool // echo: the bot answers it with "you said: <content>"
	gen         int
}

// crashWallet drives a scripted wallet process and records everything that reaches it.
type crashWallet struct {
	name string
	p    *walletProc
	acks chan map[string]any // sent, error and help events, in order

	mu        sync.Mutex
	changed   chan struct{}
	texts     []crashText     // every text, in arrival order, redeliveries included
	seen      map[string]bool // outbound message ids seen
	replies   map[string][]string
	order     []string // echoed contents, in order of first arrival
	questions []crashQuestion
	sent      []crashSent
	probes    int
	redeliver int // texts whose id was seen before
}

const echoPrefix = "you said: "

// watch takes over the events of w (a wallet done with its scripted setup).
func watch(t *testing.T, w *e2eWallet, name string) *crashWallet {
	cw := &crashWallet{name: name, p: w.walletProc, acks: make(chan map[string]any, 64), changed: make(chan struct{}),
		seen: map[string]bool{}, replies: map[string][]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range cw.p.events {
			switch e["event"] {
			case "sent", "error", "help":
				cw.acks <- e
			case "text":
				cw.gotText(crashText{id: str(e["id"]), replyTo: str(e["replyTo"]), content: str(e["content"])})
			case "question":
				q := crashQuestion{id: str(e["id"]), text: str(e["text"])}
				for _, o := range e["options"].([]any) {
					q.options = append(q.options, str(o))
				}
				cw.mu.Lock()
				cw.questions = append(cw.questions, q)
				cw.notifyLocked()
				cw.mu.Unlock()
			}
		}
	}()
	// The wallet ends when its input ends: then the reader ends too.
	t.Cleanup(func() {
		_ = cw.p.stdin.Close()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("wallet %s: its events never ended", name)
		}
	})
	return cw
}

func str(v any) string { s, _ := v.(string); return s }

func (w *crashWallet) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *crashWallet) gotText(x crashText) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, x)
	if w.seen[x.id] {
		w.redeliver++
	} else if w.seen[x.id] = true; strings.HasPrefix(x.content, echoPrefix) {
		c := strings.TrimPrefix(x.content, echoPrefix)
		if len(w.replies[c]) == 0 {
			w.order = append(w.order, c)
		}
		w.replies[c] = append(w.replies[c], x.id)
	}
	w.notifyLocked()
}

// wait waits until cond (called with w.mu held) holds.
func (w *crashWallet) wait(ctx context.Context, what string, cond func() bool) error {
	for {
		w.mu.Lock()
		ok, changed := cond(), w.changed
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("wallet %s waiting for %s: %w", w.name, what, ctx.Err())
		}
	}
}

// send gives the wallet one action and reports whether its envelope got a 2xx. A text's outcome
// is its "sent" or "error" event; any other action is followed by a help action, whose event
// tells that no error came before it.
func (w *crashWallet) send(ctx context.Context, action map[string]any) (acked bool, id string, err error) {
	b, _ := json.Marshal(action)
	text := action["action"] == "text"
	line := string(b) + "\n"
	if !text {
		line += `{"action":"help"}` + "\n"
	}
	if _, err := io.WriteString(w.p.stdin, line); err != nil {
		return false, "", fmt.Errorf("wallet %s: %w", w.name, err)
	}
	acked = true
	for {
		select {
		case e := <-w.acks:
			switch {
			case e["event"] == "sent":
				return true, str(e["id"]), nil
			case e["event"] == "error" && text:
				return false, "", nil
			case e["event"] == "error":
				acked = false
			case e["event"] == "help":
				return acked, "", nil
			}
		case <-ctx.Done():
			return false, "", fmt.Errorf("wallet %s waiting for the outcome of %s: %w", w.name, b, ctx.Err())
		}
	}
}

// text sends content once and records it.
func (w *crashWallet) text(ctx context.Context, bot *crashBot, content string, echo bool) (crashSent, error) {
	_, gen, _ := bot.state()
	acked, id, err := w.send(ctx, map[string]any{"action": "text", "content": content})
	s := crashSent{content: content, id: id, acked: acked, echo: echo, gen: gen}
	w.mu.Lock()
	w.sent = append(w.sent, s)
	w.mu.Unlock()
	return s, err
}

// untilAcked sends a non-text action until one of its envelopes gets a 2xx. Sending one again
// is harmless for what the actors send: a second menu selection asks again, a second answer to
// a question gets "no longer open".
func (w *crashWallet) untilAcked(ctx context.Context, bot *crashBot, action map[string]any) error {
	for {
		_, gen, _ := bot.state()
		acked, _, err := w.send(ctx, action)
		if err != nil || acked {
			return err
		}
		if err := bot.settle(ctx, gen); err != nil {
			return err
		}
	}
}

// sync sends a probe text until one is acknowledged and waits for its answer: events of a
// connection are handled and answered in order, so everything the bot answered to what the
// wallet sent before has then reached it.
func (w *crashWallet) sync(ctx context.Context, bot *crashBot) error {
	for {
		w.mu.Lock()
		w.probes++
		content := fmt.Sprintf("%s probe %d", w.name, w.probes)
		w.mu.Unlock()
		s, err := w.text(ctx, bot, content, true)
		if err != nil {
			return err
		}
		if s.acked {
			return w.wait(ctx, "the answer to "+content, func() bool { return len(w.replies[content]) > 0 })
		}
		if err := bot.settle(ctx, s.gen); err != nil {
			return err
		}
	}
}

// unansweredLocked counts the acknowledged echoed texts not answered yet.
func (w *crashWallet) unansweredLocked() int {
	n := 0
	for _, s := range w.sent {
		if s.acked && s.echo && len(w.replies[s.content]) == 0 {
			n++
		}
	}
	return n
}

// lastQuestion is the last question received.
func (w *crashWallet) lastQuestion() (crashQuestion, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.questions) == 0 {
		return crashQuestion{}, false
	}
	return w.questions[len(w.questions)-1], true
}

// count is the number of distinct texts (by message id) matching re.
func (w *crashWallet) count(re *regexp.Regexp) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.countLocked(re)
}

func (w *crashWallet) countLocked(re *regexp.Regexp) int {
	ids := map[string]bool{}
	for _, x := range w.texts {
		if re.MatchString(x.content) {
			ids[x.id] = true
		}
	}
	return len(ids)
}

// chatLoad sends numbered messages, at most two of them acknowledged and unanswered at a time,
// until load ends.
func (w *crashWallet) chatLoad(ctx, load context.Context, bot *crashBot) error {
	for seq := 1; load.Err() == nil; seq++ {
		if err := w.wait(ctx, "answers", func() bool { return w.unansweredLocked() < 2 }); err != nil {
			return err
		}
		s, err := w.text(ctx, bot, fmt.Sprintf("%s m%d", w.name, seq), true)
		if err != nil {
			return err
		}
		if !s.acked {
			if err := bot.settle(ctx, s.gen); err != nil {
				return err
			}
		}
	}
	return nil
}

// check reports the wallet's figures and every acknowledged message not answered exactly once,
// a message answered twice, an answer to the wrong message, and answers out of order.
func (w *crashWallet) check(t *testing.T) (acked, unacked int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	index := map[string]int{}
	for i, s := range w.sent {
		if !s.echo {
			continue
		}
		index[s.content] = i
		n := len(w.replies[s.content])
		switch {
		case s.acked:
			acked++
			if n != 1 {
				t.Errorf("wallet %s: the acknowledged message %q was answered %d times", w.name, s.content, n)
			}
		default:
			unacked++
			if n > 1 {
				t.Errorf("wallet %s: the unacknowledged message %q was answered %d times", w.name, s.content, n)
			}
		}
	}
	for _, x := range w.texts {
		c, echo := strings.CutPrefix(x.content, echoPrefix)
		i, ok := index[c]
		switch {
		case echo && !ok:
			t.Errorf("wallet %s: an answer to a message it never sent: %q", w.name, x.content)
		case echo && w.sent[i].acked && x.replyTo != w.sent[i].id:
			t.Errorf("wallet %s: the answer to %q refers to %q, not to its message %q", w.name, c, x.replyTo, w.sent[i].id)
		}
	}
	last := -1
	for _, c := range w.order {
		if i, ok := index[c]; ok {
			if i < last {
				t.Errorf("wallet %s: %q answered after %q, which was sent later", w.name, c, w.sent[last].content)
			}
			last = max(last, i)
		}
	}
	if t.Failed() {
		var b strings.Builder
		for _, s := range w.sent {
			fmt.Fprintf(&b, "\n  sent %q id=%s acked=%v gen=%d", s.content, s.id, s.acked, s.gen)
		}
		for _, x := range w.texts {
			fmt.Fprintf(&b, "\n  got %q id=%s replyTo=%s", x.content, x.id, x.replyTo)
		}
		t.Logf("wallet %s:%s", w.name, b.String())
	}
	return acked, unacked
}

// catalogOf loads the pack the bot runs (its ${…} from the bot's environment) and its catalog.
func catalogOf(t *testing.T, env []string, pack string) *i18n.Catalog {
	t.Helper()
	m := map[string]string{"PACKBOT_SELF": os.Args[0]}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	p, err := packs.Load(packs.Options{Path: pack, Env: packs.MapEnv(m)})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := i18n.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// keyPattern matches the texts of key in lang whatever its placeholders (names) hold.
func keyPattern(cat *i18n.Catalog, lang, key string, names ...string) *regexp.Regexp {
	args := make([]string, 0, 2*len(names))
	for i, n := range names {
		args = append(args, n, fmt.Sprintf("\x00%d\x00", i))
	}
	s := regexp.QuoteMeta(cat.T(lang, key, args...))
	for i := range names {
		s = strings.ReplaceAll(s, fmt.Sprintf("\x00%d\x00", i), "(?s:.*)")
	}
	return regexp.MustCompile("^" + s + "$")
}

func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, _ := strings.Cut(kv, "="); k == key {
			v = val
		}
	}
	return v
}

// crashSeed is CRASH_SEED when set (to replay a run), else the time.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("CRASH_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CRASH_SEED: %v", err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// quiescent waits until the bot's inbox holds no pending event and its outbox nothing to send.
func quiescent(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var pending, outbox int
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM inbox WHERE state <> 'done'), (SELECT count(*) FROM outbox)`).
			Scan(&pending, &outbox); err != nil {
			return err
		}
		if pending == 0 && outbox == 0 {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("inbox %d pending, outbox %d: %w", pending, outbox, ctx.Err())
		}
	}
}

// crashTexts are the patterns of the approval texts, from the pack's catalog.
type crashTexts struct {
	confirm, pendingTitle, details           string // question texts: prefixes of patterns below
	confirmRe, pendingRe, detailsRe          *regexp.Regexp
	submitted, newReq, youApproved, pendNone *regexp.Regexp
	result, failed, interrupted              *regexp.Regexp
	yes, approve                             string
}

func newCrashTexts(cat *i18n.Catalog) crashTexts {
	const en = "en"
	return crashTexts{
		confirmRe:   keyPattern(cat, en, "APPROVAL_CONFIRM", "tool", "server", "roles", "summary"),
		pendingRe:   keyPattern(cat, en, "PENDING_TITLE"),
		detailsRe:   keyPattern(cat, en, "APPROVAL_DETAILS", "requester", "tool", "server", "description", "summary", "fingerprint", "expires"),
		submitted:   keyPattern(cat, en, "APPROVAL_SUBMITTED", "tool", "id"),
		newReq:      keyPattern(cat, en, "APPROVAL_NEW", "requester", "tool", "server", "summary"),
		youApproved: keyPattern(cat, en, "APPROVAL_YOU_APPROVED", "requester", "tool"),
		pendNone:    keyPattern(cat, en, "PENDING_NONE"),
		result:      keyPattern(cat, en, "APPROVAL_APPROVED_RESULT", "tool", "approver", "result"),
		failed:      keyPattern(cat, en, "APPROVAL_APPROVED_FAILED", "tool", "approver", "error"),
		interrupted: keyPattern(cat, en, "APPROVAL_INTERRUPTED", "tool"),
		yes:         cat.T(en, "YES"),
		approve:     cat.T(en, "APPROVE"),
	}
}

// outcomes counts the distinct outcome notices a requester got.
func (x crashTexts) outcomes(w *crashWallet) int {
	return w.count(x.result) + w.count(x.failed) + w.count(x.interrupted)
}

var amountOf = regexp.MustCompile(`\bamount: ([0-9]+)\b`)

// requester asks for a payment of a new amount per round (the amount names the round), confirms
// it, waits for the submitted notice, hands the amount to the approver and waits for the
// outcome notice. A round whose request got no 2xx, or that the bot could not offer (its MCP
// catalog not loaded yet after a start), is skipped.
func requester(ctx, load context.Context, bot *crashBot, w *crashWallet, x crashTexts, submitted chan<- int) (rounds int, err error) {
	defer close(submitted)
	done := 0
	for amount := 1; load.Err() == nil; amount++ {
		rounds++
		s, err := w.text(ctx, bot, fmt.Sprintf(`/call pay/send_money {"recipient":"rcp-globex","amount":%d,"currency":"EUR"}`, amount), false)
		if err != nil {
			return rounds, err
		}
		if !s.acked {
			if err := bot.settle(ctx, s.gen); err != nil {
				return rounds, err
			}
			continue
		}
		if err := w.sync(ctx, bot); err != nil {
			return rounds, err
		}
		q, ok := w.lastQuestion()
		if m := amountOf.FindStringSubmatch(q.text); !ok || !x.confirmRe.MatchString(q.text) || m == nil || m[1] != strconv.Itoa(amount) {
			continue // not offered (the bot was starting): no question for this amount
		}
		before := w.count(x.submitted)
		if err := w.untilAcked(ctx, bot, map[string]any{"action": "answer", "question": q.id, "response": x.yes}); err != nil {
			return rounds, err
		}
		if err := w.wait(ctx, "the submitted notice", func() bool { return w.countLocked(x.submitted) > before }); err != nil {
			return rounds, err
		}
		select {
		case submitted <- amount:
		case <-ctx.Done():
			return rounds, ctx.Err()
		}
		done++
		if err := w.wait(ctx, "the outcome notice", func() bool {
			return w.countLocked(x.result)+w.countLocked(x.failed)+w.countLocked(x.interrupted) >= done
		}); err != nil {
			return rounds, err
		}
	}
	return rounds, nil
}

// approver approves each submitted request from the pending-approvals menu.
func approver(ctx context.Context, bot *crashBot, w *crashWallet, x crashTexts, submitted <-chan int) (approved int, err error) {
	for amount := range submitted {
		if err := w.untilAcked(ctx, bot, map[string]any{"action": "select", "option": "pending-approvals"}); err != nil {
			return approved, err
		}
		if err := w.sync(ctx, bot); err != nil {
			return approved, err
		}
		q, ok := w.lastQuestion()
		if !ok || !x.pendingRe.MatchString(q.text) || len(q.options) == 0 {
			return approved, fmt.Errorf("approver: no list of pending requests for amount %d (last question %q)", amount, q.text)
		}
		if err := w.untilAcked(ctx, bot, map[string]any{"action": "answer", "question": q.id, "response": q.options[0]}); err != nil {
			return approved, err
		}
		if err := w.sync(ctx, bot); err != nil {
			return approved, err
		}
		q, ok = w.lastQuestion()
		if m := amountOf.FindStringSubmatch(q.text); !ok || !x.detailsRe.MatchString(q.text) || m == nil || m[1] != strconv.Itoa(amount) {
			return approved, fmt.Errorf("approver: no details of the request for amount %d (last question %q)", amount, q.text)
		}
		before := w.count(x.youApproved)
		if err := w.untilAcked(ctx, bot, map[string]any{"action": "answer", "question": q.id, "response": x.approve}); err != nil {
			return approved, err
		}
		if err := w.sync(ctx, bot); err != nil {
			return approved, err
		}
		if w.count(x.youApproved) != before+1 {
			return approved, fmt.Errorf("approver: approving the request for amount %d was not confirmed once", amount)
		}
		approved++
	}
	return approved, nil
}

// TestCrashDIDComm: `packbot serve` (DIDComm, PostgreSQL) is killed with SIGKILL at random
// moments, at least 10 times, under chat load from three wallets while an employee asks for
// payments that a finance manager approves. After a last clean start and quiescence: every
// acknowledged message was answered exactly once, in order per connection; no payment ran
// twice; no notice was lost.
func TestCrashDIDComm(t *testing.T) {
	const kills, chatters = 10, 3
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	seed := crashSeed(t)
	t.Logf("seed %d (CRASH_SEED=%d replays the kill schedule)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	started := time.Now()

	e := newE2E(t, true, "PACKBOT_DIDCOMM_KEY="+crashDIDCommKey)
	x := newCrashTexts(catalogOf(t, e.env, envValue(e.env, "AGENT_PACK_PATH")))
	ana := e.user(ctx, "ana", "en", "email=ana@acme.corp", "name=Ana", "roles=employee")
	bob := e.user(ctx, "bob", "en", "email=bob@acme.corp", "name=Bob", "roles=finance-manager")
	var chat []*crashWallet
	for i := range chatters {
		name := fmt.Sprintf("w%d", i)
		w := e.wallet(ctx, name, "en")
		w.text() // the greeting
		chat = append(chat, watch(t, w, name))
	}
	req, appr := watch(t, ana, "ana"), watch(t, bob, "bob")
	setup := time.Since(started)
	before := map[string]bool{} // the ledger's transfers before the load
	seeded, err := e.pay.Ledger().Transfers("", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range seeded {
		before[tr.ID] = true
	}

	bot := newCrashBot()
	load, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	errs := make(chan error, chatters+2)
	for _, w := range chat {
		wg.Go(func() { errs <- w.chatLoad(ctx, load, bot) })
	}
	submitted := make(chan int)
	var rounds, approved int
	wg.Go(func() {
		var err error
		rounds, err = requester(ctx, load, bot, req, x, submitted)
		errs <- err
	})
	wg.Go(func() {
		var err error
		approved, err = approver(ctx, bot, appr, x, submitted)
		errs <- err
	})
	// On a failure, the actors stop with ctx before the wallets do.
	defer func() { cancel(); wg.Wait() }()
	fail := func(format string, args ...any) {
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		t.Fatalf(format, args...)
	}

	for i := range kills {
		// Up for 0.1 to 5 s: long enough, often, for connections held by the killed process to
		// be taken over (its heartbeat expires after 4 s) and handled.
		uptime := time.Duration(100+rng.IntN(4900)) * time.Millisecond
		select {
		case <-time.After(uptime):
		case <-ctx.Done():
			fail("kill %d: %v", i+1, ctx.Err())
		}
		bot.set(false)
		e.kill()
		t.Logf("kill %d after %v up", i+1, uptime)
		if i < kills-1 {
			// Started without waiting for its MCP catalog: the next kill may come during recovery.
			e.bot = startPackbot(t, e.dir, e.env, "serve")
			e.bot.waitServing(t)
			bot.set(true)
		}
	}
	e.start()
	bot.set(true)
	stopLoad()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Quiescence: every wallet's last probe answered (so everything before it too), nothing
	// left in the inbox or the outbox.
	for _, w := range append(slices.Clone(chat), req, appr) {
		if err := w.sync(ctx, bot); err != nil {
			t.Fatal(err)
		}
	}
	if err := quiescent(ctx, envValue(e.env, "DATABASE_URL")); err != nil {
		t.Fatalf("the bot never became quiescent: %v", err)
	}

	var acked, unacked, redelivered int
	for _, w := range append(slices.Clone(chat), req, appr) {
		a, u := w.check(t)
		acked, unacked, redelivered = acked+a, unacked+u, redelivered+w.redeliver
		t.Logf("wallet %s: %d acknowledged messages answered once, %d not acknowledged (%d of them answered), %d redelivered texts",
			w.name, a, u, u-w.unackedUnanswered(), w.redeliver)
	}

	// Approvals: every submitted request announced to the approver, every approval's outcome
	// told to the requester, each payment run at most once.
	subs, news, yours, outs := req.count(x.submitted), appr.count(x.newReq), appr.count(x.youApproved), x.outcomes(req)
	results, interrupted, failed := req.count(x.result), req.count(x.interrupted), req.count(x.failed)
	transfers, err := e.pay.Ledger().Transfers("", 0)
	if err != nil {
		t.Fatal(err)
	}
	amounts := map[float64]int{}
	for _, tr := range transfers {
		if !before[tr.ID] {
			amounts[tr.SourceAmount]++
		}
	}
	runs := e.pay.Stats().SendMoneyExecutions
	for a, n := range amounts {
		if n > 1 {
			t.Errorf("the payment of %v EUR ran %d times", a, n)
		}
	}
	if subs != approved || news != subs || yours != approved || outs != approved {
		t.Errorf("notices: %d submitted notices, %d new-request notices, %d approvals confirmed, %d outcome notices; want %d each",
			subs, news, yours, outs, approved)
	}
	if runs > approved || runs < results || runs != len(amounts) {
		t.Errorf("send_money ran %d times for %d distinct amounts, %d approvals, %d results", runs, len(amounts), approved, results)
	}
	t.Logf("figures: seed %d, %d kills, %d acknowledged messages each answered once, %d not acknowledged, %d redelivered texts dropped by id",
		seed, kills, acked, unacked, redelivered)
	t.Logf("approvals: %d rounds, %d submitted and approved, send_money ran %d times (%d results, %d interrupted, %d failed)",
		rounds, approved, runs, results, interrupted, failed)
	t.Logf("time: setup %v, total %v", setup.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
}

// unackedUnanswered counts the unacknowledged echoed texts never answered.
func (w *crashWallet) unackedUnanswered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.sent {
		if s.echo && !s.acked && len(w.replies[s.content]) == 0 {
			n++
		}
	}
	return n
}

// vaultGate records the Authorization header of every request to the vault and, while armed,
// holds the requests that carry one (the bot testing a user's credential) until released.
type vaultGate struct {
	next    http.Handler
	mu      sync.Mutex
	auth    []string
	armed   chan struct{} // closed to release held requests; nil: not armed
	arrived chan struct{} // gets a value when a request is held
}

func (g *vaultGate) arm() (arrived <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.arrived = make(chan struct{}), make(chan struct{}, 1)
	return g.arrived, sync.OnceFunc(func() { close(g.armed) })
}

func (g *vaultGate) authorizations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.auth)
}

func (g *vaultGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := r.Header.Get("Authorization")
	g.mu.Lock()
	if a != "" {
		g.auth = append(g.auth, a)
	}
	armed, arrived := g.armed, g.arrived
	g.mu.Unlock()
	if a != "" && armed != nil {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-armed:
		case <-r.Context().Done(): // the bot is gone
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// TestCrashDuringCredentialTest: a user types the token of a user-controlled MCP server in the
// chat; serve is killed (SIGKILL) while the vault holds the test of that credential, and started
// again. The user is told the check was interrupted (MCP_CONFIG_INTERRUPTED, in their language),
// and the next ordinary message is chat: it never reaches the vault as a credential.
func TestCrashDuringCredentialTest(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	gate := &vaultGate{next: demoserver.New(&demoserver.Options{Name: "vault", Token: e2eToken}).Handler()}
	vault := httptest.NewServer(gate)
	t.Cleanup(vault.Close)
	e := newE2E(t, true, "PACKBOT_DIDCOMM_KEY="+crashDIDCommKey, "E2E_VAULT_URL="+vault.URL+"/mcp")
	cat := catalogOf(t, e.env, envValue(e.env, "AGENT_PACK_PATH"))
	const lang = "es"
	ana := e.user(ctx, "ana", lang, "email=ana@acme.corp", "name=Ana", "roles=employee")

	ana.selectItem("mcp-config")
	ana.answer("vault")
	if got, want := ana.text(), keyPattern(cat, lang, "MCP_CONFIG_FIELD_PROMPT", "field", "server"); !want.MatchString(got) {
		t.Fatalf("first prompt %q", got)
	}
	if got, want := ana.say("acme"), keyPattern(cat, lang, "MCP_CONFIG_SECRET_PROMPT", "field", "server"); !want.MatchString(got) {
		t.Fatalf("secret prompt %q", got)
	}
	arrived, release := gate.arm()
	t.Cleanup(release) // before the vault closes: it waits for held requests
	ana.do(map[string]any{"action": "text", "content": e2eToken})
	ana.next("sent") // acknowledged: committed in the inbox
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the credential test never reached the vault")
	}
	e.kill()
	release()
	e.start()

	// The user does not wait: the next message goes out at once, and is handled after the
	// interrupted event.
	const hello = "hello are you there"
	early := sendUntilAcked(ctx, ana, hello)
	interrupted := cat.T(lang, "MCP_CONFIG_INTERRUPTED", "server", "vault")
	outcomes := []*regexp.Regexp{keyPattern(cat, lang, "MCP_CONFIG_SUCCESS", "server", "count"), keyPattern(cat, lang, "MCP_CONFIG_FAILURE", "server")}
	told, tested := false, false
	for got := ""; got != echoPrefix+hello && !tested; {
		if len(early) > 0 {
			got, early = early[0], early[1:]
		} else {
			got = ana.text()
		}
		t.Logf("after the restart: %q", got)
		for _, re := range outcomes {
			if re.MatchString(got) {
				t.Errorf("a credential test ran after the restart: %q", got)
				tested = true
			}
		}
		told = told || got == interrupted
	}
	if !told {
		t.Errorf("the user was not told %q before the answer to %q", interrupted, hello)
	}
	auths := gate.authorizations()
	for _, a := range auths {
		if strings.Contains(a, hello) {
			t.Errorf("the vault got %q as a credential", a)
		} else if a != "Bearer "+e2eToken {
			t.Errorf("the vault got the unexpected Authorization %q", a)
		}
	}
	if !t.Failed() {
		t.Logf("the vault saw %d requests with credentials, all with the typed token; the user was told %q", len(auths), interrupted)
	}
}

// sendUntilAcked sends content until its envelope gets a 2xx (the bot may still be starting),
// and returns the texts that arrived meanwhile.
func sendUntilAcked(ctx context.Context, w *e2eWallet, content string) (texts []string) {
	w.t.Helper()
	for {
		w.do(map[string]any{"action": "text", "content": content})
		for again := false; !again; {
			select {
			case e, ok := <-w.events:
				switch {
				case !ok:
					w.t.Fatal("the wallet exited")
				case e["event"] == "sent":
					return texts
				case e["event"] == "text":
					texts = append(texts, str(e["content"]))
				case e["event"] == "error":
					w.t.Logf("%q not acknowledged (%v): sent again", content, e["message"])
					again = true
				}
			case <-ctx.Done():
				w.t.Fatalf("sending %q: %v", content, ctx.Err())
			}
		}
		select {
		case <-time.After(50 * time.Millisecond): // a backoff before sending again
		case <-ctx.Done():
			w.t.Fatalf("sending %q: %v", content, ctx.Err())
		}
	}
}

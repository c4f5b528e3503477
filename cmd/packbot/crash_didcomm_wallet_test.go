package main

// The wallet driver and helpers of the DIDComm crash tests (crash_didcomm_test.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/packs"
)

// dcBot is what the actors know of the bot: whether it runs, and its generation (one per
// start).
type dcBot struct {
	mu      sync.Mutex
	up      bool
	gen     int
	changed chan struct{}
}

func newDCBot() *dcBot { return &dcBot{up: true, gen: 1, changed: make(chan struct{})} }

func (b *dcBot) set(up bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.up = up
	if up {
		b.gen++
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *dcBot) state() (up bool, gen int, changed <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.up, b.gen, b.changed
}

// settle waits, after a send of generation gen that got no 2xx, until sending again makes
// sense: the bot runs again (a later generation), or it still runs (it refused the envelope,
// e.g. while starting) and a short backoff has passed.
func (b *dcBot) settle(ctx context.Context, gen int) error {
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

type dcText struct{ id, replyTo, content string }

type dcQuestion struct {
	id, text string
	options  []string
}

// dcSent is one text a wallet sent: acknowledged (2xx) or not.
type dcSent struct {
	content, id string
	acked, echo bool // echo: the bot answers it with "you said: <content>"
	gen         int
}

// dcWallet drives a scripted wallet process and records everything that reaches it.
type dcWallet struct {
	name string
	p    *walletProc
	acks chan map[string]any // sent, error and help events, in order

	mu        sync.Mutex
	changed   chan struct{}
	texts     []dcText        // every text, in arrival order, redeliveries included
	seen      map[string]bool // outbound message ids seen
	replies   map[string][]string
	order     []string // echoed contents, in order of first arrival
	questions []dcQuestion
	sent      []dcSent
	probes    int
	redeliver int // texts whose id was seen before
}

const dcEcho = "you said: "

// dcWatch takes over the events of w (a wallet done with its scripted setup).
func dcWatch(t *testing.T, w *e2eWallet, name string) *dcWallet {
	cw := &dcWallet{name: name, p: w.walletProc, acks: make(chan map[string]any, 64), changed: make(chan struct{}),
		seen: map[string]bool{}, replies: map[string][]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range cw.p.events {
			switch e["event"] {
			case "sent", "error", "help":
				cw.acks <- e
			case "text":
				cw.gotText(dcText{id: dcStr(e["id"]), replyTo: dcStr(e["replyTo"]), content: dcStr(e["content"])})
			case "question":
				q := dcQuestion{id: dcStr(e["id"]), text: dcStr(e["text"])}
				for _, o := range e["options"].([]any) {
					q.options = append(q.options, dcStr(o))
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

func dcStr(v any) string { s, _ := v.(string); return s }

func (w *dcWallet) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *dcWallet) gotText(x dcText) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, x)
	if w.seen[x.id] {
		w.redeliver++
	} else if w.seen[x.id] = true; strings.HasPrefix(x.content, dcEcho) {
		c := strings.TrimPrefix(x.content, dcEcho)
		if len(w.replies[c]) == 0 {
			w.order = append(w.order, c)
		}
		w.replies[c] = append(w.replies[c], x.id)
	}
	w.notifyLocked()
}

// wait waits until cond (called with w.mu held) holds.
func (w *dcWallet) wait(ctx context.Context, what string, cond func() bool) error {
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
func (w *dcWallet) send(ctx context.Context, action map[string]any) (acked bool, id string, err error) {
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
				return true, dcStr(e["id"]), nil
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
func (w *dcWallet) text(ctx context.Context, bot *dcBot, content string, echo bool) (dcSent, error) {
	_, gen, _ := bot.state()
	acked, id, err := w.send(ctx, map[string]any{"action": "text", "content": content})
	s := dcSent{content: content, id: id, acked: acked, echo: echo, gen: gen}
	w.mu.Lock()
	w.sent = append(w.sent, s)
	w.mu.Unlock()
	return s, err
}

// untilAcked sends a non-text action until one of its envelopes gets a 2xx. Sending one again
// is harmless for what the actors send: a second menu selection asks again, a second answer to
// a question gets "no longer open".
func (w *dcWallet) untilAcked(ctx context.Context, bot *dcBot, action map[string]any) error {
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
func (w *dcWallet) sync(ctx context.Context, bot *dcBot) error {
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
func (w *dcWallet) unansweredLocked() int {
	n := 0
	for _, s := range w.sent {
		if s.acked && s.echo && len(w.replies[s.content]) == 0 {
			n++
		}
	}
	return n
}

// lastQuestion is the last question received.
func (w *dcWallet) lastQuestion() (dcQuestion, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.questions) == 0 {
		return dcQuestion{}, false
	}
	return w.questions[len(w.questions)-1], true
}

// count is the number of distinct texts (by message id) matching re.
func (w *dcWallet) count(re *regexp.Regexp) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.countLocked(re)
}

func (w *dcWallet) countLocked(re *regexp.Regexp) int {
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
func (w *dcWallet) chatLoad(ctx, load context.Context, bot *dcBot) error {
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
func (w *dcWallet) check(t *testing.T) (acked, unacked int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	bad := false
	fail := func(format string, args ...any) {
		t.Helper()
		bad = true
		t.Errorf(format, args...)
	}
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
				fail("wallet %s: the acknowledged message %q was answered %d times", w.name, s.content, n)
			}
		default:
			unacked++
			if n > 1 {
				fail("wallet %s: the unacknowledged message %q was answered %d times", w.name, s.content, n)
			}
		}
	}
	for _, x := range w.texts {
		c, echo := strings.CutPrefix(x.content, dcEcho)
		i, ok := index[c]
		switch {
		case echo && !ok:
			fail("wallet %s: an answer to a message it never sent: %q", w.name, x.content)
		case echo && w.sent[i].acked && x.replyTo != w.sent[i].id:
			fail("wallet %s: the answer to %q refers to %q, not to its message %q", w.name, c, x.replyTo, w.sent[i].id)
		}
	}
	last := -1
	for _, c := range w.order {
		if i, ok := index[c]; ok {
			if i < last {
				fail("wallet %s: %q answered after %q, which was sent later", w.name, c, w.sent[last].content)
			}
			last = max(last, i)
		}
	}
	if bad {
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

// dcCatalog loads the pack the bot runs (its ${…} from the bot's environment) and its catalog.
func dcCatalog(t *testing.T, env []string, pack string) *i18n.Catalog {
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

// dcKeyPattern matches the texts of key in lang whatever its placeholders (names) hold.
func dcKeyPattern(cat *i18n.Catalog, lang, key string, names ...string) *regexp.Regexp {
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

func dcEnvValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, _ := strings.Cut(kv, "="); k == key {
			v = val
		}
	}
	return v
}

// dcSeed is CRASH_SEED when set (to replay a run), else the time.
func dcSeed(t *testing.T) uint64 {
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

// dcQuiescent waits until the bot's inbox holds no pending event and its outbox nothing to send.
func dcQuiescent(ctx context.Context, dsn string) error {
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

// unackedUnanswered counts the unacknowledged echoed texts never answered.
func (w *dcWallet) unackedUnanswered() int {
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

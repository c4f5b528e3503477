package transcript

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/store"
)

//go:embed scenarios/*.txt
var files embed.FS

// Scenarios are the transcripts every channel replays: scenarios/*.txt.
var Scenarios = mustSub(files, "scenarios")

func mustSub(f fs.FS, dir string) fs.FS {
	s, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // a constant directory of an embedded FS
	}
	return s
}

// timeout bounds one transcript, so that a broken bot or channel fails rather than hangs; it is
// not a performance assertion.
const timeout = 60 * time.Second

// Open returns a fresh channel, not running yet, and the way to connect wallets to it. The
// harness's ProofRequest says which credential the wallets hold: the transcripts' pack asks
// for it.
type Open func(t *testing.T) channeltest.Harness

// Options change how transcripts run; the zero value is the default.
type Options struct {
	// Store opens the bot's store for one transcript (nil: SQLite in a temporary directory).
	Store func(t testing.TB) store.Store
}

// RunAll runs every *.txt transcript of fsys as a subtest, each on a fresh channel from open
// and a fresh bot.
func RunAll(t *testing.T, fsys fs.FS, open Open) { RunAllWith(t, fsys, open, Options{}) }

// RunAllWith is RunAll with options.
func RunAllWith(t *testing.T, fsys fs.FS, open Open, o Options) {
	names, err := fs.Glob(fsys, "*.txt")
	if err != nil || len(names) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, name := range names {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(name, src)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(strings.TrimSuffix(path.Base(name), ".txt"), func(t *testing.T) {
			run(t, s, open(t), o)
		})
	}
}

// Run plays s against a new bot on h's channel.
func Run(t *testing.T, s *Script, h channeltest.Harness) { run(t, s, h, Options{}) }

func run(t *testing.T, s *Script, h channeltest.Harness, o Options) {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	r := &runner{t: t, s: s, h: h, w: newWorld(t, h.Channel, h.ProofRequest, o.Store, s.ElicitTimeout), wallets: map[string]*wallet{}, vars: map[string]string{}}
	_, r.menus = h.Channel.(channel.MenuSender)
	_, r.questions = h.Channel.(channel.QuestionAsker)
	defer r.w.stop()
	for _, st := range s.Steps {
		if err := r.step(ctx, st); err != nil {
			t.Fatalf("%s:%d: %v", s.Name, st.Line, err)
		}
	}
	r.leftovers()
}

type runner struct {
	// menus and questions: the channel sends them; without, the bot sends no menu and asks its
	// questions as a numbered text answered by number (flows' text fallback), and the runner
	// checks and answers them so.
	menus, questions bool
	t                *testing.T
	s                *Script
	h                channeltest.Harness
	w                *world
	wallets          map[string]*wallet
	// vars are the values captured (llm: capture), by name.
	vars map[string]string
}

// wallet is one connected wallet and what it has received that the transcript has not taken
// yet.
type wallet struct {
	name   string
	w      channeltest.Wallet
	lang   string // the catalog's code of the wallet's language
	claims map[string]string
	menu   *channel.Menu
	// held are messages that arrived while the transcript waited for a menu.
	held []channeltest.Received
	// question and proof are the last question and proof request, until answered.
	question, proof *channeltest.Received
	// receipts are the credentials offered to the wallet (or sent as a text that carries one)
	// that no receipt: step took yet, oldest first.
	receipts []json.RawMessage
}

func (r *runner) step(ctx context.Context, st Step) error {
	w := r.wallets[st.Wallet]
	switch st.Kind {
	case Connect:
		return r.connect(ctx, st)
	case Send:
		return w.w.SendText(ctx, r.expand(st.Text), "")
	case Type:
		want, err := r.render(w.lang, st.Msgs[0])
		if err != nil {
			return err
		}
		if want.re != nil {
			return fmt.Errorf("type: %s has a wildcard", want)
		}
		return w.w.SendText(ctx, want.exact, "")
	case Select:
		return w.w.SelectMenu(ctx, st.Text)
	case Profile:
		w.lang = r.lang(st.Text)
		return w.w.SendProfile(ctx, w.claims["name"], st.Text)
	case Present, Decline:
		if w.proof == nil {
			if err := r.expectProof(ctx, w); err != nil {
				return err
			}
		}
		id := w.proof.ID
		w.proof = nil
		if st.Kind == Decline {
			return w.w.Decline(ctx, id)
		}
		return w.w.Present(ctx, id)
	case Answer:
		return r.answer(ctx, w, st.Msgs[0])
	case ExpectText, ExpectContains:
		got, err := w.next(ctx)
		if err != nil {
			return err
		}
		if got.Text == nil {
			return fmt.Errorf("%s got %s, want a text", w.name, got)
		}
		for _, m := range st.Msgs {
			want, err := r.render(w.lang, m)
			if err != nil {
				return err
			}
			if ok := want.matches(got.Text.Content, st.Kind == ExpectContains); !ok {
				return fmt.Errorf("%s got text %q, want %s", w.name, got.Text.Content, want)
			}
		}
		return nil
	case ExpectProof:
		return r.expectProof(ctx, w)
	case ExpectQuestion:
		if len(st.Msgs) == 0 {
			return r.expectQuestion(ctx, w, nil, false, nil)
		}
		return r.expectQuestion(ctx, w, st.Msgs[:1], false, st.Msgs[1:])
	case ExpectQuestionContains:
		return r.expectQuestion(ctx, w, st.Parts, true, st.Msgs)
	case ExpectMenu:
		if !r.menus {
			return nil // the bot sends no menu on this channel
		}
		return r.waitMenu(ctx, w, st.Menu)
	case LLMCall:
		r.w.queue.push(agenttest.Response{ToolCalls: []agenttest.ToolCall{{Name: st.Tool, Arguments: r.expand(st.Text)}}})
	case LLMSay:
		r.w.queue.push(agenttest.Response{Text: st.Text})
	case LLMTools:
		req, err := r.lastRequest()
		if err != nil {
			return err
		}
		if got := req.ToolNames(); !slices.Equal(got, st.Names) {
			return fmt.Errorf("the model was offered %v, want %v", got, st.Names)
		}
	case LLMResult:
		return r.llmResult(w, st.Msgs[0])
	case LLMCapture:
		return r.capture(st.Text, st.Names)
	case LLMMaxTokens:
		req, err := r.lastRequest()
		if err != nil {
			return err
		}
		n := strconv.Itoa(st.N)
		if !strings.Contains(string(req.Raw), `"max_completion_tokens":`+n) && !strings.Contains(string(req.Raw), `"max_tokens":`+n) {
			return fmt.Errorf("the model's last request is not limited to %s tokens: %s", n, req.Raw)
		}
	case LogsLack:
		logs, err := os.ReadFile(r.w.logPath)
		if err != nil {
			return fmt.Errorf("read the bot's log: %w", err)
		}
		if n := strings.Count(string(logs), st.Text); n > 0 {
			return fmt.Errorf("the bot logged %q %d times:\n%s", st.Text, n, logs)
		}
	case ToolErrors:
		return r.waitToolErrors(ctx, st.Counts)
	case LLMSystem:
		req, err := r.lastRequest()
		if err != nil {
			return err
		}
		if !strings.Contains(req.System(), st.Text) {
			return fmt.Errorf("the model's system prompt %q lacks %q", req.System(), st.Text)
		}
	case LLMMessage, LLMLacks:
		return r.llmHolds(st)
	case ResourceUpdate:
		return r.w.updateResource(ctx, st.Text, st.Names[0])
	case ServerRemove:
		return r.w.remove(ctx, st.Tool, st.Text)
	case Clock:
		r.w.Offset.Add(int64(st.Advance))
		if ids := r.w.appr.Sweep(ctx); len(ids) > 0 {
			if err := r.w.Bot.RefreshMenus(ctx, ids); err != nil {
				return fmt.Errorf("refresh the badges after a sweep: %w", err)
			}
		}
	case Audit:
		rows, err := r.w.st.ListAudit(ctx, store.AuditQuery{Identity: st.Text, Tool: st.Tool, Limit: 1})
		if err != nil {
			return fmt.Errorf("read the audit of %s: %w", st.Tool, err)
		}
		if len(rows) == 0 || rows[0].Decision != st.Names[0] || rows[0].Outcome != st.Names[1] {
			return fmt.Errorf("the last audit row of %s by %s is %+v, want %s/%s", st.Tool, st.Text, rows, st.Names[0], st.Names[1])
		}
	case Hold:
		h, ok := w.w.(channeltest.Holder)
		if !ok {
			return fmt.Errorf("hold: the wallets of this channel cannot hold another credential")
		}
		for k, v := range st.Claims {
			w.claims[k] = v
		}
		return h.Hold(ctx, st.Claims)
	case Receipt:
		return r.receipt(ctx, w, st)
	case Calls:
		runs, _ := r.w.stats()
		for tool, n := range st.Counts {
			if got := runs[tool]; got != n {
				return fmt.Errorf("the demo servers ran %s %d times, want %d", tool, got, n)
			}
		}
	}
	return nil
}

func (r *runner) connect(ctx context.Context, st Step) error {
	w, err := r.h.Connect(ctx, st.Claims)
	if err != nil {
		return fmt.Errorf("connect %s: %w", st.Wallet, err)
	}
	ws := &wallet{name: st.Wallet, w: w, lang: r.lang(st.Text), claims: maps.Clone(st.Claims)}
	r.wallets[st.Wallet] = ws
	if err := w.SendProfile(ctx, st.Claims["name"], st.Text); err != nil {
		return fmt.Errorf("send the profile of %s: %w", st.Wallet, err)
	}
	return nil
}

// lang is the catalog's code for a wallet's language tag, as the bot resolves it.
func (r *runner) lang(tag string) string {
	if code, ok := r.w.cat.Language(tag); ok {
		return code
	}
	return r.w.cat.Default()
}

// next returns the wallet's next message that is not a menu, a profile or receipts (menus are
// kept as the wallet's current menu).
func (w *wallet) next(ctx context.Context) (channeltest.Received, error) {
	if len(w.held) > 0 {
		m := w.held[0]
		w.held = w.held[1:]
		return m, nil
	}
	for {
		m, err := w.w.Next(ctx)
		if err != nil {
			return m, fmt.Errorf("%s waiting for a message: %w", w.name, err)
		}
		switch {
		case m.Menu != nil:
			w.menu = m.Menu
		case m.Profile != nil, m.Receipts != nil:
		case w.keepReceipt(m):
		default:
			return m, nil
		}
	}
}

// keepReceipt keeps m when it offers a credential, by the channel's protocol or as a text
// carrying one (a channel without credential offers).
func (w *wallet) keepReceipt(m channeltest.Received) bool {
	switch {
	case m.Credential != nil:
		w.receipts = append(w.receipts, m.Credential.Credential)
		return true
	case m.Text != nil:
		if vc, ok := channel.CredentialInText(m.Text.Content); ok {
			w.receipts = append(w.receipts, vc)
			return true
		}
	}
	return false
}

func (r *runner) expectProof(ctx context.Context, w *wallet) error {
	got, err := w.next(ctx)
	if err != nil {
		return err
	}
	if got.ProofRequest == nil {
		return fmt.Errorf("%s got %s, want a proof request", w.name, got)
	}
	w.proof = &got
	return nil
}

// expectQuestion takes the next message as a question whose text is text (contains: holds each
// part of text) and whose options are options, when given.
func (r *runner) expectQuestion(ctx context.Context, w *wallet, text []Message, contains bool, options []Message) error {
	got, err := w.next(ctx)
	if err != nil {
		return err
	}
	if !r.questions && got.Text != nil {
		got = numbered(got)
	}
	if got.Question == nil {
		return fmt.Errorf("%s got %s, want a question", w.name, got)
	}
	w.question = &got
	q := got.Question
	for _, m := range text {
		want, err := r.render(w.lang, m)
		if err != nil {
			return err
		}
		if !want.matches(q.Text, contains) && !want.matches(strings.TrimSpace(q.Text+"\n\n"+q.Detail), contains) {
			return fmt.Errorf("%s got question %q (detail %q), want %s", w.name, q.Text, q.Detail, want)
		}
	}
	if len(options) == 0 {
		return nil
	}
	if len(q.Options) != len(options) {
		return fmt.Errorf("%s got options %q, want %d", w.name, q.Options, len(options))
	}
	for i, m := range options {
		want, err := r.render(w.lang, m)
		if err != nil {
			return err
		}
		if !want.matches(q.Options[i], false) {
			return fmt.Errorf("%s got option %d %q, want %s (options %q)", w.name, i+1, q.Options[i], want, q.Options)
		}
	}
	return nil
}

// answer answers the last question (the next message when none is pending) with the option m
// renders to.
func (r *runner) answer(ctx context.Context, w *wallet, m Message) error {
	if w.question == nil {
		if err := r.expectQuestion(ctx, w, nil, false, nil); err != nil {
			return err
		}
	}
	q := w.question
	w.question = nil
	want, err := r.render(w.lang, m)
	if err != nil {
		return err
	}
	for i, o := range q.Question.Options {
		if !want.matches(o, false) {
			continue
		}
		if !r.questions {
			return w.w.SendText(ctx, strconv.Itoa(i+1), "") // the numbered text's answer
		}
		return w.w.Answer(ctx, q.ID, o)
	}
	return fmt.Errorf("%s: no option %s in %q", w.name, want, q.Question.Options)
}

// numbered reads the text a bot sends for a question on a channel without questions: the
// question, then one "N. option" line per option.
func numbered(m channeltest.Received) channeltest.Received {
	lines := strings.Split(m.Text.Content, "\n")
	first := len(lines)
	for first > 0 && numberedRE.MatchString(lines[first-1]) {
		first--
	}
	q := channel.Question{Text: strings.Join(lines[:first], "\n")}
	for i, l := range lines[first:] {
		n, opt, _ := strings.Cut(l, ". ")
		if n != strconv.Itoa(i+1) {
			return m // not a numbered list from 1
		}
		q.Options = append(q.Options, opt)
	}
	if len(q.Options) == 0 {
		return m
	}
	return channeltest.Received{ID: m.ID, Question: &q}
}

var numberedRE = regexp.MustCompile(`^[0-9]+\. `)

// waitMenu waits until the wallet's menu is items; other messages that arrive meanwhile are
// held for the steps that follow (menu refreshes and notices travel separately).
func (r *runner) waitMenu(ctx context.Context, w *wallet, items []MenuItem) error {
	for w.menu == nil || !menuIs(*w.menu, items) {
		if err := w.pull(ctx); err != nil {
			return fmt.Errorf("%s waiting for the menu %v (last %s): %w", w.name, items, describeMenu(w.menu), err)
		}
	}
	return nil
}

// pull takes the wallet's next message while a step waits for state (a menu, a receipt): menus
// and receipts become state, profiles and message receipts are dropped, and every other message
// is held for the steps that follow.
func (w *wallet) pull(ctx context.Context) error {
	m, err := w.w.Next(ctx)
	if err != nil {
		return err
	}
	switch {
	case m.Menu != nil:
		w.menu = m.Menu
	case m.Profile != nil, m.Receipts != nil:
	case w.keepReceipt(m):
	default:
		w.held = append(w.held, m)
	}
	return nil
}

func menuIs(m channel.Menu, items []MenuItem) bool {
	if len(m.Options) != len(items) {
		return false
	}
	for i, o := range m.Options {
		if o.ID != items[i].ID || badge(o.Title) != items[i].Badge {
			return false
		}
	}
	return true
}

var badgeRE = regexp.MustCompile(`^\(([0-9]+)\) `)

// badge is the count a menu title starts with, "(2) Pending approvals", or 0.
func badge(title string) int {
	if m := badgeRE.FindStringSubmatch(title); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

func describeMenu(m *channel.Menu) string {
	if m == nil {
		return "none"
	}
	var b strings.Builder
	for _, o := range m.Options {
		fmt.Fprintf(&b, " %s[%d]", o.ID, badge(o.Title))
	}
	return strings.TrimSpace(b.String())
}

func (r *runner) lastRequest() (agenttest.Request, error) {
	reqs := r.w.llm.Requests()
	if len(reqs) == 0 {
		return agenttest.Request{}, errors.New("the model got no request")
	}
	return reqs[len(reqs)-1], nil
}

// llmHolds checks that a message of the model's last request other than the system prompt holds
// the step's text (LLMMessage), or that no message holds it, the system prompt included
// (LLMLacks).
func (r *runner) llmHolds(st Step) error {
	req, err := r.lastRequest()
	if err != nil {
		return err
	}
	for _, m := range req.Messages {
		if !strings.Contains(m.Content, st.Text) {
			continue
		}
		if st.Kind == LLMLacks {
			return fmt.Errorf("the model's last request has %q in a %s message: %q", st.Text, m.Role, m.Content)
		}
		if m.Role != "system" && m.Role != "developer" {
			return nil
		}
	}
	if st.Kind == LLMLacks {
		return nil
	}
	return fmt.Errorf("no message of the model's last request (but the system prompt) holds %q: %+v", st.Text, req.Messages)
}

// llmResult checks the last tool result the model got.
func (r *runner) llmResult(w *wallet, m Message) error {
	res, err := r.lastToolResult()
	if err != nil {
		return err
	}
	want, err := r.render(w.lang, m)
	if err != nil {
		return err
	}
	if !want.matches(res, m.IsLiteral) {
		return fmt.Errorf("the model got the tool result %q, want %s", res, want)
	}
	return nil
}

// lastToolResult is the last tool result the model got.
func (r *runner) lastToolResult() (string, error) {
	req, err := r.lastRequest()
	if err != nil {
		return "", err
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "tool" {
			return req.Messages[i].Content, nil
		}
	}
	return "", errors.New("the model's last request has no tool result")
}

// capture keeps the value at path of the JSON object in the last tool result the model got as
// $name.
func (r *runner) capture(name string, path []string) error {
	res, err := r.lastToolResult()
	if err != nil {
		return err
	}
	i, j := strings.Index(res, "{"), strings.LastIndex(res, "}")
	var v any
	if i < 0 || j < i || json.Unmarshal([]byte(res[i:j+1]), &v) != nil {
		return fmt.Errorf("capture %s: the tool result %q holds no JSON object", name, res)
	}
	for _, k := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("capture %s: no $.%s in %s", name, strings.Join(path, "."), res)
		}
		if v, ok = obj[k]; !ok {
			return fmt.Errorf("capture %s: no $.%s in %s", name, strings.Join(path, "."), res)
		}
	}
	switch v := v.(type) {
	case string:
		r.vars[name] = v
	case float64, bool:
		r.vars[name] = fmt.Sprint(v)
	default:
		return fmt.Errorf("capture %s: $.%s is not a string, number or boolean in %s", name, strings.Join(path, "."), res)
	}
	return nil
}

// expand replaces each $name captured with its value.
func (r *runner) expand(s string) string {
	return varRE.ReplaceAllStringFunc(s, func(v string) string { return r.vars[v[1:]] })
}

// waitToolErrors waits until the demo servers counted want tool errors (a cancellation reaches
// a server after its user is told).
func (r *runner) waitToolErrors(ctx context.Context, want map[string]int) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		_, got := r.w.stats()
		done := true
		for tool, n := range want {
			if got[tool] > n {
				return fmt.Errorf("the demo servers counted %d tool errors of %s, want %d", got[tool], tool, n)
			}
			done = done && got[tool] == n
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the demo servers counted tool errors %v, want %v", got, want)
		case <-tick.C:
		}
	}
}

// leftovers fails the test when a wallet holds a message the transcript did not expect.
func (r *runner) leftovers() {
	done, cancel := context.WithCancel(context.Background())
	cancel() // take only what has arrived
	for name, w := range r.wallets {
		if m, err := w.next(done); err == nil {
			r.t.Errorf("%s: %s got %s after the last step", r.s.Name, name, m)
		}
	}
}

// expected is a rendered message: an exact text, or a pattern when an argument is a wildcard.
type expected struct {
	desc  string
	exact string
	// re finds the pattern anywhere, full matches it whole.
	re, full *regexp.Regexp
}

func (e expected) String() string { return e.desc }

func (e expected) matches(s string, contains bool) bool {
	switch {
	case e.re != nil && contains:
		return e.re.MatchString(s)
	case e.re != nil:
		return e.full.MatchString(s)
	case contains:
		return strings.Contains(s, e.exact)
	}
	return s == e.exact
}

// render renders m in lang through the bot's catalog (pack strings first).
func (r *runner) render(lang string, m Message) (expected, error) {
	if m.IsLiteral {
		return expected{desc: strconv.Quote(m.Literal), exact: m.Literal}, nil
	}
	key := m.Key
	if key == GreetingKey {
		key = i18n.GreetingKey
	}
	if !r.w.cat.Has(lang, key) {
		return expected{}, fmt.Errorf("unknown message key %s", m.Key)
	}
	const mark = "\x00"
	args := make([]string, 0, 2*len(m.Args))
	wild := false
	name := ""
	for _, a := range m.Args {
		v := a.Value
		if v == Wildcard {
			v, wild = mark, true
		}
		if a.Name == "name" {
			name = v
		}
		args = append(args, a.Name, v)
	}
	text := r.w.cat.T(lang, key, args...)
	if m.Key == GreetingKey {
		text = i18n.Greeting(text, name)
	}
	if m.Suffix != "" {
		text += " " + strings.ReplaceAll(m.Suffix, Wildcard, mark)
		wild = wild || strings.Contains(m.Suffix, Wildcard)
	}
	desc := fmt.Sprintf("%s[%s] %q", m.Key, lang, strings.ReplaceAll(text, mark, "…"))
	if !wild {
		return expected{desc: desc, exact: text}, nil
	}
	parts := strings.Split(text, mark)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	pat := strings.Join(parts, ".*")
	return expected{desc: desc, re: regexp.MustCompile("(?s)" + pat), full: regexp.MustCompile("(?s)^" + pat + "$")}, nil
}

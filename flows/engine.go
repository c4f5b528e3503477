package flows

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/internal/retry"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/menu"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/toolcall"
)

// DefaultMaxText is the longest inbound text (in characters) the bot accepts.
const DefaultMaxText = 8000

// Deps are what an [Engine] works with.
type Deps struct {
	Pack    *packs.Pack
	Catalog *i18n.Catalog
	Store   Store
	// MCP is the pack's tool pool (required; a pack without servers gets an empty pool).
	MCP Tools
	// Model is the LLM; nil when none is configured (the bot then answers commands only).
	Model Model
	// Keyring seals draft credential values; nil disables per-user MCP configuration.
	Keyring *secret.Keyring
	// OAuth starts OAuth sign-ins to user-controlled servers; nil when unavailable.
	OAuth OAuthStarter
	// Approvals runs approval requests; nil: a call that needs approval is answered
	// APPROVAL_REQUIRED and does not run.
	Approvals Approvals
	// Channel says what the wallet channel can show (menus, questions, proof requests, …).
	Channel channel.Capabilities
	Logger  *slog.Logger
	Now     func() time.Time
	// MaxText bounds inbound texts (default DefaultMaxText).
	MaxText int
	// ElicitTimeout bounds how long a server's question waits for the user (default
	// DefaultElicitTimeout); then the question is cancelled.
	ElicitTimeout time.Duration
	// MaxAttachment and MaxAttached bound the text the agent's context holds of one attached
	// resource and of all of a conversation's (defaults DefaultMaxAttachment and
	// DefaultMaxAttached).
	MaxAttachment, MaxAttached int
}

// Engine runs the flows of one pack. It is safe for concurrent use by many connections; the
// caller serializes the events of one connection.
type Engine struct {
	pack    *packs.Pack
	cat     *i18n.Catalog
	st      Store
	pool    Tools
	model   Model
	keyring *secret.Keyring
	oauth   OAuthStarter
	appr    Approvals
	rbac    *rbac.Engine
	calls   *toolcall.Runner
	// dialogs routes the events of each kind of dialog (table.go).
	dialogs map[string]routes
	menu    *menu.Menu
	log     *slog.Logger
	now     func() time.Time
	maxText int
	canAuth bool
	// elicitTimeout bounds a server's question to a user.
	elicitTimeout time.Duration
	caps          channel.Capabilities
	// login is the pack's LoginDigest.
	login string
	// ctxsrc is the pool's prompts and resources (nil: none offered); maxAttachment and
	// maxAttached bound what attachments put in the agent's context (context.go).
	ctxsrc                     ContextSource
	maxAttachment, maxAttached int

	agents agentCache

	menuHasApprovals bool
	countsMu         sync.Mutex
	countsCache      map[string]cachedCounts
}

// New checks d and returns an engine.
func New(d Deps) (*Engine, error) {
	switch {
	case d.Pack == nil:
		return nil, errors.New("flows: no pack")
	case d.Catalog == nil:
		return nil, errors.New("flows: no i18n catalog")
	case d.Store == nil:
		return nil, errors.New("flows: no store")
	case d.MCP == nil:
		return nil, errors.New("flows: no MCP pool")
	}
	// A nil pointer in an interface is no model, no approvals.
	if m, ok := d.Model.(*agent.Model); ok && m == nil {
		d.Model = nil
	}
	if a, ok := d.Approvals.(*approvals.Service); ok && a == nil {
		d.Approvals = nil
	}
	e := &Engine{
		pack: d.Pack, cat: d.Catalog, st: d.Store, pool: d.MCP, model: d.Model, keyring: d.Keyring,
		oauth: d.OAuth, appr: d.Approvals, rbac: rbac.New(d.Pack),
		log: d.Logger, now: d.Now, maxText: d.MaxText, caps: d.Channel,
		canAuth: d.Channel.Proofs && d.Pack.Flows.Authentication.Enabled,
	}
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.maxText <= 0 {
		e.maxText = DefaultMaxText
	}
	if e.elicitTimeout = d.ElicitTimeout; e.elicitTimeout <= 0 {
		e.elicitTimeout = DefaultElicitTimeout
	}
	e.ctxsrc, _ = d.MCP.(ContextSource)
	if p, ok := e.ctxsrc.(*mcp.Pool); ok && p == nil {
		e.ctxsrc = nil
	}
	e.maxAttachment, e.maxAttached = d.MaxAttachment, d.MaxAttached
	if e.maxAttachment <= 0 {
		e.maxAttachment = DefaultMaxAttachment
	}
	if e.maxAttached <= 0 {
		e.maxAttached = DefaultMaxAttached
	}
	e.dialogs = dialogTable()
	e.login = LoginDigest(d.Pack)
	e.calls = toolcall.New(d.Pack, d.MCP, &toolcall.Options{RBAC: e.rbac})
	e.agents.entries = map[string]*toolSet{}
	e.menuHasApprovals = e.appr != nil && hasPolicies(d.Pack)
	e.countsCache = map[string]cachedCounts{}
	e.menu = menu.New(d.Pack, menu.Capabilities{Authenticate: e.canAuth, MCPConfig: e.configAvailable(), Approvals: e.menuHasApprovals,
		Prompts: e.ctxsrc != nil && e.model != nil && len(d.Pack.MCP.Servers) > 0})
	return e, nil
}

// hasPolicies: some enabled server of p has an approval policy.
func hasPolicies(p *packs.Pack) bool {
	for i := range p.MCP.Servers {
		if s := &p.MCP.Servers[i]; s.Enabled && s.ToolAccess != nil && len(s.ToolAccess.Approval) > 0 {
			return true
		}
	}
	return false
}

// configAvailable: the pack has user-controlled servers and their credentials can be kept.
func (e *Engine) configAvailable() bool {
	if !e.hasUserServers() {
		return false
	}
	return (e.keyring != nil && e.pool.UserConfigAvailable()) || e.oauth != nil
}

func (e *Engine) hasUserServers() bool {
	for i := range e.pack.MCP.Servers {
		if s := &e.pack.MCP.Servers[i]; s.Enabled && s.UserControlled() {
			return true
		}
	}
	return false
}

// LLMConfigured reports whether the engine has a language model.
func (e *Engine) LLMConfigured() bool { return e.model != nil }

// turn is one event being handled for one connection.
type turn struct {
	e    *Engine
	conn string
	s    *store.Session
	fx   *Effects
	// eventID names the event (for ids derived from it); journal records external steps.
	eventID string
	journal Journal
	memory  MemoryReader
	conv    Conversation
	// replyTo is the id of the inbound text being answered.
	replyTo string
}

// lang is the session's language (the pack default when none was set).
func (t *turn) lang() string {
	if t.s.Language != "" {
		return t.s.Language
	}
	return t.e.cat.Default()
}

// tr translates key into the session's language.
func (t *turn) tr(key string, args ...string) string { return t.e.cat.T(t.lang(), key, args...) }

// say sends a text (an effect: it goes out once the event is committed).
func (t *turn) say(_ context.Context, text string) error {
	t.send(channel.Outbound{Text: &channel.Text{ID: newMessageID(), Content: text, ReplyTo: t.replyTo}})
	return nil
}

// send adds an outbound message to the effects.
func (t *turn) send(o channel.Outbound) { t.fx.Out = append(t.fx.Out, o) }

// progress tells the user at once what the event is doing while it runs (the translation of
// key): through the conversation, before the event ends and is committed, so best effort — not
// durable, not sent again if the event is handled again. Without a conversation it goes with
// the event's other messages.
func (t *turn) progress(ctx context.Context, key string, args ...string) {
	o := channel.Outbound{Text: &channel.Text{ID: newMessageID(), Content: t.tr(key, args...), ReplyTo: t.replyTo}}
	if t.conv == nil {
		t.send(o)
		return
	}
	if err := t.conv.Send(ctx, o); err != nil {
		t.e.log.WarnContext(ctx, "progress message not delivered", slog.Any("err", err))
	}
}

// sayKey sends the translation of key.
func (t *turn) sayKey(ctx context.Context, key string, args ...string) error {
	return t.say(ctx, t.tr(key, args...))
}

// ask sends a question with unique option texts and returns its id ("" when the channel has no
// questions and the options went as a numbered text).
func (t *turn) ask(ctx context.Context, text string, options []string) (string, error) {
	if !t.e.caps.Questions {
		// A channel without questions gets the options as a numbered text; the answer comes back
		// as text and is matched by number or by text.
		var b strings.Builder
		b.WriteString(text)
		for i, o := range options {
			fmt.Fprintf(&b, "\n%d. %s", i+1, o)
		}
		return "", t.say(ctx, b.String())
	}
	id := newMessageID()
	t.send(channel.Outbound{Question: &channel.Question{ID: id, Text: text, Options: options}})
	return id, nil
}

// caller is the session's user as RBAC sees them.
func (t *turn) caller() rbac.Caller {
	return rbac.Caller{Identity: t.s.Identity, DisplayName: t.s.DisplayName, Roles: t.s.Roles, Authenticated: t.s.Authenticated}
}

// memoryKey is the chat memory's key: the identity once authenticated, the connection before.
func (t *turn) memoryKey() string {
	if t.s.Authenticated && t.s.Identity != "" {
		return "id:" + t.s.Identity
	}
	return "conn:" + t.conn
}

// Handle handles one event of one connection, whose session (in.Session) it may change, and
// returns what is to be done. It sends nothing and writes no session: the caller commits the
// effects and the session with the event. An error wrapping store.ErrUnavailable means the
// event should be handled again later (nothing of it is to be committed); any other error means
// it could not be handled completely (the caller logs it; the effects say what the user was
// told).
func (e *Engine) Handle(ctx context.Context, in Input) (Effects, error) {
	var fx Effects
	ev, s := in.Event, in.Session
	t := &turn{e: e, conn: ev.Connection(), s: s, fx: &fx, eventID: in.EventID, journal: in.Journal, memory: in.Memory, conv: in.Conversation}
	if t.journal == nil {
		t.journal = nopJournal{}
	}
	if t.memory == nil {
		t.memory = e.st
	}
	if t.eventID == "" {
		t.eventID = newMessageID()
	}
	if s.State == "" {
		s.State = store.StateChat
	}
	if len(in.Interrupted) > 0 {
		return fx, t.interrupted(ctx, in.Interrupted)
	}
	err := t.handle(ctx, ev)
	return fx, err
}

// Revisit checks session s against the running pack when the bot itself asks (a menu refresh,
// a pack swapped in): a login the pack no longer accepts is logged out, with a notice.
func (e *Engine) Revisit(ctx context.Context, s *store.Session) (Effects, error) {
	var fx Effects
	if s.CreatedAt.IsZero() {
		return fx, nil
	}
	t := &turn{e: e, conn: s.ConnectionID, s: s, fx: &fx, eventID: newMessageID(), journal: nopJournal{}, memory: e.st}
	err := t.checkLogin(ctx)
	return fx, err
}

// handle dispatches one event. The first event of a connection the bot has no session for is
// its arrival, whether or not the channel reported ConnectionReady first.
func (t *turn) handle(ctx context.Context, ev channel.Event) error {
	if _, closed := ev.(channel.ConnectionClosed); closed {
		t.fx.DeleteSession = true
		t.fx.ClearMemory = append(t.fx.ClearMemory, "conn:"+t.conn)
		return nil
	}
	if _, ready := ev.(channel.ConnectionReady); !ready && t.s.CreatedAt.IsZero() {
		if err := t.connectionReady(ctx, channel.ConnectionReady{Conn: t.conn}); err != nil {
			return err
		}
	}
	if err := t.checkLogin(ctx); err != nil {
		return err
	}
	switch ev := ev.(type) {
	case channel.ConnectionReady:
		return t.connectionReady(ctx, ev)
	case channel.ProfileReceived:
		return t.profile(ctx, ev)
	case channel.MenuRequested:
		return nil // the bot re-sends the menu after every event it was asked for
	case channel.MenuSelected:
		return t.menuSelected(ctx, ev)
	case channel.QuestionAnswered:
		return t.answered(ctx, ev.QuestionID, ev.Response)
	case channel.PresentationResult:
		return t.proof(ctx, ev)
	case channel.TextReceived:
		t.replyTo = ev.MessageID
		return t.text(ctx, ev.Content)
	}
	return fmt.Errorf("unhandled event %T", ev)
}

// proof routes the outcome of a proof request to the dialog waiting for it (table.go).
func (t *turn) proof(ctx context.Context, p channel.PresentationResult) error {
	if d := t.dialog(); d != nil {
		if r := t.e.dialogs[d.kind()]; r.proof != nil {
			return r.proof(t, ctx, d, p)
		}
	}
	t.e.log.InfoContext(ctx, "presentation for no pending request ignored", slog.String("connection", logid.Conn(t.conn)),
		slog.String("request", p.RequestID), slog.String("outcome", string(p.Outcome)))
	return nil
}

// text routes an inbound text (table.go): a field's value, an answer typed for a question sent
// as text, a command, the dialog's text handler, or chat.
func (t *turn) text(ctx context.Context, content string) error {
	if n := utf8.RuneCountInString(content); n > t.e.maxText {
		return t.sayKey(ctx, "MESSAGE_TOO_LONG", "size", fmt.Sprint(n), "limit", fmt.Sprint(t.e.maxText))
	}
	content = strings.TrimSpace(content)
	if content == "" {
		return nil
	}
	d := t.dialog()
	var r routes
	if d != nil {
		r = t.e.dialogs[d.kind()]
	}
	switch {
	case r.value != nil:
		// A value for a credential field: never a command, never logged, never in memory.
		return r.value(t, ctx, d, content)
	case d != nil && d.open().ByText:
		if done, err := t.answerByText(ctx, d, content); done || err != nil {
			return err
		}
	}
	if strings.HasPrefix(content, "/") {
		return t.command(ctx, content)
	}
	if r.text != nil {
		return r.text(t, ctx, d, content)
	}
	return t.chat(ctx, content)
}

// Menu returns the menu for session s.
func (e *Engine) Menu(ctx context.Context, s store.Session) channel.Menu {
	st := menu.State{Authenticated: s.Authenticated, Configuring: s.State == store.StateMCPConfig, Name: s.DisplayName}
	if st.Name == "" {
		st.Name = s.Identity
	}
	caller := rbac.Caller{Identity: s.Identity, DisplayName: s.DisplayName, Roles: s.Roles, Authenticated: s.Authenticated}
	st.Counts = e.counts(ctx, caller)
	st.Prompts = e.hasPrompts(caller)
	lang := s.Language
	if lang == "" {
		lang = e.cat.Default()
	}
	return e.menu.Build(st, lang, e.cat)
}

// counts are c's badge counts (zero without approvals or on a store error, which is logged).
// They are cached per identity and role set for countsTTL, and dropped at once by
// InvalidateCounts when a request of theirs changes, so that a chat message does not cost two
// count queries.
func (e *Engine) counts(ctx context.Context, c rbac.Caller) menu.Counts {
	if e.appr == nil || !c.Authenticated || !e.menuHasApprovals {
		return menu.Counts{}
	}
	key := c.Identity + "\x00" + strings.Join(c.Roles, ",")
	now := e.now()
	e.countsMu.Lock()
	if cc, ok := e.countsCache[c.Identity]; ok && cc.key == key && now.Sub(cc.at) < countsTTL {
		e.countsMu.Unlock()
		return cc.counts
	}
	e.countsMu.Unlock()
	// The store restarting: wait for it (about 6 s at most, as a completion would), rather than
	// send a menu whose badges are gone — nothing would send the right one until the next change.
	var mine, decidable int
	err := retry.Policy{First: 50 * time.Millisecond, Within: 7 * time.Second,
		Retryable: func(err error) bool { return errors.Is(err, store.ErrUnavailable) }}.Do(ctx, func(ctx context.Context) error {
		var err error
		mine, decidable, err = e.appr.Counts(ctx, c)
		return err
	})
	if ctx.Err() != nil {
		return menu.Counts{}
	}
	if err != nil {
		e.log.WarnContext(ctx, "badge counts", slog.String("identity", c.Identity), slog.Any("err", err))
		return menu.Counts{}
	}
	counts := menu.Counts{ApprovalRequests: mine, PendingApprovals: decidable}
	e.countsMu.Lock()
	if len(e.countsCache) >= maxCachedCounts {
		clear(e.countsCache)
	}
	e.countsCache[c.Identity] = cachedCounts{key: key, at: now, counts: counts}
	e.countsMu.Unlock()
	return counts
}

// InvalidateCounts forgets the cached badge counts of identities (their requests changed).
func (e *Engine) InvalidateCounts(identities []string) {
	e.countsMu.Lock()
	defer e.countsMu.Unlock()
	for _, id := range identities {
		delete(e.countsCache, id)
	}
}

// countsTTL bounds how stale a badge count may be when the change happened on another replica.
const (
	countsTTL       = 30 * time.Second
	maxCachedCounts = 10_000
)

type cachedCounts struct {
	key    string
	at     time.Time
	counts menu.Counts
}

// agentCache holds the tool sets offered to the LLM, by role set, tool-catalog version and the
// user-controlled servers the user has configured.
type agentCache struct {
	mu      sync.Mutex
	version uint64
	entries map[string]*toolSet
}

// maxCachedToolSets bounds the cache; it is cleared when full (role sets are few in practice).
const maxCachedToolSets = 1024

// Render is m in lang (the pack default when empty).
func (e *Engine) Render(lang string, m i18n.Message) string { return m.In(e.cat, lang) }

// Text is the text of key in lang (the pack default when empty), for notices sent outside a
// conversation turn.
func (e *Engine) Text(lang, key string, args ...string) string {
	if lang == "" {
		lang = e.cat.Default()
	}
	return e.cat.T(lang, key, args...)
}

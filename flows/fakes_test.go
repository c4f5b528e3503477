package flows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// The flows' own tests run the engine against in-memory fakes of the interfaces it declares
// (deps.go); the bot's tests run it against the real store, pool and approvals.

const unitPack = `
metadata: {id: unit, displayName: unit bank, description: a test bank, defaultLanguage: en}
languages:
  en:
    greetingMessage: "Hello {userName}! This is the unit bank."
  es:
    greetingMessage: "¡Hola {userName}! Este es el banco."
llm: {provider: openai, model: m, agentPrompt: "Be brief."}
memory: {window: 2}
flows:
  authentication:
    enabled: true
    userIdentityAttribute: email
    rolesAttribute: roles
    defaultRole: employee
    issuerServiceDid: did:web:issuer.example
    adminUsers: ["root@acme.corp"]
mcp:
  servers:
    - name: bank
      url: "http://bank.invalid/mcp"
      toolAccess:
        default: none
        roles:
          guest: [get_exchange_rate]
          employee: [get_exchange_rate, list_transfers, send_money]
          finance-manager: [get_exchange_rate, send_money]
        approval:
          - tools: [send_money]
            approvers: [finance-manager]
    - name: payments
      url: "http://payments.invalid/mcp"
      toolAccess:
        default: none
        roles:
          employee: [create_invoice, get_exchange_rate]
          finance-manager: [create_invoice]
        approval:
          - tools: [create_invoice]
            approvers: [finance-manager]
            quorum: 2
            allowSelfApproval: true
    - name: vault
      url: "http://vault.invalid/mcp"
      accessMode: user-controlled
      userConfig:
        fields:
          - name: account
            type: text
            label: {en: "your account name"}
          - name: token
            type: secret
            label: {en: "your vault token"}
            headerTemplate: "Bearer {value}"
    - name: hr
      url: "http://hr.invalid/mcp"
      accessMode: user-controlled
      authentication: {mode: oauth2}
`

const unitKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// fakeStore keeps the directory, the credential rows and the memory in maps.
type fakeStore struct {
	mu     sync.Mutex
	ids    map[string]store.Identity
	creds  map[store.CredentialKey]store.Credential
	memory map[string][]store.MemoryEntry
	putErr error // PutIdentity's error
	memErr error // LoadMemory's error
	getErr error // GetCredential's error
}

func newFakeStore() *fakeStore {
	return &fakeStore{ids: map[string]store.Identity{}, creds: map[store.CredentialKey]store.Credential{}, memory: map[string][]store.MemoryEntry{}}
}

func (s *fakeStore) PutIdentity(_ context.Context, id store.Identity) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.putErr != nil {
		return s.putErr
	}
	s.ids[id.Identity] = id
	return nil
}

func (s *fakeStore) GetCredential(_ context.Context, k store.CredentialKey) (store.Credential, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.getErr != nil {
		return store.Credential{}, s.getErr
	}
	c, ok := s.creds[k]
	if !ok {
		return c, store.ErrNotFound
	}
	return c, nil
}

func (s *fakeStore) PutCredential(_ context.Context, c store.Credential) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creds[store.CredentialKey{Identity: c.Identity, Server: c.Server, Kind: c.Kind}] = c
	return nil
}

func (s *fakeStore) DeleteCredentials(_ context.Context, identity, server, kind string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.creds {
		if k.Identity == identity && k.Server == server && (kind == "" || k.Kind == kind) {
			delete(s.creds, k)
		}
	}
	return nil
}

func (s *fakeStore) LoadMemory(_ context.Context, key string, limit int) ([]store.MemoryEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.memErr != nil {
		return nil, s.memErr
	}
	m := s.memory[key]
	if limit > 0 && len(m) > limit {
		m = m[len(m)-limit:]
	}
	return slices.Clone(m), nil
}

// fakeTools is a tool pool with a fixed catalog whose calls answer from maps.
type fakeTools struct {
	mu         sync.Mutex
	cat        mcp.Catalog
	results    map[string]mcp.Result // by server/tool
	errs       map[string]error      // by server/tool
	calls      []mcp.Call
	status     map[string]mcp.Status // by identity/server
	statusErr  error
	confErr    error
	configured map[string]map[string]string // by identity/server: the values
	forgotten  []string
	userConfig bool
	// during, when set, runs inside each call (a server asking the user, a slow call).
	during func(ctx context.Context, c mcp.Call) error
}

func newFakeTools() *fakeTools {
	schema := []byte(`{"type":"object","properties":{"amount":{"type":"number"},"recipient":{"type":"string"}}}`)
	obj := []byte(`{"type":"object"}`)
	return &fakeTools{
		cat: mcp.Catalog{Version: 1, Tools: []mcp.Tool{
			{Server: "bank", Name: "get_exchange_rate", Description: "Exchange rate.\nSecond line.", InputSchema: obj},
			{Server: "bank", Name: "list_transfers", Description: "Transfers.", InputSchema: obj},
			{Server: "bank", Name: "send_money", Description: "Send money.", InputSchema: schema},
			{Server: "payments", Name: "create_invoice", Description: "Invoice.", InputSchema: obj},
			{Server: "payments", Name: "get_exchange_rate", Description: "Rate too.", InputSchema: obj},
			{Server: "vault", Name: "read_secret", Description: "Reads.", InputSchema: obj},
		}},
		results:    map[string]mcp.Result{},
		errs:       map[string]error{},
		status:     map[string]mcp.Status{},
		configured: map[string]map[string]string{},
		userConfig: true,
	}
}

func (p *fakeTools) Catalog() (mcp.Catalog, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cat, make(chan struct{})
}

func (p *fakeTools) Call(ctx context.Context, c mcp.Call) (mcp.Result, error) {
	p.mu.Lock()
	p.calls = append(p.calls, c)
	key := c.Server + "/" + c.Tool
	res, ok := p.results[key]
	err := p.errs[key]
	during := p.during
	p.mu.Unlock()
	if during != nil {
		if derr := during(ctx, c); derr != nil {
			return mcp.Result{}, derr
		}
	}
	if err != nil {
		return mcp.Result{}, err
	}
	if !ok {
		res = mcp.Result{Text: "result of " + c.Tool}
	}
	res.Elapsed = time.Millisecond
	return res, nil
}

func (p *fakeTools) Status(_ context.Context, identity, server string) (mcp.Status, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.statusErr != nil {
		return "", p.statusErr
	}
	if st, ok := p.status[identity+"/"+server]; ok {
		return st, nil
	}
	return mcp.StatusNeedsAuthentication, nil
}

func (p *fakeTools) Configure(_ context.Context, identity, server string, values map[string]secret.Value) ([]mcp.Tool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.confErr != nil {
		return nil, p.confErr
	}
	plain := map[string]string{}
	for k, v := range values {
		plain[k] = v.Reveal()
	}
	p.configured[identity+"/"+server] = plain
	p.status[identity+"/"+server] = mcp.StatusSuccess
	return p.cat.Server(server), nil
}

func (p *fakeTools) Forget(_ context.Context, identity, server string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgotten = append(p.forgotten, identity+"/"+server)
	delete(p.status, identity+"/"+server)
	return nil
}

func (p *fakeTools) UserConfigAvailable() bool { return p.userConfig }

func (p *fakeTools) callCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

// fakeApprovals keeps requests in a map, with the service's rules for votes and cancels.
type fakeApprovals struct {
	mu        sync.Mutex
	byID      map[string]store.Approval
	submitted []approvals.Request
	submitErr error
	countsErr error
	listErr   error
	// onApproved runs when a request reaches its quorum (the approved call).
	onApproved func(ctx context.Context, a store.Approval)
}

func newFakeApprovals() *fakeApprovals { return &fakeApprovals{byID: map[string]store.Approval{}} }

func (f *fakeApprovals) submit(r approvals.Request) (store.Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.submitErr != nil {
		return store.Approval{}, f.submitErr
	}
	f.submitted = append(f.submitted, r)
	if a, ok := f.byID[r.ID]; ok {
		return a, nil
	}
	a := store.Approval{ID: r.ID, Server: r.Server, Tool: r.Tool, Arguments: r.Arguments, Requester: r.Caller.Identity,
		RequesterName: r.Caller.DisplayName, ApproverRoles: r.Policy.Approvers, Quorum: max(r.Policy.Quorum, 1),
		AllowSelf: r.Policy.AllowSelfApproval, Status: store.ApprovalPending, Fingerprint: "fp-" + r.ID,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), ExpiresAt: time.Date(2026, 1, 2, 4, 4, 0, 0, time.UTC)}
	f.byID[a.ID] = a
	return a, nil
}

func (f *fakeApprovals) list(keep func(store.Approval) bool) ([]store.Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []store.Approval
	for _, a := range f.byID {
		if a.Status == store.ApprovalPending && keep(a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b store.Approval) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (f *fakeApprovals) Mine(_ context.Context, requester string) ([]store.Approval, error) {
	return f.list(func(a store.Approval) bool { return a.Requester == requester })
}

func (f *fakeApprovals) Decidable(_ context.Context, c rbac.Caller) ([]store.Approval, error) {
	return f.list(func(a store.Approval) bool {
		return rbac.HoldsAny(c.Roles, a.ApproverRoles) && (a.Requester != c.Identity || a.AllowSelf)
	})
}

func (f *fakeApprovals) Get(_ context.Context, id string) (store.Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.byID[id]
	if !ok {
		return a, store.ErrNotFound
	}
	return a, nil
}

func (f *fakeApprovals) cancel(requester, id string) (store.Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.byID[id]
	switch {
	case !ok || a.Requester != requester:
		return a, store.ErrNotFound
	case a.Status != store.ApprovalPending:
		return a, store.ErrAlreadyResolved
	}
	a.Status = store.ApprovalCancelled
	f.byID[id] = a
	return a, nil
}

func (f *fakeApprovals) decide(ctx context.Context, c rbac.Caller, id string, approve bool) (store.Approval, error) {
	f.mu.Lock()
	a, ok := f.byID[id]
	switch {
	case !ok:
		f.mu.Unlock()
		return a, store.ErrNotFound
	case !rbac.HoldsAny(c.Roles, a.ApproverRoles):
		f.mu.Unlock()
		return a, approvals.ErrNotApprover
	case c.Identity == a.Requester && !a.AllowSelf:
		f.mu.Unlock()
		return a, approvals.ErrOwnRequest
	case a.Status != store.ApprovalPending:
		f.mu.Unlock()
		return a, store.ErrAlreadyResolved
	}
	for _, v := range a.Votes {
		if v.Approver == c.Identity {
			f.mu.Unlock()
			return a, store.ErrAlreadyVoted
		}
	}
	v := store.Vote{Approver: c.Identity, Decision: store.VoteReject}
	if approve {
		v.Decision = store.VoteApprove
	}
	a.Votes = append(slices.Clone(a.Votes), v)
	switch {
	case !approve:
		a.Status = store.ApprovalRejected
	case approvesOf(a) >= a.Quorum:
		a.Status = store.ApprovalApproved
	}
	f.byID[id] = a
	run := f.onApproved
	f.mu.Unlock()
	if a.Status == store.ApprovalApproved && run != nil {
		run(ctx, a)
	}
	return a, nil
}

// Submit, Cancel and Decide say that the requester's badges and the caller's changed when they
// changed something.
func (f *fakeApprovals) Submit(_ context.Context, r approvals.Request) (approvals.Result, error) {
	a, err := f.submit(r)
	return result(a, err, a.Requester), err
}

func (f *fakeApprovals) Cancel(_ context.Context, requester, id string) (approvals.Result, error) {
	a, err := f.cancel(requester, id)
	return result(a, err, requester), err
}

func (f *fakeApprovals) Decide(ctx context.Context, c rbac.Caller, id string, approve bool) (approvals.Result, error) {
	a, err := f.decide(ctx, c, id, approve)
	return result(a, err, a.Requester, c.Identity), err
}

func result(a store.Approval, err error, changed ...string) approvals.Result {
	if err != nil {
		return approvals.Result{Approval: a}
	}
	return approvals.Result{Approval: a, Badges: changed}
}

func (f *fakeApprovals) Summary(a store.Approval) string { return "summary of " + string(a.Arguments) }

func (f *fakeApprovals) Counts(_ context.Context, c rbac.Caller) (int, int, error) {
	if f.countsErr != nil {
		return 0, 0, f.countsErr
	}
	mine, _ := f.Mine(context.Background(), c.Identity)
	decidable, _ := f.Decidable(context.Background(), c)
	return len(mine), len(decidable), nil
}

// fakeModel plays the LLM: it calls the tools of calls (through the executor when offered,
// else as a refused call), then answers reply followed by what the tools returned.
type fakeModel struct {
	mu    sync.Mutex
	calls []agent.ToolCall
	reply string
	err   error
	turns []agent.Turn
}

func (m *fakeModel) Run(ctx context.Context, t agent.Turn, exec agent.Executor) (agent.Reply, error) {
	m.mu.Lock()
	m.turns = append(m.turns, t)
	calls, reply, err := m.calls, m.reply, m.err
	m.mu.Unlock()
	var results []string
	for _, c := range calls {
		offered := slices.ContainsFunc(t.Tools, func(d agent.ToolDef) bool { return d.Name == c.Name })
		if !offered {
			results = append(results, t.Refused(ctx, c))
			continue
		}
		out, eerr := exec(ctx, c)
		if eerr != nil {
			return agent.Reply{}, fmt.Errorf("tool %s: %w", c.Name, eerr)
		}
		results = append(results, out)
	}
	if err != nil {
		return agent.Reply{LLMCalls: 1}, err
	}
	return agent.Reply{Text: strings.TrimSpace(reply + " " + strings.Join(results, " | ")), LLMCalls: 1}, nil
}

// fakeJournal records the steps begun; err fails them.
type fakeJournal struct {
	steps []Step
	err   error
}

func (j *fakeJournal) Begin(_ context.Context, s Step) error {
	if j.err != nil {
		return j.err
	}
	j.steps = append(j.steps, s)
	return nil
}

// fakeConv is the conversation of the event being handled: what is sent is kept, and Next
// hands out the queued events that take accepts (the others stay).
type fakeConv struct {
	mu      sync.Mutex
	sent    []channel.Outbound
	queue   []channel.Event
	arrived chan struct{}
	sendErr error
}

func newFakeConv(evs ...channel.Event) *fakeConv {
	return &fakeConv{queue: evs, arrived: make(chan struct{}, 1)}
}

func (c *fakeConv) Send(_ context.Context, msgs ...channel.Outbound) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sendErr != nil {
		return c.sendErr
	}
	c.sent = append(c.sent, msgs...)
	return nil
}

func (c *fakeConv) push(ev channel.Event) {
	c.mu.Lock()
	c.queue = append(c.queue, ev)
	c.mu.Unlock()
	select {
	case c.arrived <- struct{}{}:
	default:
	}
}

func (c *fakeConv) Next(ctx context.Context, take func(channel.Event) bool) (channel.Event, error) {
	for {
		c.mu.Lock()
		for i, ev := range c.queue {
			if take(ev) {
				c.queue = slices.Delete(c.queue, i, i+1)
				c.mu.Unlock()
				return ev, nil
			}
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.arrived:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (c *fakeConv) texts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return outTexts(c.sent)
}

// fixture is an engine on the fakes, and one connection's session.
type fixture struct {
	t     *testing.T
	e     *Engine
	st    *fakeStore
	tools *fakeTools
	appr  *fakeApprovals
	model *fakeModel
	j     *fakeJournal
	conv  Conversation
	s     store.Session
	n     int
	now   time.Time
}

type fixtureOptions struct {
	caps      *channel.Capabilities
	noModel   bool
	noAppr    bool
	noKeyring bool
	oauth     OAuthStarter
	pack      string // instead of unitPack
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	src := o.pack
	if src == "" {
		src = unitPack
	}
	p, err := packs.Parse("pack.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := i18n.New(p)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: newFakeStore(), tools: newFakeTools(), appr: newFakeApprovals(), model: &fakeModel{reply: "hi there"},
		j: &fakeJournal{}, now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	caps := channel.Capabilities{Menus: true, Questions: true, Proofs: true, Profiles: true, Invitations: true}
	if o.caps != nil {
		caps = *o.caps
	}
	d := Deps{Pack: p, Catalog: cat, Store: f.st, MCP: f.tools, Model: f.model, Approvals: f.appr, Channel: caps, OAuth: o.oauth,
		Now: func() time.Time { return f.now }, ElicitTimeout: time.Second}
	if o.noModel {
		d.Model = nil
	}
	if o.noAppr {
		d.Approvals = nil
	}
	if !o.noKeyring {
		key, err := secret.ParseKey(unitKey)
		if err != nil {
			t.Fatal(err)
		}
		if d.Keyring, err = secret.NewKeyring(key); err != nil {
			t.Fatal(err)
		}
	}
	if f.e, err = New(d); err != nil {
		t.Fatal(err)
	}
	f.s = store.Session{ConnectionID: "conn-1", CreatedAt: f.now}
	return f
}

// handle handles ev for the fixture's session and returns the effects; err is the engine's.
func (f *fixture) handle(ev channel.Event) (Effects, error) {
	f.t.Helper()
	f.n++
	return f.e.Handle(f.t.Context(), Input{Session: &f.s, Event: ev, EventID: fmt.Sprintf("conn-1/%d", f.n), Journal: f.j, Conversation: f.conv})
}

// do handles ev, which must not fail, and returns the texts and questions it sends.
func (f *fixture) do(ev channel.Event) []string {
	f.t.Helper()
	fx, err := f.handle(ev)
	if err != nil {
		f.t.Fatalf("%T: %v", ev, err)
	}
	return outTexts(fx.Out)
}

func (f *fixture) say(text string) []string {
	f.t.Helper()
	return f.do(channel.TextReceived{Conn: "conn-1", MessageID: "m", Content: text})
}

// run runs fn in a turn of the fixture's session (an action the menu does not offer now) and
// returns the texts it sends.
func (f *fixture) run(fn func(t *turn, ctx context.Context) error) []string {
	f.t.Helper()
	var fx Effects
	t := &turn{e: f.e, conn: "conn-1", s: &f.s, fx: &fx, eventID: "run", journal: f.j, memory: f.st}
	if err := fn(t, f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
	return outTexts(fx.Out)
}

// tr is key in English.
func (f *fixture) tr(key string, args ...string) string { return f.e.Text("en", key, args...) }

// want fails unless got is exactly the texts of keys (key, then its args, per entry).
func (f *fixture) want(got []string, keys ...[]string) {
	f.t.Helper()
	var want []string
	for _, k := range keys {
		want = append(want, f.tr(k[0], k[1:]...))
	}
	if !slices.Equal(got, want) {
		f.t.Fatalf("got %q\nwant %q", got, want)
	}
}

func key(k string, args ...string) []string { return append([]string{k}, args...) }

// login makes the session's user identity with roles, as a verified presentation does.
func (f *fixture) login(identity string, roles ...string) {
	f.t.Helper()
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "authenticate"})
	var d *authWait
	if d, _ = f.e.dialogOf(f.s).(*authWait); d == nil {
		f.t.Fatal("no proof request pending")
	}
	f.do(channel.PresentationResult{Conn: "conn-1", RequestID: d.Request, Outcome: channel.Verified,
		Claims: map[string]any{"email": identity, "roles": strings.Join(roles, ","), "name": strings.ToUpper(identity[:1]) + identity[1:strings.Index(identity, "@")]}})
	if !f.s.Authenticated || f.s.Identity != identity {
		f.t.Fatalf("not logged in: %+v", f.s)
	}
}

// answer answers the open question with the option whose text is text.
func (f *fixture) answer(text string) []string {
	f.t.Helper()
	d := f.e.dialogOf(f.s)
	if d == nil || d.open().ID == "" {
		f.t.Fatalf("no open question (session %s)", f.s.Flow)
	}
	return f.do(channel.QuestionAnswered{Conn: "conn-1", MessageID: "a", QuestionID: d.open().ID, Response: text})
}

// options are the texts of the open question's options.
func (f *fixture) options() []string {
	f.t.Helper()
	d := f.e.dialogOf(f.s)
	if d == nil {
		f.t.Fatalf("no dialog")
	}
	var out []string
	for _, o := range d.open().Options {
		out = append(out, o.Text)
	}
	return out
}

func outTexts(out []channel.Outbound) []string {
	var got []string
	for _, o := range out {
		switch {
		case o.Text != nil:
			got = append(got, o.Text.Content)
		case o.Question != nil:
			got = append(got, o.Question.Text)
		}
	}
	return got
}

var errBoom = errors.New("boom")

func replaceOnce(s, old, new string) string {
	i := strings.Index(s, old)
	if i < 0 {
		panic("replaceOnce: " + old)
	}
	return s[:i] + new + s[i+len(old):]
}

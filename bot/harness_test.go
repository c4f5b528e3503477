package bot_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/mcp/oauth/oauthtest"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
	"github.com/packbot/packbot/telemetry"
)

// testKey is the MCP_CONFIG_ENCRYPTION_KEY of the tests.
const testKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// vaultToken is the token the vault server accepts.
const vaultToken = "vault-token-s3cr3t-7f1c"

// testPack is the pack of the bot tests: a bank (admin-controlled, roles and an approval policy)
// and a vault (user-controlled, two fields, the token a secret), both demo MCP servers over
// loopback HTTP.
const testPack = `
metadata: {id: bot-test, displayName: test bank, defaultLanguage: en}
languages:
  en:
    greetingMessage: "Hello {userName}! This is the test bank."
  es:
    greetingMessage: "¡Hola {userName}! Este es el banco de prueba."
    strings:
      AUTH_DECLINED: "Has rechazado compartir tu credencial (texto del pack)."
llm: {provider: openai, model: scripted, baseUrl: "${LLM_URL}"}
memory: {window: 2}
flows:
  authentication:
    enabled: true
    required: ${AUTH_REQ:-false}
    userIdentityAttribute: email
    rolesAttribute: roles
    defaultRole: employee
    issuerServiceDid: did:web:issuer.example
    adminUsers: ["@Root@acme.corp"]
mcp:
  servers:
    - name: bank
      transport: streamable-http
      url: "${BANK_URL}"
      toolAccess:
        default: none
        roles:
          guest: [get_exchange_rate]
          employee: [get_exchange_rate, list_transfers, send_money]
          finance: [get_exchange_rate, get_balances, list_transfers]
          finance-manager: [get_exchange_rate, send_money]
        approval:
          - tools: [send_money]
            approvers: [finance-manager]
            timeoutMinutes: 30
    - name: payments
      url: "${BANK_URL}"
      allowlist: [create_invoice]
      toolAccess:
        default: none
        roles:
          employee: [create_invoice]
          finance-manager: [create_invoice]
        approval:
          - tools: [create_invoice]
            approvers: [finance-manager]
            quorum: 2
            allowSelfApproval: false
    - name: vault
      transport: streamable-http
      url: "${VAULT_URL}"
      accessMode: user-controlled
      userConfig:
        fields:
          - name: account
            type: text
            label: {en: "your account name", es: "el nombre de tu cuenta"}
            headerName: X-Account
            headerTemplate: "{value}"
          - name: token
            type: secret
            label: {en: "your vault token", es: "tu token del vault"}
            headerTemplate: "Bearer {value}"
`

// harness is a bot on the memory channel, with real MCP servers, a scripted LLM and a real
// store.
type harness struct {
	t     testing.TB
	ch    *channeltest.Memory
	st    store.Store
	llm   *agenttest.Server
	bank  *demoserver.Server
	vault *demoserver.Server
	pool  *mcp.Pool
	appr  *approvals.Service
	as    *oauthtest.AuthServer
	// offset moves the approvals' clock (expiry tests).
	offset atomic.Int64
	bot    *bot.Bot
	cat    *i18n.Catalog
	logs   *syncBuffer
	stop   func()
	kr     *secret.Keyring
	// hook runs before each event is handled (BeforeHandle): a test makes it panic.
	hook                    func(channel.Event)
	announced               bool
	maxAttempts             int
	drain, idle, acceptWait time.Duration
	// restored are the wallets of harnessOptions.restore.
	restored map[string]*channeltest.MemoryWallet
	tel      *telemetry.Telemetry
	// deps are the flows engine's; env the pack's placeholders (a test swaps in another pack).
	deps flows.Deps
	env  map[string]string
}

// engineFor builds a flows engine for another pack (src, with the harness's placeholders) over
// the harness's pool, store and approvals.
func (h *harness) engineFor(src string) *flows.Engine {
	h.t.Helper()
	p, err := packs.Parse("swapped.yaml", []byte(src), packs.MapEnv(h.env))
	if err != nil {
		h.t.Fatal(err)
	}
	d := h.deps
	d.Pack = p
	if d.Catalog, err = i18n.New(p); err != nil {
		h.t.Fatal(err)
	}
	e, err := flows.New(d)
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

type harnessOptions struct {
	postgres     bool
	noLLM        bool
	authRequired bool
	// store, when set, is used instead of a new one (a restarted bot on the same database).
	store store.Store
	// wrap, when set, wraps the store (to count calls).
	wrap func(store.Store) store.Store
	// oauth adds the server "hr": user-controlled, OAuth 2.1 sign-in at an in-process
	// authorization server, with the real oauth.Manager and its callback.
	oauth bool
	// hook runs before each event is handled.
	hook func(channel.Event)
	// bankMiddleware wraps the bank MCP server's handler (to hold a call).
	bankMiddleware func(http.Handler) http.Handler
	// maxAttempts is the bot's MaxAttempts (0: its default).
	maxAttempts int
	// vaultMiddleware wraps the vault MCP server's handler.
	vaultMiddleware func(http.Handler) http.Handler
	// restore are wallets of connections made before (a restart), by connection id, with their
	// claims: registered on the new channel before the bot starts.
	restore map[string]map[string]string
	// drain is the bot's DrainTimeout (0: its default).
	drain time.Duration
	// idle is the bot's Idle (0: its default).
	idle time.Duration
	// quiet discards the logs (a test that makes thousands of events, or measures the heap).
	quiet bool
	// acceptWait is the bot's AcceptWait (0: its default).
	acceptWait time.Duration
	// announced makes the channel a connection announcer (as the VS Agent's is).
	announced bool
	// tel, when set, observes the bot, the model, the pool and the approvals.
	tel *telemetry.Telemetry
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func openStore(t testing.TB, postgres bool) store.Store {
	t.Helper()
	ctx := context.Background()
	var st store.Store
	var err error
	if postgres {
		st, err = sqlstore.OpenPostgres(ctx, storetest.PostgresDSN(t), nil)
	} else {
		st, err = sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "bot.db"), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newHarness(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, logs: &syncBuffer{}, hook: o.hook, announced: o.announced, tel: o.tel, maxAttempts: o.maxAttempts, drain: o.drain, idle: o.idle, acceptWait: o.acceptWait, restored: map[string]*channeltest.MemoryWallet{}}
	h.st = o.store
	if h.st == nil {
		h.st = openStore(t, o.postgres)
	}
	if o.wrap != nil {
		h.st = o.wrap(h.st)
	}
	h.llm = agenttest.New(t)
	h.bank = demoserver.New(&demoserver.Options{Name: "bank"})
	var bankHandler http.Handler = h.bank.Handler()
	if o.bankMiddleware != nil {
		bankHandler = o.bankMiddleware(bankHandler)
	}
	bankSrv := httptest.NewServer(bankHandler)
	t.Cleanup(bankSrv.Close)
	h.vault = demoserver.New(&demoserver.Options{Name: "vault", Token: vaultToken})
	var vaultHandler http.Handler = h.vault.Handler()
	if o.vaultMiddleware != nil {
		vaultHandler = o.vaultMiddleware(vaultHandler)
	}
	vaultSrv := httptest.NewServer(vaultHandler)
	t.Cleanup(vaultSrv.Close)

	env := map[string]string{"LLM_URL": h.llm.URL, "BANK_URL": bankSrv.URL + "/mcp", "VAULT_URL": vaultSrv.URL + "/mcp"}
	servers := ""
	if o.oauth {
		h.as = oauthtest.NewAuthServer(oauthtest.NewClock())
		t.Cleanup(h.as.Close)
		hr := oauthtest.NewProtectedMCP(h.as)
		t.Cleanup(hr.Close)
		env["HR_URL"] = hr.Endpoint
		servers = `
    - name: hr
      url: "${HR_URL}"
      accessMode: user-controlled
      authentication: {mode: oauth2}
`
	}
	if o.authRequired {
		env["AUTH_REQ"] = "true"
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agent-pack.yaml"), []byte(testPack+servers), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := packs.Load(packs.Options{Path: dir, Env: packs.MapEnv(env)})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if o.quiet {
		log = slog.New(slog.DiscardHandler)
	}
	key, err := secret.ParseKey(testKey)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secret.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := mcp.Config{Servers: p.MCP.Servers, Credentials: h.st, Keyring: kr, Logger: log}
	acfg := agent.Config{Provider: agent.ProviderOpenAI, Model: "scripted", BaseURL: h.llm.URL, Logger: log}
	if o.tel != nil {
		cfg.Observer, acfg.Observer = o.tel, o.tel
	}
	var model *agent.Model
	if !o.noLLM {
		if model, err = agent.New(acfg); err != nil {
			t.Fatal(err)
		}
	}
	var om *oauth.Manager
	if o.oauth {
		mux := http.NewServeMux()
		cb := httptest.NewServer(mux)
		t.Cleanup(cb.Close)
		om, err = oauth.New(oauth.Config{Credentials: h.st, Records: h.st, Keyring: kr, Servers: p.MCP.Servers, Logger: log,
			CallbackURL: cb.URL + oauth.DefaultCallbackPath,
			// As serve wires it: the confirmation goes through the outbox.
			OnAuthorized: func(ctx context.Context, identity, server string) { h.bot.OAuthAuthorized(ctx, identity, server) }})
		if err != nil {
			t.Fatal(err)
		}
		mux.Handle("GET "+oauth.DefaultCallbackPath, om.CallbackHandler())
		cfg.Authorizer = om
	}
	h.pool, err = mcp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.cat, err = i18n.New(p)
	if err != nil {
		t.Fatal(err)
	}
	apcfg := approvals.Config{Store: h.st, Pack: p, MCP: h.pool, Logger: log,
		Now:  func() time.Time { return time.Now().Add(time.Duration(h.offset.Load())) },
		Kick: func(id string) { h.bot.Kick(id) }}
	if o.tel != nil {
		apcfg.Observer = o.tel
	}
	h.appr, err = approvals.New(apcfg)
	if err != nil {
		t.Fatal(err)
	}
	h.ch = channeltest.NewMemory()
	d := flows.Deps{Pack: p, Catalog: h.cat, Store: h.st, MCP: h.pool, Keyring: kr, Channel: channel.CapabilitiesOf(h.ch), Logger: log,
		Approvals: h.appr}
	if om != nil {
		d.OAuth = om
	}
	d.Model = model
	h.deps, h.env = d, env
	engine, err := flows.New(d)
	if err != nil {
		t.Fatal(err)
	}
	h.kr = kr
	for conn, claims := range o.restore {
		h.restored[conn] = h.ch.Restore(conn, claims)
	}
	h.start(engine, log)
	h.waitTools("bank")
	return h
}

// waitTools waits until the pool knows the tools of server.
func (h *harness) waitTools(server string) {
	h.t.Helper()
	ctx := testCtx(h.t)
	for {
		cat, changed := h.pool.Catalog()
		if len(cat.Server(server)) > 0 {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			h.t.Fatalf("the pool never listed the tools of %s", server)
		}
	}
}

// start runs the pool, the bot and the channel until the test ends (or h.stop).
func (h *harness) start(engine *flows.Engine, log *slog.Logger) {
	var err error
	var ch channel.Channel = h.ch
	if h.announced {
		ch = announcing{h.ch}
	}
	cfg := bot.Config{Channel: ch, Store: h.st, Flows: engine, Logger: log, Keyring: h.kr, BeforeHandle: h.hook,
		MaxAttempts: h.maxAttempts, DrainTimeout: h.drain, Idle: h.idle, AcceptWait: h.acceptWait,
		RetryAfter: 100 * time.Millisecond}
	if h.tel != nil {
		cfg.Observer = h.tel.Bot("memory")
	}
	h.bot, err = bot.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = h.pool.Run(ctx) }()
	go func() { defer wg.Done(); _ = h.bot.Run(ctx) }()
	go func() { defer wg.Done(); _ = h.ch.Run(ctx, h.bot) }()
	var once sync.Once
	h.stop = func() { once.Do(func() { cancel(); wg.Wait(); h.pool.Close() }) }
	h.t.Cleanup(h.stop)
}

// user is one wallet of the memory channel.
type user struct {
	h *harness
	t testing.TB
	w *channeltest.MemoryWallet
	// menu is the last menu received.
	menu *channel.Menu
}

// connect connects a wallet holding a credential with claims and sends its profile in lang; it
// returns once the bot has answered the profile (greeting).
func (h *harness) connect(ctx context.Context, claims map[string]string, lang string) *user {
	h.t.Helper()
	w, err := h.ch.Connect(ctx, claims)
	if err != nil {
		h.t.Fatal(err)
	}
	u := &user{h: h, t: h.t, w: w}
	if err := w.SendProfile(ctx, claims["name"], lang); err != nil {
		h.t.Fatal(err)
	}
	return u
}

// next returns the next message that is not a menu or receipts (menus are kept in u.menu).
func (u *user) next(ctx context.Context) channeltest.Received {
	u.t.Helper()
	for {
		r, err := u.w.Next(ctx)
		if err != nil {
			u.t.Fatalf("waiting for a message: %v", err)
		}
		switch {
		case r.Menu != nil:
			u.menu = r.Menu
			continue
		case r.Receipts != nil, r.Profile != nil:
			continue
		}
		return r
	}
}

// text returns the next text.
func (u *user) text(ctx context.Context) string {
	u.t.Helper()
	r := u.next(ctx)
	if r.Text == nil {
		u.t.Fatalf("want a text, got %s", r)
	}
	return r.Text.Content
}

// say sends content and returns the bot's next text.
func (u *user) say(ctx context.Context, content string) string {
	u.t.Helper()
	if err := u.w.SendText(ctx, content, ""); err != nil {
		u.t.Fatal(err)
	}
	return u.text(ctx)
}

// waitMenu waits until a menu satisfying ok arrived (the current one counts).
func (u *user) waitMenu(ctx context.Context, ok func(channel.Menu) bool) channel.Menu {
	u.t.Helper()
	for u.menu == nil || !ok(*u.menu) {
		r, err := u.w.Next(ctx)
		if err != nil {
			u.t.Fatalf("waiting for a menu: %v (last %+v)", err, u.menu)
		}
		if r.Menu != nil {
			u.menu = r.Menu
		} else if r.Text != nil || r.Question != nil || r.ProofRequest != nil {
			u.t.Fatalf("waiting for a menu, got %s", r)
		}
	}
	return *u.menu
}

// login selects authenticate, presents the credential and returns the bot's answer.
func (u *user) login(ctx context.Context) string {
	u.t.Helper()
	u.selectItem(ctx, "authenticate")
	r := u.next(ctx)
	if r.ProofRequest == nil {
		u.t.Fatalf("want a proof request, got %s", r)
	}
	if err := u.w.Present(ctx, r.ID); err != nil {
		u.t.Fatal(err)
	}
	return u.text(ctx)
}

func (u *user) selectItem(ctx context.Context, id string) {
	u.t.Helper()
	if err := u.w.SelectMenu(ctx, id); err != nil {
		u.t.Fatal(err)
	}
}

// question returns the next message, which must be a question.
func (u *user) question(ctx context.Context) channeltest.Received {
	u.t.Helper()
	r := u.next(ctx)
	if r.Question == nil {
		u.t.Fatalf("want a question, got %s", r)
	}
	return r
}

func (u *user) answer(ctx context.Context, q channeltest.Received, prefix string) {
	u.t.Helper()
	for _, o := range q.Question.Options {
		if strings.Contains(o, prefix) {
			if err := u.w.Answer(ctx, q.ID, o); err != nil {
				u.t.Fatal(err)
			}
			return
		}
	}
	u.t.Fatalf("no option %q in %q", prefix, q.Question.Options)
}

// waitIdle waits until the bot has no worker left (each gave its connection up): a test that
// writes a session behind the bot's back does it then.
func (h *harness) waitIdle(ctx context.Context) {
	h.t.Helper()
	for h.bot.Stats().Workers.Load() > 0 {
		select {
		case <-ctx.Done():
			h.t.Fatal("workers still running")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

const sendMoney = `/call send_money {"recipient":"rcp-globex","amount":5,"currency":"EUR"}`

// login connects a user with claims in lang, and logs them in.
func (h *harness) login(ctx context.Context, email, name, roles, lang string) *user {
	h.t.Helper()
	u := h.connect(ctx, map[string]string{"email": email, "name": name, "roles": roles}, lang)
	u.text(ctx) // greeting
	u.login(ctx)
	return u
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

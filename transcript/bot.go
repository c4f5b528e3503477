package transcript

import (
	"context"
	_ "embed" // pack.yaml
	"fmt"
	"log/slog"
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
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
	"github.com/packbot/packbot/store/sqlstore"
)

// testKey is the MCP_CONFIG_ENCRYPTION_KEY of the transcripts' bot.
const testKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// VaultToken is the token the vault server of the transcripts accepts.
const VaultToken = "vault-token-s3cr3t-7f1c"

// pack is the transcripts' pack (pack.yaml); the authentication's credential request is the
// harness's (see authYAML), put in place of authMarker.
//
//go:embed pack.yaml
var pack string

const authMarker = "    # the harness's credential request goes here (authYAML)\n"

// authYAML is the pack's credential request for the proof request a channel's wallets can
// satisfy: an AnonCreds credential definition (VS Agent) or a W3C credential type and issuers
// (DIDComm). The memory channel takes either.
func authYAML(r channel.ProofRequest) string {
	var b strings.Builder
	if a := r.AnonCreds; a != nil && a.CredentialDefinitionID != "" {
		fmt.Fprintf(&b, "    credentialDefinitionId: %q\n", a.CredentialDefinitionID)
	}
	if w := r.W3C; w != nil && w.CredentialType != "" {
		fmt.Fprintf(&b, "    credential: {type: %q", w.CredentialType)
		if len(w.Issuers) > 0 {
			fmt.Fprintf(&b, ", issuers: [%q]", strings.Join(w.Issuers, `", "`))
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// world is the bot of one transcript and what it talks to.
type world struct {
	t     testing.TB
	cat   *i18n.Catalog
	st    store.Store
	llm   *agenttest.Server
	queue *llmQueue
	bank  *demoserver.Server
	// records is the HR server: demoserver's Writes (elicitation, progress, sampling).
	records *demoserver.Server
	appr    *approvals.Service
	// refresh re-sends the menus of identities whose badges changed (the bot's RefreshMenus).
	refresh func(ctx context.Context, identities []string)
	// logPath is the file of everything the bot logged, at debug level (logs: never).
	logPath string
	// offset moves the approvals' clock (expiry).
	offset atomic.Int64
	// stop stops the bot, the pool and the channel; safe to call more than once.
	stop func()
}

// llmQueue is the scripted model: the responses a transcript queued, one per request, then
// agenttest.Echo.
type llmQueue struct {
	mu sync.Mutex
	q  []agenttest.Response
}

func (l *llmQueue) push(r agenttest.Response) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.q = append(l.q, r)
}

func (l *llmQueue) answer(r agenttest.Request) agenttest.Response {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.q) == 0 {
		return agenttest.Echo(r)
	}
	resp := l.q[0]
	l.q = l.q[1:]
	return resp
}

// newWorld builds the bot on ch and runs it (with ch) until the test ends.
func newWorld(t testing.TB, ch channel.Channel, proof channel.ProofRequest, openStore func(testing.TB) store.Store, elicitTimeout time.Duration) *world {
	t.Helper()
	w := &world{t: t, queue: &llmQueue{}}
	ctx := context.Background()
	if openStore == nil {
		openStore = openSQLite
	}
	st := openStore(t)
	w.st = st
	w.llm = agenttest.New(t)
	w.llm.Script(w.queue.answer)
	w.bank = demoserver.New(&demoserver.Options{Name: "bank"})
	bankSrv := httptest.NewServer(w.bank.Handler())
	t.Cleanup(bankSrv.Close)
	vault := demoserver.New(&demoserver.Options{Name: "vault", Token: VaultToken})
	vaultSrv := httptest.NewServer(vault.Handler())
	t.Cleanup(vaultSrv.Close)
	w.records = demoserver.New(&demoserver.Options{Name: "records", Writes: true})
	recordsSrv := httptest.NewServer(w.records.Handler())
	t.Cleanup(func() {
		// A scenario that failed may leave a call waiting for its user's answer: end it.
		recordsSrv.CloseClientConnections()
		recordsSrv.Close()
	})

	if !strings.Contains(pack, authMarker) {
		t.Fatal("pack.yaml lost the line where the credential request goes")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agent-pack.yaml"), []byte(strings.Replace(pack, authMarker, authYAML(proof), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LLM_URL": w.llm.URL, "BANK_URL": bankSrv.URL + "/mcp", "VAULT_URL": vaultSrv.URL + "/mcp",
		"RECORDS_URL": recordsSrv.URL + "/mcp"}
	p, err := packs.Load(packs.Options{Path: dir, Env: packs.MapEnv(env)})
	if err != nil {
		t.Fatalf("load the transcripts' pack: %v", err)
	}
	w.logPath = filepath.Join(dir, "bot.log")
	logFile, err := os.Create(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	log := slog.New(slog.NewMultiHandler(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}),
		slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug})))
	key, err := secret.ParseKey(testKey)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secret.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	model, err := agent.New(agent.Config{Provider: agent.ProviderOpenAI, Model: "scripted", BaseURL: w.llm.URL, Logger: log})
	if err != nil {
		t.Fatalf("open the scripted model: %v", err)
	}
	pool, err := mcp.New(mcp.Config{Servers: p.MCP.Servers, Credentials: st, Keyring: kr, Logger: log, Sampler: flows.NewSampler(model)})
	if err != nil {
		t.Fatalf("open the MCP pool: %v", err)
	}
	if w.cat, err = i18n.New(p); err != nil {
		t.Fatal(err)
	}
	var b *bot.Bot
	w.appr, err = approvals.New(approvals.Config{Store: st, Pack: p, MCP: pool, Logger: log,
		Now:  func() time.Time { return time.Now().Add(time.Duration(w.offset.Load())) },
		Kick: func(id string) { b.Kick(id) }})
	if err != nil {
		t.Fatalf("open the approvals: %v", err)
	}
	engine, err := flows.New(flows.Deps{Pack: p, Catalog: w.cat, Store: st, MCP: pool, Keyring: kr, Channel: channel.CapabilitiesOf(ch),
		Logger: log, Approvals: w.appr, Model: model, ElicitTimeout: elicitTimeout})
	if err != nil {
		t.Fatalf("build the flows: %v", err)
	}
	if b, err = bot.New(bot.Config{Channel: ch, Store: st, Flows: engine, Logger: log, Keyring: kr}); err != nil {
		t.Fatalf("build the bot: %v", err)
	}
	w.refresh = b.RefreshMenus
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = pool.Run(runCtx) }()
	go func() { defer wg.Done(); _ = b.Run(runCtx) }()
	go func() { defer wg.Done(); _ = ch.Run(runCtx, b) }()
	// Run stops the bot before the wallets' cleanups close them (they were connected later, so
	// theirs run first): a bot draining its outbox to closed wallets would wait for nothing.
	w.stop = sync.OnceFunc(func() { cancel(); wg.Wait(); pool.Close() })
	t.Cleanup(w.stop)
	w.waitTools(t, pool, "bank")
	w.waitTools(t, pool, "payments")
	w.waitTools(t, pool, "records")
	return w
}

// stats are the executions and tool errors of the demo servers, by tool.
func (w *world) stats() (executions, errors map[string]int) {
	executions, errors = map[string]int{}, map[string]int{}
	for _, s := range []*demoserver.Server{w.bank, w.records} {
		st := s.Stats()
		for k, v := range st.Executions {
			executions[k] += v
		}
		for k, v := range st.ToolErrors {
			errors[k] += v
		}
	}
	return executions, errors
}

// openSQLite is the default store of a transcript's bot.
func openSQLite(t testing.TB) store.Store {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "bot.db"), nil)
	if err != nil {
		t.Fatalf("open the bot's store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// waitTools waits until the pool knows the tools of server.
func (w *world) waitTools(t testing.TB, pool *mcp.Pool, server string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		cat, changed := pool.Catalog()
		if len(cat.Server(server)) > 0 {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the pool never listed the tools of %s", server)
		}
	}
}

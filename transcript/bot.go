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
	"testing"
	"time"

	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/bot/bottest"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
)

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

// world is the bot of one transcript and what it talks to (a bottest world).
type world struct {
	*bottest.World
	t     testing.TB
	cat   *i18n.Catalog
	st    store.Store
	llm   *agenttest.Server
	queue *llmQueue
	bank  *demoserver.Server
	// records is the HR server: demoserver's Writes (elicitation, progress, sampling).
	records *demoserver.Server
	appr    *approvals.Service
	// receipts signs the receipts of approved executions.
	receipts *credential.Signer
	// updated receives each resource URI the pool's servers reported updated.
	updated chan string
	// logPath is the file of everything the bot logged, at debug level (logs: never).
	logPath string
}

// stop stops the bot, the pool and the channel; safe to call more than once.
func (w *world) stop() { w.Stop() }

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
	w := &world{t: t, queue: &llmQueue{}, updated: make(chan string, 64)}
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
	env := map[string]string{"LLM_URL": w.llm.URL, "BANK_URL": bankSrv.URL + "/mcp", "VAULT_URL": vaultSrv.URL + "/mcp",
		"RECORDS_URL": recordsSrv.URL + "/mcp"}
	w.logPath = filepath.Join(t.TempDir(), "bot.log")
	logFile, err := os.Create(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	log := slog.New(slog.NewMultiHandler(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}),
		slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug})))
	receiptKey, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	w.receipts = credential.NewSigner(receiptKey, approvals.ReceiptType)
	w.World = bottest.New(t, bottest.Options{Pack: strings.Replace(pack, authMarker, authYAML(proof), 1), Env: env, Store: st,
		Channel: ch, LLMURL: w.llm.URL, Logger: log, Sampler: true, ElicitTimeout: elicitTimeout, Receipts: w.receipts,
		OnResourceUpdated: func(_, _, uri string) {
			select {
			case w.updated <- uri:
			default: // nobody waits for it
			}
		}})
	w.cat, w.appr = w.Catalog, w.Approvals
	// Run stops the bot before the wallets' cleanups close them (they were connected later, so
	// theirs run first): a bot draining its outbox to closed wallets would wait for nothing.
	w.Run(t)
	for _, server := range []string{"bank", "payments", "records", "hollyhr", "treasury"} {
		w.WaitTools(t, server)
	}
	return w
}

// remove removes a prompt or a resource from the HR server and waits until the bot's pool listed
// the server again without it (after the server's list_changed).
func (w *world) remove(ctx context.Context, what, name string) error {
	if what == "prompt" {
		w.records.RemovePrompts(name)
	} else {
		w.records.RemoveResources(name)
	}
	for {
		cat, changed := w.Pool.Catalog()
		s := cat.Surfaces["hollyhr"]
		_, hasPrompt := s.Prompt(name)
		_, hasResource := s.Resource(name)
		if !hasPrompt && !hasResource {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("the bot still lists %s %s: %w", what, name, ctx.Err())
		}
	}
}

// updateResource changes one of the HR server's documents and waits until the bot's pool heard
// of it (the notification travels on the session's stream; the next turn must read the new
// text).
func (w *world) updateResource(ctx context.Context, uri, text string) error {
	for len(w.updated) > 0 {
		<-w.updated
	}
	if err := w.records.UpdateResource(ctx, uri, text); err != nil {
		return err
	}
	for {
		select {
		case got := <-w.updated:
			if got == uri {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("the bot never heard that %s was updated: %w", uri, ctx.Err())
		}
	}
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

package bot_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
)

func TestCredentialConfigSQLite(t *testing.T)   { testCredentialConfig(t, false) }
func TestCredentialConfigPostgres(t *testing.T) { testCredentialConfig(t, true) }

// testCredentialConfig: the MCP credential conversation with a token-protected streamable-HTTP
// server — a wrong token stores nothing, the right one makes the user's tools appear in the next
// LLM turn; delete and abort; the secret never reaches a log line, memory or audit row.
func testCredentialConfig(t *testing.T, postgres bool) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{postgres: postgres})
	h.llm.Script(bankScript)
	en := func(key string, args ...string) string { return h.cat.T("en", key, args...) }
	u := h.connect(ctx, map[string]string{"email": "ana@acme.corp", "name": "Ana", "roles": "employee"}, "en")
	u.text(ctx)
	u.login(ctx)
	const identity = "ana@acme.corp"

	configure := func(account, token string) string {
		t.Helper()
		u.selectItem(ctx, "mcp-config")
		q := u.question(ctx)
		if q.Question.Text != en("MCP_CONFIG_CHOOSE_SERVER") {
			t.Fatalf("question %q", q.Question.Text)
		}
		u.answer(ctx, q, "vault")
		if got := u.text(ctx); got != en("MCP_CONFIG_FIELD_PROMPT", "field", "your account name", "server", "vault") {
			t.Fatalf("first prompt %q", got)
		}
		u.waitMenu(ctx, func(m channel.Menu) bool { return slices.Contains(optionIDs(m), "abort-config") })
		if got := u.say(ctx, account); got != en("MCP_CONFIG_SECRET_PROMPT", "field", "your vault token", "server", "vault") {
			t.Fatalf("second prompt %q", got)
		}
		if got := u.say(ctx, token); got != en("MCP_CONFIG_TESTING", "server", "vault") {
			t.Fatalf("after the last field %q", got)
		}
		return u.text(ctx)
	}

	// Wrong token: ⚠️, nothing stored.
	if got := configure("acme", "wrong-token-0a9b"); got != en("MCP_CONFIG_FAILURE", "server", "vault") {
		t.Fatalf("wrong token answer %q", got)
	}
	if rows, err := h.st.ListCredentials(ctx, store.CredentialQuery{Identity: identity}); err != nil || len(rows) != 0 {
		t.Fatalf("after a failed test the store holds %+v (%v)", rows, err)
	}

	// Right token: ✅, and the vault's tools are offered in the next turn.
	if got := configure("acme", vaultToken); !strings.HasPrefix(got, "✅") || got != en("MCP_CONFIG_SUCCESS", "server", "vault", "count", "9") {
		t.Fatalf("right token answer %q", got)
	}
	u.waitMenu(ctx, func(m channel.Menu) bool { return !slices.Contains(optionIDs(m), "abort-config") })
	if got := u.say(ctx, "vault balances please"); !strings.HasPrefix(got, "tool said: ") || !strings.Contains(got, "balances") {
		t.Fatalf("vault tool answer %q", got)
	}
	reqs := h.llm.Requests()
	if names := reqs[len(reqs)-2].ToolNames(); !slices.Contains(names, "get_balances") || !slices.Contains(names, "bank__list_transfers") || !slices.Contains(names, "vault__list_transfers") {
		t.Fatalf("after configuring, offered %v", names)
	}
	if n := h.vault.Stats().Executions["get_balances"]; n != 1 {
		t.Fatalf("vault get_balances ran %d times", n)
	}
	if tools := u.say(ctx, "/tools"); !strings.Contains(tools, "vault\n• create_invoice") {
		t.Fatalf("/tools after configuring:\n%s", tools)
	}

	// The menu shows ✅ now; delete goes back to ⚠️.
	u.selectItem(ctx, "mcp-config")
	q := u.question(ctx)
	if !slices.Contains(q.Question.Options, en("MCP_CONFIG_OPTION_CONFIGURED", "server", "vault")) {
		t.Fatalf("options %q", q.Question.Options)
	}
	u.answer(ctx, q, "vault")
	q = u.question(ctx)
	u.answer(ctx, q, en("MCP_CONFIG_DELETE"))
	if got := u.text(ctx); got != en("MCP_CONFIG_DELETED", "server", "vault") {
		t.Fatalf("delete answer %q", got)
	}
	if rows, _ := h.st.ListCredentials(ctx, store.CredentialQuery{Identity: identity}); len(rows) != 0 {
		t.Fatalf("after delete the store holds %+v", rows)
	}

	// Abort in the middle: the draft goes too.
	u.selectItem(ctx, "mcp-config")
	u.answer(ctx, u.question(ctx), "vault")
	u.text(ctx)
	u.say(ctx, "acme")
	u.selectItem(ctx, "abort-config")
	if got := u.text(ctx); got != en("MCP_CONFIG_ABORTED") {
		t.Fatalf("abort answer %q", got)
	}
	if rows, _ := h.st.ListCredentials(ctx, store.CredentialQuery{Identity: identity}); len(rows) != 0 {
		t.Fatalf("after abort the store holds %+v", rows)
	}

	assertNoSecret(ctx, t, h, identity, vaultToken, "wrong-token-0a9b")
}

// assertNoSecret greps the logs, the memory rows and the audit rows for each secret.
func assertNoSecret(ctx context.Context, t *testing.T, h *harness, identity string, secrets ...string) {
	t.Helper()
	mem, err := h.st.LoadMemory(ctx, "id:"+identity, 0)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := h.st.ListAudit(ctx, store.AuditQuery{Identity: identity, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(mem) == 0 || len(audit) == 0 {
		t.Fatalf("nothing to grep: %d memory rows, %d audit rows", len(mem), len(audit))
	}
	logs := h.logs.String()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("a log line holds the secret %q", s)
		}
		for _, m := range mem {
			if strings.Contains(m.Content, s) || strings.Contains(string(m.Data), s) {
				t.Errorf("a memory row holds the secret %q", s)
			}
		}
		for _, a := range audit {
			if strings.Contains(a.ArgsFingerprint+a.Error+a.Tool+a.Server, s) {
				t.Errorf("an audit row holds the secret %q", s)
			}
		}
	}
}

// TestCredentialConfigSurvivesRestart: the bot stops between two fields; the new bot on the same
// database continues where the user was, with the first value kept sealed (never in clear).
func TestCredentialConfigSurvivesRestart(t *testing.T) {
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "bot.db")
	st, err := sqlstore.OpenSQLite(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h := newHarness(t, harnessOptions{store: st, noLLM: true})
	u := h.connect(ctx, map[string]string{"email": "ana@acme.corp", "name": "Ana", "roles": "employee"}, "es")
	u.text(ctx)
	u.login(ctx)
	u.selectItem(ctx, "mcp-config")
	u.answer(ctx, u.question(ctx), "vault")
	u.text(ctx)
	const account = "cuenta-secreta-42"
	if got := u.say(ctx, account); got != h.cat.T("es", "MCP_CONFIG_SECRET_PROMPT", "field", "tu token del vault", "server", "vault") {
		t.Fatalf("second prompt %q", got)
	}
	h.stop()
	drafts, err := st.ListCredentials(ctx, store.CredentialQuery{Identity: "ana@acme.corp"})
	if err != nil || len(drafts) != 1 || drafts[0].Kind != store.KindDraft || strings.Contains(string(drafts[0].Secret.Ciphertext), account) {
		t.Fatalf("draft after the first field: %+v %v", drafts, err)
	}

	// A new bot on the same store; the connection comes back (same id, as after a restart).
	h2 := newHarness(t, harnessOptions{store: st, noLLM: true})
	w, err := h2.ch.Connect(ctx, map[string]string{"email": "ana@acme.corp"})
	if err != nil || w.Conn() != u.w.Conn() {
		t.Fatalf("reconnect: %v (%s, want %s)", err, w.Conn(), u.w.Conn())
	}
	u2 := &user{h: h2, t: t, w: w}
	if got := u2.say(ctx, vaultToken); got != h2.cat.T("es", "MCP_CONFIG_TESTING", "server", "vault") {
		t.Fatalf("after restart %q", got)
	}
	if got := u2.text(ctx); !strings.HasPrefix(got, "✅") {
		t.Fatalf("after restart, configuring answered %q", got)
	}
	rows, _ := st.ListCredentials(ctx, store.CredentialQuery{Identity: "ana@acme.corp"})
	if len(rows) != 1 || rows[0].Kind != store.KindConfig {
		t.Fatalf("after the restart the store holds %+v", rows)
	}
	// The raw database file holds neither value in clear.
	db, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(db), vaultToken) || strings.Contains(string(db), account) {
		t.Fatal("the database file holds a secret in clear")
	}
}

// TestProgressTextBeforeSlowCheck: "Checking the connection to …" reaches the user while the
// credential test is still running (the vault holds it), not with the result once it ended:
// a progress text goes out at once.
func TestProgressTextBeforeSlowCheck(t *testing.T) {
	ctx := testCtx(t)
	vault := &holdVault{release: make(chan struct{}), held: make(chan struct{}), auth: make(chan string, 256)}
	h := newHarness(t, harnessOptions{vaultMiddleware: vault.wrap})
	en := func(key string, args ...string) string { return h.cat.T("en", key, args...) }
	u := h.login(ctx, "ana@acme.corp", "Ana", "employee", "en")
	u.selectItem(ctx, "mcp-config")
	u.answer(ctx, u.question(ctx), "vault")
	u.text(ctx) // the first field's prompt
	u.say(ctx, "my-account")
	vault.armed.Store(true)
	if err := u.w.SendText(ctx, vaultToken, ""); err != nil {
		t.Fatal(err)
	}
	<-vault.held // the check is running, and cannot end until released
	if got := u.text(ctx); got != en("MCP_CONFIG_TESTING", "server", "vault") {
		t.Fatalf("while the check runs the user got %q, want MCP_CONFIG_TESTING", got)
	}
	vault.armed.Store(false)
	close(vault.release)
	if got := u.text(ctx); got != en("MCP_CONFIG_SUCCESS", "server", "vault", "count", "9") {
		t.Fatalf("after the check the user got %q, want MCP_CONFIG_SUCCESS", got)
	}
}

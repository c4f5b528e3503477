package everything_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/agent/agenttest"
	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/i18n"
	everything "github.com/packbot/packbot/interop/mcp-everything"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store/sqlstore"
)

// The chat's side of server-everything: every prompt it lists is listed by /prompts, its
// arguments asked (with the server's completions offered where it completes), got and run as the
// user's turn; every resource and template it lists is listed by /resources and attached (a
// template's variable asked), its text reaching the model's context, binary contents described.
// The tables say what each one takes and shows; a prompt or resource the server lists that they
// do not know fails the test, as a tool does in TestEverything.

// promptCase is how the chat runs one prompt: the value given to each argument it asks, in
// order (a completion the server must offer, chosen; or a typed value; or skip), and what the
// model's request must carry.
type promptCase struct {
	title string
	args  []argAnswer
	want  []string // substrings of the prompt's messages, as the model gets them
}

// argAnswer answers one argument's question.
type argAnswer struct {
	offered []string // completions the question must offer (nil: none)
	choose  string   // an offered completion to choose
	typed   string   // a value to type
	skip    bool
}

var prompts = map[string]promptCase{
	"simple-prompt": {title: "Simple Prompt", want: []string{"This is a simple prompt without arguments."}},
	"args-prompt": {title: "Arguments Prompt", args: []argAnswer{{typed: "Paris"}, {skip: true}},
		want: []string{"What's weather in Paris?"}},
	// Completion with context: the second argument's values depend on the first one's.
	"completable-prompt": {title: "Team Management", args: []argAnswer{
		{offered: []string{"Engineering", "Sales", "Marketing", "Support"}, choose: "Engineering"},
		{offered: []string{"Alice", "Bob", "Charlie"}, choose: "Bob"}},
		want: []string{"Please promote Bob to the head of the Engineering team."}},
	// An embedded resource: its text inlined, marked with its URI.
	"resource-prompt": {title: "Resource Prompt", args: []argAnswer{
		{offered: []string{"Text", "Blob"}, choose: "Text"}, {typed: "4"}},
		want: []string{"This prompt includes the Text resource with id: 4.", "[resource demo://resource/dynamic/text/4]", "Resource 4: This is a plaintext resource"}},
}

// templates are the resource templates, with the value typed for their one variable and what the
// model's context must carry.
var templates = map[string]struct {
	value string
	want  string
}{
	"demo://resource/dynamic/text/{resourceId}": {"7", "Resource 7: This is a plaintext resource"},
	// A blob: described, never inlined.
	"demo://resource/dynamic/blob/{resourceId}": {"8", "[binary content, text/plain, "},
}

// TestEverythingChat runs the chat's prompts and resources against server-everything over each
// transport.
func TestEverythingChat(t *testing.T) {
	for _, tr := range []string{packs.TransportStdio, packs.TransportSSE, packs.TransportStreamableHTTP} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			testChat(t, tr)
		})
	}
}

func testChat(t *testing.T, transport string) {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	c := newChat(ctx, t, everything.Server(t, "everything", transport))
	surf, err := c.pool.Surface(ctx, "", "everything")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if !surf.Completions || !surf.Subscribe {
		t.Errorf("server-everything declares completions %v, subscriptions %v; want both", surf.Completions, surf.Subscribe)
	}

	// /prompts lists every prompt the server lists, and each one runs.
	q := c.ask(t, "/prompts")
	var titles []string
	for _, p := range surf.Prompts {
		pc, ok := prompts[p.Name]
		if !ok {
			t.Errorf("server-everything %s lists the prompt %s, which this test does not know: add it to prompts", everything.Version, p.Name)
			continue
		}
		titles = append(titles, c.text("PROMPT_OPTION", "prompt", pc.title, "server", "everything"))
	}
	if !slices.Equal(q.Options, titles) {
		t.Errorf("/prompts offers %q, want %q", q.Options, titles)
	}
	for _, p := range surf.Prompts {
		if pc, ok := prompts[p.Name]; ok {
			t.Run("prompt/"+p.Name, func(t *testing.T) { c.runPrompt(t, pc) })
		}
	}
	for name := range prompts {
		if _, ok := surf.Prompt(name); !ok {
			t.Errorf("server-everything no longer lists the prompt %s", name)
		}
	}

	// /resources lists every resource and template; each is attached, read into the context, and
	// detached.
	q = c.ask(t, "/resources")
	want := make([]string, 0, len(surf.Resources)+len(surf.Templates))
	for _, r := range surf.Resources {
		want = append(want, c.text("RESOURCE_OPTION", "resource", r.Label(), "server", "everything"))
	}
	for _, tp := range surf.Templates {
		want = append(want, c.text("TEMPLATE_OPTION", "resource", tp.Label(), "server", "everything"))
	}
	if !slices.Equal(q.Options, want) || len(surf.Resources) < 7 {
		t.Errorf("/resources offers %q, want %q", q.Options, want)
	}
	for _, r := range surf.Resources {
		t.Run("resource/"+r.Name, func(t *testing.T) { c.attachResource(t, r) })
	}
	for _, tp := range surf.Templates {
		tc, ok := templates[tp.URITemplate]
		if !ok {
			t.Errorf("server-everything %s lists the template %s, which this test does not know: add it to templates", everything.Version, tp.URITemplate)
			continue
		}
		t.Run("template/"+tp.Name, func(t *testing.T) { c.attachTemplate(t, tp, tc.value, tc.want) })
	}
	if len(surf.Skills) != 0 {
		t.Errorf("server-everything lists skills %+v: load them here", surf.Skills)
	}
}

// chat is a bot on the memory channel with server-everything as its one MCP server, a scripted
// model that echoes, and one guest wallet whose role may use every prompt and resource.
type chat struct {
	ctx    context.Context
	pool   *mcp.Pool
	cat    *i18n.Catalog
	llm    *agenttest.Server
	wallet *channeltest.MemoryWallet
	// lastQuestion is the id of the last question received.
	lastQuestion string
}

const chatPack = `
metadata: {id: everything-chat, defaultLanguage: en}
llm: {provider: openai, model: scripted, baseUrl: "http://127.0.0.1:1"}
flows:
  authentication: {enabled: false}
  welcome: {enabled: false}
mcp:
  servers:
    - name: everything
      url: http://127.0.0.1:1/mcp
      promptAccess:
        roles:
          guest: [simple-prompt, args-prompt, completable-prompt, resource-prompt]
      resourceAccess:
        roles:
          guest: ["*"]
`

func newChat(ctx context.Context, t *testing.T, srv packs.Server) *chat {
	t.Helper()
	p, err := packs.Parse("chat.yaml", []byte(chatPack), packs.MapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	srv.PromptAccess, srv.ResourceAccess = p.MCP.Servers[0].PromptAccess, p.MCP.Servers[0].ResourceAccess
	p.MCP.Servers = []packs.Server{srv}
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "bot.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := &chat{ctx: ctx, llm: agenttest.New(t)}
	model, err := agent.New(agent.Config{Provider: agent.ProviderOpenAI, Model: "scripted", BaseURL: c.llm.URL, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if c.pool, err = mcp.New(mcp.Config{Servers: p.MCP.Servers, Logger: log}); err != nil {
		t.Fatal(err)
	}
	if c.cat, err = i18n.New(p); err != nil {
		t.Fatal(err)
	}
	mem := channeltest.NewMemory()
	engine, err := flows.New(flows.Deps{Pack: p, Catalog: c.cat, Store: st, MCP: c.pool, Model: model, Channel: channel.CapabilitiesOf(mem), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(bot.Config{Channel: mem, Store: st, Flows: engine, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.pool.Run(runCtx) })
	wg.Go(func() { _ = b.Run(runCtx) })
	wg.Go(func() { _ = mem.Run(runCtx, b) })
	t.Cleanup(func() { stop(); wg.Wait() })
	if c.wallet, err = mem.Connect(ctx, map[string]string{"name": "Ana"}); err != nil {
		t.Fatal(err)
	}
	return c
}

// text is the catalog's English text of key.
func (c *chat) text(key string, args ...string) string { return c.cat.T("en", key, args...) }

// next returns the wallet's next text or question (menus and profiles are skipped).
func (c *chat) next(t *testing.T) channeltest.Received {
	t.Helper()
	for {
		m, err := c.wallet.Next(c.ctx)
		if err != nil {
			t.Fatalf("waiting for the bot: %v", err)
		}
		if m.Text != nil || m.Question != nil {
			return m
		}
	}
}

// say sends text and returns the bot's next text.
func (c *chat) say(t *testing.T, text string) string {
	t.Helper()
	if err := c.wallet.SendText(c.ctx, text, ""); err != nil {
		t.Fatal(err)
	}
	return c.expectText(t)
}

func (c *chat) expectText(t *testing.T) string {
	t.Helper()
	m := c.next(t)
	if m.Text == nil {
		t.Fatalf("got %s, want a text", m)
	}
	return m.Text.Content
}

func (c *chat) expectQuestion(t *testing.T) *channel.Question {
	t.Helper()
	m := c.next(t)
	if m.Question == nil {
		t.Fatalf("got %s, want a question", m)
	}
	c.lastQuestion = m.ID
	return m.Question
}

// ask sends text and returns the question the bot answers with.
func (c *chat) ask(t *testing.T, text string) *channel.Question {
	t.Helper()
	if err := c.wallet.SendText(c.ctx, text, ""); err != nil {
		t.Fatal(err)
	}
	return c.expectQuestion(t)
}

// answer picks option of the last question.
func (c *chat) answer(t *testing.T, option string) {
	t.Helper()
	if err := c.wallet.Answer(c.ctx, c.lastQuestion, option); err != nil {
		t.Fatal(err)
	}
}

// matches reports whether got is want with any text where want has "\x00".
func matches(got, want string) bool {
	before, after, _ := strings.Cut(want, "\x00")
	return strings.HasPrefix(got, before) && strings.HasSuffix(got, after)
}

// lastRequest is the model's last request: its system prompt and its messages.
func (c *chat) lastRequest(t *testing.T) (system, messages string) {
	t.Helper()
	reqs := c.llm.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	r := reqs[len(reqs)-1]
	var b strings.Builder
	for _, m := range r.Messages {
		if m.Role != "system" {
			fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
		}
	}
	return r.System(), b.String()
}

func (c *chat) runPrompt(t *testing.T, pc promptCase) {
	c.ask(t, "/prompts")
	c.answer(t, c.text("PROMPT_OPTION", "prompt", pc.title, "server", "everything"))
	for i, a := range pc.args {
		q := c.expectQuestion(t)
		var offered []string
		for _, o := range q.Options {
			if o != c.text("CONTEXT_ARG_SKIP") && o != c.text("CANCEL") {
				offered = append(offered, o)
			}
		}
		if !slices.Equal(offered, a.offered) {
			t.Errorf("argument %d: offered %q, want %q", i+1, offered, a.offered)
		}
		switch {
		case a.skip:
			c.answer(t, c.text("CONTEXT_ARG_SKIP"))
		case a.choose != "":
			c.answer(t, a.choose)
		default:
			if err := c.wallet.SendText(c.ctx, a.typed, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := c.expectText(t); got != c.text("PROMPT_USED", "prompt", pc.title, "server", "everything") {
		t.Fatalf("got %q, want the prompt's mark", got)
	}
	if got := c.expectText(t); !strings.HasPrefix(got, "you said: ") {
		t.Fatalf("the model's answer: %q", got)
	}
	_, msgs := c.lastRequest(t)
	for _, w := range pc.want {
		if !strings.Contains(msgs, w) {
			t.Errorf("the model's request lacks %q:\n%s", w, msgs)
		}
	}
}

func (c *chat) attachResource(t *testing.T, r mcp.Resource) {
	c.ask(t, "/resources")
	c.answer(t, c.text("RESOURCE_OPTION", "resource", r.Label(), "server", "everything"))
	if got := c.expectText(t); !matches(got, c.text("ATTACHED", "resource", r.Label(), "server", "everything", "size", "\x00")) {
		t.Fatalf("attach %s: %q", r.URI, got)
	}
	c.say(t, "read it")
	contents, err := c.pool.ReadResource(c.ctx, "", "everything", r.URI, mcp.ReadOptions{})
	if err != nil || len(contents) == 0 {
		t.Fatalf("read %s: %v", r.URI, err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(contents[0].Text), "\n")
	if sys, _ := c.lastRequest(t); !strings.Contains(sys, first) || !strings.Contains(sys, r.URI) {
		t.Errorf("the model's context lacks %s (%q)", r.URI, first)
	}
	c.detach(t, r.Label())
}

func (c *chat) attachTemplate(t *testing.T, tp mcp.ResourceTemplate, value, want string) {
	c.ask(t, "/resources")
	c.answer(t, c.text("TEMPLATE_OPTION", "resource", tp.Label(), "server", "everything"))
	q := c.expectQuestion(t)
	if !strings.Contains(q.Text, c.text("CONTEXT_ARG", "name", tp.Label(), "argument", "resourceId")) {
		t.Errorf("the variable's question: %q", q.Text)
	}
	if err := c.wallet.SendText(c.ctx, value, ""); err != nil {
		t.Fatal(err)
	}
	uri, _ := mcp.ExpandTemplate(tp.URITemplate, map[string]string{"resourceId": value})
	title := tp.Label() + " (" + uri + ")"
	if got := c.expectText(t); !strings.Contains(got, title) {
		t.Fatalf("attach %s: %q", uri, got)
	}
	c.say(t, "read it")
	if sys, _ := c.lastRequest(t); !strings.Contains(sys, want) {
		t.Errorf("the model's context lacks %q:\n%s", want, sys)
	}
	c.detach(t, title)
}

func (c *chat) detach(t *testing.T, title string) {
	t.Helper()
	c.ask(t, "/resources")
	c.answer(t, c.text("DETACH_OPTION", "resource", title))
	if got := c.expectText(t); got != c.text("DETACHED", "resource", title) {
		t.Fatalf("detach %s: %q", title, got)
	}
}

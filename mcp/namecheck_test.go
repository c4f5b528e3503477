package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// logBuffer is a log destination the test reads while the pool writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPackRuleNamesUnknownTool: the pack's approval policy names "ehco", which the server does
// not have: the real echo would run ungated, so the pool offers none of the server's tools and
// logs why, naming the closest tool (fail closed); a role rule naming "ad" is logged with
// "add". Fixing the pack (a policy-only update) brings the tools back on the same session;
// breaking it again drops them as soon as Update returns.
func TestPackRuleNamesUnknownTool(t *testing.T) {
	srv := serveCounted(t)
	fixed := httpServerDef("b", packs.TransportStreamableHTTP, srv.url)
	fixed.ToolAccess = &packs.ToolAccess{Roles: map[string][]string{"staff": {"echo", "add"}},
		Approval: []packs.ApprovalPolicy{{Tools: []string{"echo"}, Approvers: []string{"boss"}}}}
	broken := fixed
	broken.ToolAccess = &packs.ToolAccess{Roles: map[string][]string{"staff": {"echo", "ad"}},
		Approval: []packs.ApprovalPolicy{{Tools: []string{"ehco"}, Approvers: []string{"boss"}}}}
	logs := &logBuffer{}
	p := newPool(t, mcp.Config{Servers: []packs.Server{broken}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	run(t, p)
	eventually(t, "the pool says why b's tools are not offered", func() bool {
		return strings.Contains(logs.String(), "tools not offered")
	})
	for _, want := range []string{`\"ehco\"`, "closest: echo", "toolAccess.approval[0].tools", `\"ad\"`, "closest: add"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %s:\n%s", want, logs)
		}
	}
	if cat, _ := p.Catalog(); len(cat.Server("b")) != 0 {
		t.Fatalf("b's tools offered although its approval policy names an unknown tool: %v", toolNames(cat, "b"))
	}
	if _, err := p.Call(context.Background(), mcp.Call{Server: "b", Tool: "echo"}); !errors.Is(err, mcp.ErrUnknownTool) {
		t.Fatalf("call to b's echo: %v, want ErrUnknownTool", err)
	}

	wantReport(t, update(t, p, fixed), mcp.UpdateReport{Kept: []string{"b"}})
	waitCatalog(t, p, hasTool("b", "echo"))
	echo(t, p, "b")

	wantReport(t, update(t, p, broken), mcp.UpdateReport{Kept: []string{"b"}})
	if cat, _ := p.Catalog(); len(cat.Server("b")) != 0 {
		t.Fatalf("b's tools still offered when Update returned with the broken rule: %v", toolNames(cat, "b"))
	}
	if n := srv.opened.Load(); n != 1 {
		t.Errorf("%d sessions opened, want 1 (policy updates keep the session)", n)
	}
}

// TestFirstCallChecksDiscoveredTools: on a user-controlled server nobody has used yet, the first
// call is what lists the tools; when the pack's approval policy names a tool the server lacks,
// that listing leaves every tool out, and the call that discovered it is refused too, instead of
// running the real echo ungated.
func TestFirstCallChecksDiscoveredTools(t *testing.T) {
	ctx := context.Background()
	hs := serveHTTP(t, func() *mcpsdk.Server { return newToolServer(nil) }, newTokens("tok-alice").check)
	def := userServerDef("bank", hs.url("/mcp"))
	def.ToolAccess = &packs.ToolAccess{Approval: []packs.ApprovalPolicy{{Tools: []string{"ehco"}, Approvers: []string{"boss"}}}}
	p := newPool(t, mcp.Config{Servers: []packs.Server{def}, Credentials: openStore(t), Keyring: newKeyring(t)})
	run(t, p)
	if err := p.SaveCredentials(ctx, "alice", "bank", values("token", "tok-alice")); err != nil {
		t.Fatal(err)
	}
	if cat, _ := p.Catalog(); len(cat.Server("bank")) != 0 {
		t.Fatalf("bank's tools known before anyone used it: %v", toolNames(cat, "bank"))
	}
	if _, err := p.Call(ctx, mcp.Call{Identity: "alice", Server: "bank", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)}); !errors.Is(err, mcp.ErrUnknownTool) {
		t.Fatalf("first call to bank's echo: %v, want ErrUnknownTool", err)
	}
}

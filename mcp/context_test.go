package mcp_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store/secret"
)

// hrServer serves the demo server's HR writes, documents and prompts over streamable HTTP (and
// SSE), with a bearer token when token is set.
func hrServer(t *testing.T, token string, stateless bool) (*demoserver.Server, *httptest.Server) {
	t.Helper()
	s := demoserver.New(&demoserver.Options{Name: "hr", Writes: true, Token: token, Stateless: stateless})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return s, ts
}

// updates records the resources a pool's servers reported updated.
type updates struct {
	mu   sync.Mutex
	uris []string
	ch   chan struct{}
}

func newUpdates() *updates { return &updates{ch: make(chan struct{}, 16)} }

func (u *updates) hook(_, _, uri string) {
	u.mu.Lock()
	u.uris = append(u.uris, uri)
	u.mu.Unlock()
	u.ch <- struct{}{}
}

func (u *updates) wait(t *testing.T) {
	t.Helper()
	select {
	case <-u.ch:
	case <-time.After(30 * time.Second): // a bound on a broken test, not a timing assertion
		t.Fatal("no resource update reported")
	}
}

// TestSurfaceOverTransports: the pool lists a server's prompts (with arguments), resources,
// templates and skills, gets a prompt with its embedded resource, completes an argument and
// reads resources, over streamable HTTP (stateful 2025-11-25 and stateless 2026-07-28) and SSE.
func TestSurfaceOverTransports(t *testing.T) {
	for _, tc := range []struct {
		name, transport, path string
		stateless             bool
	}{
		{"streamable", packs.TransportStreamableHTTP, "/mcp", false},
		{"stateless", packs.TransportStreamableHTTP, "/mcp", true},
		{"sse", packs.TransportSSE, "/sse", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := hrServer(t, "", tc.stateless)
			p := newPool(t, mcp.Config{Servers: []packs.Server{httpServerDef("hr", tc.transport, ts.URL+tc.path)}})
			ctx := context.Background()
			surf, err := p.Surface(ctx, "", "hr")
			if err != nil {
				t.Fatal(err)
			}
			checkHRSurface(t, surf)
			if known, ok := p.KnownSurface("hr"); !ok || len(known.Prompts) != 2 {
				t.Errorf("KnownSurface = %+v, %v", known, ok)
			}
			cat, _ := p.Catalog()
			if len(cat.Surfaces["hr"].Prompts) != 2 {
				t.Errorf("catalog surfaces = %+v", cat.Surfaces)
			}

			res, err := p.GetPrompt(ctx, "", "hr", demoserver.PromptReviewWrite, map[string]string{"operation": "update_person", "focus": "the name"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Messages) != 2 || !strings.Contains(res.Messages[0].Text, "update_person") || !strings.Contains(res.Messages[0].Text, "the name") ||
				res.Messages[1].Resource == nil || res.Messages[1].Resource.URI != demoserver.URISafeWriteWorkflow ||
				!strings.Contains(res.Messages[1].Resource.Text, "Safe-write workflow") {
				t.Errorf("prompt = %+v", res)
			}
			got, err := p.Complete(ctx, "", "hr", mcp.CompletionRef{Prompt: demoserver.PromptReviewWrite}, "operation", "up", nil)
			if err != nil || !slices.Equal(got, []string{"update_job", "update_person", "upload_document"}) {
				t.Errorf("Complete(prompt) = %q, %v", got, err)
			}
			got, err = p.Complete(ctx, "", "hr", mcp.CompletionRef{URITemplate: demoserver.URIOperation}, "operation", "cr", nil)
			if err != nil || !slices.Equal(got, []string{"create_time_off"}) {
				t.Errorf("Complete(template) = %q, %v", got, err)
			}

			contents, err := p.ReadResource(ctx, "", "hr", demoserver.URIOpenAPI, mcp.ReadOptions{})
			if err != nil || len(contents) != 1 || contents[0].Size < 30_000 || contents[0].Binary {
				t.Fatalf("read openapi = %d contents, %v", len(contents), err)
			}
			uri, err := mcp.ExpandTemplate(demoserver.URIOperation, map[string]string{"operation": "update_job"})
			if err != nil || uri != "hollyhr://operations/update_job" {
				t.Fatalf("ExpandTemplate = %q, %v", uri, err)
			}
			contents, err = p.ReadResource(ctx, "", "hr", uri, mcp.ReadOptions{})
			if err != nil || !strings.Contains(contents[0].Text, "# update_job") {
				t.Errorf("read %s = %+v, %v", uri, contents, err)
			}
			if _, err := p.ReadResource(ctx, "", "hr", "hollyhr://nothing", mcp.ReadOptions{}); !errors.Is(err, mcp.ErrUnknownResource) {
				t.Errorf("read of an unlisted resource: %v", err)
			}
			if _, err := p.GetPrompt(ctx, "", "hr", "nothing", nil); !errors.Is(err, mcp.ErrUnknownPrompt) {
				t.Errorf("get of an unlisted prompt: %v", err)
			}
			if _, err := p.GetPrompt(ctx, "", "hr", demoserver.PromptReviewWrite, nil); !errors.Is(err, mcp.ErrProtocol) {
				t.Errorf("get without its required argument: %v", err)
			}
		})
	}
}

func checkHRSurface(t *testing.T, s mcp.Surface) {
	t.Helper()
	if len(s.Prompts) != 2 || s.Prompts[1].Name != demoserver.PromptReviewWrite {
		t.Fatalf("prompts = %+v", s.Prompts)
	}
	review := s.Prompts[1]
	if len(review.Arguments) != 2 || !review.Arguments[0].Required || review.Arguments[1].Required || review.Label() != "Review a prepared write" {
		t.Errorf("review prompt = %+v", review)
	}
	var uris []string
	for _, r := range s.Resources {
		uris = append(uris, r.URI)
	}
	if !slices.Equal(uris, []string{demoserver.URISafeWriteWorkflow, demoserver.URIDataHandling, demoserver.URIOpenAPI}) {
		t.Errorf("resources = %q", uris)
	}
	if len(s.Templates) != 1 || s.Templates[0].URITemplate != demoserver.URIOperation || !slices.Equal(s.Templates[0].Variables, []string{"operation"}) {
		t.Errorf("templates = %+v", s.Templates)
	}
	if len(s.Skills) != 1 || s.Skills[0].Name != "safe-write" || s.Skills[0].URI != demoserver.URISafeWriteSkill {
		t.Errorf("skills = %+v", s.Skills)
	}
	if !s.Completions || !s.Subscribe {
		t.Errorf("completions %v, subscribe %v", s.Completions, s.Subscribe)
	}
}

// TestResourceUpdated: a resource read with a subscription is served from the cache until the
// server reports it updated; the next read has the new text.
func TestResourceUpdated(t *testing.T) {
	srv, ts := hrServer(t, "", false)
	u := newUpdates()
	p := newPool(t, mcp.Config{Servers: []packs.Server{httpServerDef("hr", packs.TransportStreamableHTTP, ts.URL+"/mcp")}, OnResourceUpdated: u.hook})
	ctx := context.Background()
	read := func(opts mcp.ReadOptions) string {
		t.Helper()
		c, err := p.ReadResource(ctx, "", "hr", demoserver.URISafeWriteWorkflow, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c[0].Text
	}
	if !strings.Contains(read(mcp.ReadOptions{Subscribe: true}), "Safe-write workflow") {
		t.Fatal("first read")
	}
	if n := srv.Subscribers(demoserver.URISafeWriteWorkflow); n != 1 {
		t.Fatalf("%d subscriptions, want 1", n)
	}
	if err := srv.UpdateResource(ctx, demoserver.URISafeWriteWorkflow, "v2 of the workflow"); err != nil {
		t.Fatal(err)
	}
	u.wait(t)
	if got := read(mcp.ReadOptions{Subscribe: true}); got != "v2 of the workflow" {
		t.Errorf("read after the update = %q", got)
	}
	if n := srv.Subscribers(demoserver.URISafeWriteWorkflow); n != 1 {
		t.Errorf("%d subscriptions after a second read, want 1", n)
	}
}

// TestSurfaceListChanged: after the server's list_changed, the next listing is fresh, and a
// prompt or resource that disappeared is refused.
func TestSurfaceListChanged(t *testing.T) {
	srv, ts := hrServer(t, "", false)
	p := newPool(t, mcp.Config{Servers: []packs.Server{httpServerDef("hr", packs.TransportStreamableHTTP, ts.URL+"/mcp")}})
	ctx := context.Background()
	if _, err := p.Surface(ctx, "", "hr"); err != nil {
		t.Fatal(err)
	}
	srv.RemovePrompts(demoserver.PromptPlanLookup)
	srv.RemoveResources(demoserver.URIDataHandling)
	// The notifications arrive on the session's stream, and the session lists again: wait for
	// the catalog to show both gone.
	for {
		cat, changed := p.Catalog()
		s := cat.Surfaces["hr"]
		_, hasPrompt := s.Prompt(demoserver.PromptPlanLookup)
		_, hasRes := s.Resource(demoserver.URIDataHandling)
		if !hasPrompt && !hasRes {
			break
		}
		select {
		case <-changed:
		case <-time.After(30 * time.Second): // a bound on a broken test
			t.Fatalf("still listed after the server removed them: %+v", s)
		}
	}
	if _, err := p.GetPrompt(ctx, "", "hr", demoserver.PromptPlanLookup, map[string]string{"question": "q"}); !errors.Is(err, mcp.ErrUnknownPrompt) {
		t.Errorf("get of a removed prompt: %v", err)
	}
	if _, err := p.ReadResource(ctx, "", "hr", demoserver.URIDataHandling, mcp.ReadOptions{}); !errors.Is(err, mcp.ErrUnknownResource) {
		t.Errorf("read of a removed resource: %v", err)
	}
	if cat, _ := p.Catalog(); len(cat.Surfaces["hr"].Prompts) != 1 {
		t.Errorf("the catalog still has %+v", cat.Surfaces["hr"].Prompts)
	}
}

// TestSurfacePerUser: a user-controlled server's prompts and resources go through each user's
// own session, with their own credentials; a user without credentials gets none.
func TestSurfacePerUser(t *testing.T) {
	_, ts := hrServer(t, "hr-token", false)
	st := openStore(t)
	kr := newKeyring(t)
	p := newPool(t, mcp.Config{Servers: []packs.Server{userServerDef("hr", ts.URL+"/mcp")}, Credentials: st, Keyring: kr})
	ctx := context.Background()
	if _, err := p.Configure(ctx, "ana", "hr", map[string]secret.Value{"token": secret.NewValue("hr-token")}); err != nil {
		t.Fatal(err)
	}
	surf, err := p.Surface(ctx, "ana", "hr")
	if err != nil {
		t.Fatal(err)
	}
	checkHRSurface(t, surf)
	if _, err := p.GetPrompt(ctx, "ana", "hr", demoserver.PromptPlanLookup, map[string]string{"question": "who is on leave"}); err != nil {
		t.Error(err)
	}
	if _, err := p.ReadResource(ctx, "ana", "hr", demoserver.URIDataHandling, mcp.ReadOptions{}); err != nil {
		t.Error(err)
	}
	if p.UserSessions() != 1 {
		t.Errorf("%d user sessions, want ana's", p.UserSessions())
	}
	if _, err := p.Surface(ctx, "bob", "hr"); !errors.Is(err, mcp.ErrNeedsAuthentication) {
		t.Errorf("bob without credentials: %v", err)
	}
	if _, err := p.ReadResource(ctx, "", "hr", demoserver.URIDataHandling, mcp.ReadOptions{}); !errors.Is(err, mcp.ErrNeedsAuthentication) {
		t.Errorf("no identity: %v", err)
	}
	// Credentials the server now refuses are refused for prompts as for tools.
	if err := p.SaveCredentials(ctx, "cid", "hr", map[string]secret.Value{"token": secret.NewValue("wrong")}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Surface(ctx, "cid", "hr"); !errors.Is(err, mcp.ErrAuth) {
		t.Errorf("cid with a refused token: %v", err)
	}
	if s, _ := p.Status(ctx, "cid", "hr"); s != mcp.StatusFailure {
		t.Errorf("cid's status = %s, want FAILURE", s)
	}
}

// TestUpdateContextAccessKeepsSessions: promptAccess and resourceAccess are policy, not
// connection settings: changing them keeps the server's sessions and what they listed.
func TestUpdateContextAccessKeepsSessions(t *testing.T) {
	_, ts := hrServer(t, "", false)
	def := httpServerDef("hr", packs.TransportStreamableHTTP, ts.URL+"/mcp")
	p := newPool(t, mcp.Config{Servers: []packs.Server{def}})
	ctx := context.Background()
	if _, err := p.Surface(ctx, "", "hr"); err != nil {
		t.Fatal(err)
	}
	def.PromptAccess = &packs.PromptAccess{Default: packs.DefaultAll}
	def.ResourceAccess = &packs.ResourceAccess{Roles: map[string][]string{"hr": {"*"}}, ModelRead: true}
	rep, err := p.Update(ctx, []packs.Server{def}, nil)
	if err != nil || !slices.Equal(rep.Kept, []string{"hr"}) {
		t.Fatalf("update: %+v, %v", rep, err)
	}
	if s, ok := p.KnownSurface("hr"); !ok || len(s.Prompts) != 2 {
		t.Errorf("the listing went with the update: %+v", s)
	}
	if srv, _ := p.Server("hr"); !srv.ModelReads() {
		t.Error("the new policy is not in force")
	}
}

package demoserver_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/packbot/packbot/mcp/demoserver"
)

// TestTokenRequired checks both HTTP transports: no token or a wrong one gets 401 with a
// Bearer challenge whose resource_metadata document exists; the right one gets through.
func TestTokenRequired(t *testing.T) {
	srv := newServer(t, transport{})
	ts := serveHTTP(t, srv)
	for _, c := range []struct {
		path   string
		method string
		body   string
	}{
		{demoserver.PathStreamable, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{demoserver.PathStreamable, http.MethodGet, ""},
		{demoserver.PathSSE, http.MethodGet, ""},
		{demoserver.PathSSE + "?sessionid=x", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
	} {
		for _, auth := range []string{"", "Bearer wrong", "Basic dGVzdDp0ZXN0", "Bearer"} {
			req, err := http.NewRequestWithContext(t.Context(), c.method, ts.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", c.method, c.path, err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with %q: status %d, want 401", c.method, c.path, auth, resp.StatusCode)
				continue
			}
			challenges, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
			if err != nil || len(challenges) != 1 || challenges[0].Scheme != "bearer" || challenges[0].Params["realm"] != "packbot-demo" {
				t.Errorf("%s %s with %q: challenge %q (%v), want one Bearer realm=packbot-demo", c.method, c.path, auth, resp.Header.Values("WWW-Authenticate"), err)
				continue
			}
			resource := ts.URL + strings.TrimSuffix(c.path, "?sessionid=x")
			if got, want := challenges[0].Params["resource_metadata"], ts.URL+demoserver.PathResourceMetadata+strings.TrimPrefix(resource, ts.URL); got != want {
				t.Errorf("%s %s: resource_metadata %q, want %q", c.method, c.path, got, want)
			}
			if wrong := strings.HasPrefix(auth, "Bearer "); (challenges[0].Params["error"] == "invalid_token") != wrong {
				t.Errorf("%s %s with %q: error=%q", c.method, c.path, auth, challenges[0].Params["error"])
			}
			// The metadata document names the resource the challenge was for.
			prm, err := oauthex.GetProtectedResourceMetadata(t.Context(), challenges[0].Params["resource_metadata"], resource, http.DefaultClient)
			if err != nil {
				t.Errorf("resource metadata of %s: %v", resource, err)
			} else if prm.ResourceName == "" {
				t.Errorf("resource metadata of %s: %+v, want a resource name", resource, prm)
			}
		}
	}

	// The go-sdk clients: refused without the header, served with it.
	noToken := []mcp.Transport{
		&mcp.StreamableClientTransport{Endpoint: ts.URL + demoserver.PathStreamable, MaxRetries: -1},
		&mcp.SSEClientTransport{Endpoint: ts.URL + demoserver.PathSSE},
	}
	for _, tr := range noToken {
		client := mcp.NewClient(&mcp.Implementation{Name: "no-token"}, nil)
		if cs, err := client.Connect(t.Context(), tr, nil); err == nil {
			_ = cs.Close()
			t.Errorf("%T without a token: connected, want an error", tr)
		}
	}
	for _, dial := range []func(*testing.T, *demoserver.Server, *mcp.ClientOptions) *mcp.ClientSession{dialStreamable, dialSSE} {
		cs := dial(t, srv, nil)
		var rate demoserver.ExchangeRate
		callOK(t, cs, demoserver.ToolGetExchangeRate, map[string]any{"from": "GBP", "to": "EUR"}, &rate)
		if rate.Rate != 1.1682 {
			t.Errorf("GBP→EUR = %v, want 1.1682", rate.Rate)
		}
	}
}

// TestSSEPostNeedsToken opens an SSE stream with the token and checks that posting to its
// session endpoint also needs the token.
func TestSSEPostNeedsToken(t *testing.T) {
	srv := newServer(t, transport{})
	ts := serveHTTP(t, srv)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+demoserver.PathSSE, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("open SSE stream: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	endpoint := ""
	for sc := bufio.NewScanner(resp.Body); endpoint == "" && sc.Scan(); {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			endpoint = data
		}
	}
	if !strings.HasPrefix(endpoint, demoserver.PathSSE+"?sessionid=") {
		t.Fatalf("endpoint event = %q", endpoint)
	}
	initialize, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2024-11-05", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "0"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"wrong", http.StatusUnauthorized}, {testToken, http.StatusAccepted}} {
		post, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+endpoint, strings.NewReader(string(initialize)))
		if err != nil {
			t.Fatal(err)
		}
		post.Header.Set("Content-Type", "application/json")
		if c.token != "" {
			post.Header.Set("Authorization", "Bearer "+c.token)
		}
		presp, err := http.DefaultClient.Do(post)
		if err != nil {
			t.Fatalf("post: %v", err)
		}
		_ = presp.Body.Close()
		if presp.StatusCode != c.want {
			t.Errorf("POST %s with token %q: status %d, want %d", endpoint, c.token, presp.StatusCode, c.want)
		}
	}
}

// TestNoToken checks that without a token nothing asks for one and no metadata is served.
func TestNoToken(t *testing.T) {
	srv := demoserver.New(&demoserver.Options{Now: testNow})
	t.Cleanup(func() { _ = srv.Close() })
	ts := serveHTTP(t, srv)
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: ts.URL + demoserver.PathStreamable, MaxRetries: -1}, nil)
	var profiles struct{ Profiles []demoserver.Profile }
	callOK(t, cs, demoserver.ToolListProfiles, nil, &profiles)
	for path, want := range map[string]int{demoserver.PathResourceMetadata: http.StatusNotFound, demoserver.PathHealth: http.StatusOK} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

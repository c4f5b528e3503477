package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// BenchmarkCall compares one tool call through the pool with the same call on a bare go-sdk
// client session, on the same server (the quality bar: the pool adds under 30%).
func BenchmarkCall(b *testing.B) {
	args := json.RawMessage(`{"text":"hello"}`)
	for _, tr := range []string{packs.TransportStreamableHTTP, packs.TransportStdio} {
		b.Run(tr+"/bare", func(b *testing.B) {
			ctx := context.Background()
			var transport mcpsdk.Transport
			if tr == packs.TransportStdio {
				exe, _ := os.Executable()
				cmd := exec.Command(exe)
				cmd.Env = append(os.Environ(), stdioServerEnv+"=1")
				transport = &mcpsdk.CommandTransport{Command: cmd}
			} else {
				hs := serveHTTP(b, func() *mcpsdk.Server { return newToolServer(nil) }, nil)
				transport = &mcpsdk.StreamableClientTransport{Endpoint: hs.url("/mcp"), HTTPClient: &http.Client{}, MaxRetries: -1}
			}
			cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "bench"}, nil).Connect(ctx, transport, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = cs.Close() }()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "echo", Arguments: args}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tr+"/pool", func(b *testing.B) {
			ctx := context.Background()
			var def packs.Server
			if tr == packs.TransportStdio {
				exe, _ := os.Executable()
				def = packs.Server{Name: "tools", Transport: packs.TransportStdio, Command: exe, Env: map[string]string{stdioServerEnv: "1"},
					AccessMode: packs.AdminControlled, Enabled: true, TimeoutMs: 10_000, MaxSessionIdleSeconds: 1200}
			} else {
				hs := serveHTTP(b, func() *mcpsdk.Server { return newToolServer(nil) }, nil)
				def = httpServerDef("tools", tr, hs.url("/mcp"))
			}
			p, err := mcp.New(mcp.Config{Servers: []packs.Server{def}})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			c := mcp.Call{Server: "tools", Tool: "echo", Arguments: args}
			if _, err := p.Call(ctx, c); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Call(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

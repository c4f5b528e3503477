package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/packs"
)

func newMCPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Check a pack's MCP servers; run the demo MCP server",
	}
	cmd.AddCommand(newMCPSmokeCmd(a), newMCPDemoServerCmd(a))
	return cmd
}

type smokeOptions struct {
	pack    string
	server  string
	headers []string
	call    string
	args    string
	signIn  signInOptions
	elicit  string // "", elicitDecline or elicitDefaults
	schema  string // a tool whose full input and output schema to show
	json    bool
	context smokeContextOptions // --get-prompt, --read (mcp_context.go)
}

func newMCPSmokeCmd(a *app) *cobra.Command {
	var o smokeOptions
	cmd := &cobra.Command{
		Use:   "smoke",
		Short: "Connect to one MCP server of a pack: initialize, list tools, optionally call one",
		Long: `Connect to one MCP server of a pack with the pack's transport, URL or command, headers and
timeout; initialize, list every tool (name, description, input schema summary) and optionally
call one. Prints the negotiated protocol version and the time of each step. Exits 1 with the
reason in plain words when the server cannot be reached, refuses the credentials (the
WWW-Authenticate challenge is shown), or does not speak MCP.

The pack is found as 'serve' finds it (--pack, AGENT_PACK_PATH, ./agent-packs, the embedded
demo). For a user-controlled server, give the user's credentials with --header.

A server with authentication.mode: oauth2 is signed in to as command-line tools do (RFC 8252),
unless --header gives an Authorization: smoke listens on 127.0.0.1, prints the line
"Open this URL to sign in: <url>" on stderr and waits for the browser to come back there, then
uses the token. It registers itself at the authorization server unless --client-id (or the
pack's clientId) names a client, or a Client ID Metadata Document describes it (--client-metadata-url,
the pack's clientMetadataUrl, or the one 'packbot serve' publishes at PACKBOT_PUBLIC_URL) and the
authorization server supports those. A 403 insufficient_scope is answered by signing in again
with the union of the scopes (at most 3 times), a token refused right after sign-in (the
server moved to another authorization server) by signing in again there. The tokens are
forgotten at exit unless --data-dir keeps them, sealed under MCP_CONFIG_ENCRYPTION_KEY, for the
next run, which then needs no browser. A server with authentication.mode client_credentials or
workload_identity gets packbot's own token, as serve gets it.

A server may ask questions during the call (elicitation). On a terminal smoke asks them field
by field (a default is shown in brackets: Enter keeps it); otherwise --elicit says what to
answer: decline (the default), or defaults, which accepts the form filled with its defaults
and fails when a required field has none.`,
		Example: `  packbot mcp smoke --server bank
  packbot mcp smoke --pack packs/wise-corporate --server wise --header "Authorization=Bearer $TOKEN"
  packbot mcp smoke --server bank --call get_exchange_rate --args '{"from":"EUR","to":"USD"}'
  packbot mcp smoke --server hr --get-prompt review_prepared_write --args '{"operation":"update_person"}'
  packbot mcp smoke --server hr --read hollyhr://guides/safe-write-workflow
  packbot mcp smoke --pack my-pack.yaml --server notes --data-dir ~/.packbot-smoke
  packbot mcp smoke --server bank --schema send_money
  packbot mcp smoke --server hr --call update_employee --args '{"id":7}' --elicit defaults --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runMCPSmoke(ctx, a, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.pack, "pack", "", "agent pack file or folder (default: as serve finds it)")
	f.StringVar(&o.server, "server", "", "name of the MCP server in the pack (default: the pack's only server)")
	f.StringArrayVar(&o.headers, "header", nil, "extra request header NAME=VALUE (repeatable); overrides the pack's")
	f.StringVar(&o.call, "call", "", "tool to call after listing")
	f.StringVar(&o.args, "args", "{}", "JSON object of arguments for --call")
	f.StringVar(&o.elicit, "elicit", "", "what to answer the server's questions when not on a terminal: decline (default) or defaults")
	f.StringVar(&o.schema, "schema", "", "show this tool's full input and output schema")
	f.BoolVar(&o.json, "json", false, "print the report as JSON (tools with their schemas, the call's result)")
	o.signIn.bind(f)
	o.context.bind(f)
	return cmd
}

func runMCPSmoke(ctx context.Context, a *app, o smokeOptions) error {
	p, err := a.loadPack(o.pack, a.stderr)
	if err != nil {
		return err
	}
	srv, err := pickServer(p, o.server)
	if err != nil {
		return err
	}
	headers, err := o.check(srv)
	if err != nil {
		return err
	}
	sc, err := o.context.options(o.call, o.args)
	if err != nil {
		return err
	}
	w := a.stdout
	if o.json {
		w = a.stderr // stdout carries the JSON report only
	}
	fmt.Fprintf(w, "server %s: %s %s\n", srv.Name, srv.Transport, target(srv))
	auth, err := openSmokeAuth(ctx, a, o, srv, headers, w)
	if err != nil {
		return err
	}
	defer auth.close(ctx)
	asker := newSmokeAsker(a, o.elicit)
	so := mcp.SmokeOptions{Headers: headers, Tool: o.call, Arguments: json.RawMessage(o.args), Logger: a.logger,
		Asker: asker, Machine: auth.machine, Context: sc}
	rep, err := auth.smoke(ctx, so)
	if o.json {
		if jerr := printSmokeJSON(a.stdout, srv, rep, err); jerr != nil {
			return jerr
		}
	} else {
		printSmoke(w, rep, o.schema)
		printSmokeContext(w, rep)
	}
	return smokeOutcome(a, o, srv, rep, err, asker)
}

// check refuses flags that would be ignored or cannot work, and returns the --header values.
func (o *smokeOptions) check(srv packs.Server) (map[string]string, error) {
	if err := o.signIn.check(srv); err != nil {
		return nil, err
	}
	switch o.elicit {
	case "", elicitDecline, elicitDefaults:
	default:
		return nil, fmt.Errorf("--elicit %q: use %s or %s", o.elicit, elicitDecline, elicitDefaults)
	}
	headers := make(map[string]string, len(o.headers))
	for _, h := range o.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--header %q: use NAME=VALUE", h)
		}
		headers[http.CanonicalHeaderKey(strings.TrimSpace(k))] = v
	}
	return headers, nil
}

// smokeOutcome says why a smoke test failed, if it did, and sets the exit status.
func smokeOutcome(a *app, o smokeOptions, srv packs.Server, rep *mcp.SmokeReport, err error, asker *smokeAsker) error {
	switch {
	case asker.failure != nil:
		fmt.Fprintf(a.stderr, "FAILED: %v\n", asker.failure)
	case err != nil:
		fmt.Fprintf(a.stderr, "FAILED: %s\n", smokeReason(err, srv))
	case rep.Call != nil && rep.Call.IsError:
		fmt.Fprintf(a.stderr, "FAILED: the tool %s answered with an error (see above)\n", o.call)
	case o.schema != "" && !slices.ContainsFunc(rep.Tools, func(t mcp.Tool) bool { return t.Name == o.schema }):
		fmt.Fprintf(a.stderr, "FAILED: --schema %s: the server offers no such tool\n", o.schema)
	default:
		return nil
	}
	return exitError{code: 1}
}

// pickServer finds the server to smoke-test.
func pickServer(p *packs.Pack, name string) (packs.Server, error) {
	var names []string
	for _, s := range p.MCP.Servers {
		if s.Name == name || (name == "" && len(p.MCP.Servers) == 1) {
			return s, nil
		}
		names = append(names, s.Name)
	}
	if len(names) == 0 {
		return packs.Server{}, fmt.Errorf("%s: the pack has no MCP servers", p.Source)
	}
	if name == "" {
		return packs.Server{}, fmt.Errorf("%s: say which server with --server: %s", p.Source, strings.Join(names, ", "))
	}
	return packs.Server{}, fmt.Errorf("%s: no MCP server %q; the pack has: %s", p.Source, name, strings.Join(names, ", "))
}

func target(s packs.Server) string {
	if s.Transport == packs.TransportStdio {
		return strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
	}
	return s.URL
}

func printSmoke(w io.Writer, rep *mcp.SmokeReport, schema string) {
	if rep == nil {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, st := range rep.Steps {
		fmt.Fprintf(tw, "  %s\t%s\n", st.Name, st.Took.Round(10*time.Microsecond))
	}
	_ = tw.Flush()
	if rep.Protocol != "" {
		fmt.Fprintf(w, "protocol %s, server %s %s\n", rep.Protocol, rep.ServerName, rep.ServerVersion)
	}
	if len(rep.Steps) < 2 {
		return
	}
	fmt.Fprintf(w, "%d tool(s) listed, %d offered\n", rep.Listed, len(rep.Tools))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, t := range rep.Tools {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.Name, oneLine(t.Description, 60), mcp.SchemaSummary(t.InputSchema))
	}
	for _, l := range rep.LeftOut {
		fmt.Fprintf(tw, "  %s\tnot offered: %s\t\n", l.Name, l.Reason)
	}
	_ = tw.Flush()
	printSchema(w, rep, schema)
	if c := rep.Call; c != nil {
		status := "ok"
		if c.IsError {
			status = "tool error"
		}
		fmt.Fprintf(w, "call: %s\n%s\n", status, c.Text)
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// smokeReason says in plain words why a smoke test failed, and what to try.
func smokeReason(err error, s packs.Server) string {
	var aerr *mcp.AuthError
	switch {
	case errors.As(err, &aerr):
		msg := fmt.Sprintf("the server refused the credentials (HTTP %d)", aerr.Status)
		if aerr.Challenge != "" {
			msg += "\n  WWW-Authenticate: " + aerr.Challenge
		}
		if s.OAuth() {
			return msg + "\n  the OAuth token was refused: check the pack's authentication.scopes and issuer"
		}
		return msg + "\n  give them with --header \"Authorization=Bearer …\" or in the server's headers in the pack"
	case errors.Is(err, mcp.ErrTimeout):
		return fmt.Sprintf("no answer within %d ms (timeoutMs)\n  %v", s.TimeoutMs, err)
	case errors.Is(err, mcp.ErrUnreachable):
		if s.Transport == packs.TransportStdio {
			return fmt.Sprintf("could not start or talk to %q\n  %v", s.Command, err)
		}
		return fmt.Sprintf("cannot reach %s\n  %v", s.URL, err)
	case errors.Is(err, mcp.ErrProtocol):
		return fmt.Sprintf("%s does not answer as an MCP server (%s transport)\n  %v", target(s), s.Transport, err)
	}
	return err.Error()
}

type demoServerOptions struct {
	http  string
	token string
}

func newMCPDemoServerCmd(a *app) *cobra.Command {
	var o demoServerOptions
	cmd := &cobra.Command{
		Use:   "demo-server",
		Short: "Run the demo bank MCP server (stdio, or HTTP with --http)",
		Long: `Run the demo MCP server: a small in-memory bank ledger (exchange rates, profiles, balances,
transfers, recipients, send_money, invoices). Without --http it speaks MCP over stdin and
stdout, as the embedded demo pack starts it; with --http it serves streamable HTTP at /mcp and
SSE at /sse. With --token (env DEMO_MCP_TOKEN) every HTTP request needs
"Authorization: Bearer <token>". Logs go to stderr.`,
		Example: `  packbot mcp demo-server
  packbot mcp demo-server --http 127.0.0.1:8091 --token dev-wise-token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runDemoServer(ctx, a, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.http, "http", "", "serve HTTP on this address instead of stdio")
	f.StringVar(&o.token, "token", "", "bearer token HTTP clients must send (env DEMO_MCP_TOKEN)")
	return cmd
}

func runDemoServer(ctx context.Context, a *app, o demoServerOptions) error {
	token := firstNonEmpty(o.token, a.getenv("DEMO_MCP_TOKEN"))
	s := demoserver.New(&demoserver.Options{Logger: a.logger, Token: token, Version: version()})
	if o.http == "" {
		if token != "" {
			a.logger.WarnContext(ctx, "--token applies to HTTP only; stdio is not authenticated")
		}
		return quietCancel(ctx, s.RunStdio(ctx, os.Stdin, a.stdout))
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.http)
	if err != nil {
		return fmt.Errorf("listen on %s (--http): %w", o.http, err)
	}
	a.logger.InfoContext(ctx, "demo MCP server listening", slog.String("streamable_http", "http://"+ln.Addr().String()+demoserver.PathStreamable),
		slog.String("sse", "http://"+ln.Addr().String()+demoserver.PathSSE), slog.Bool("token", token != ""))
	return quietCancel(ctx, s.RunHTTP(ctx, ln))
}

// quietCancel turns the error of a server stopped by a signal into a clean exit.
func quietCancel(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

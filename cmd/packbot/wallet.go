package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/channel/didcomm"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/store/sqlstore"
)

type walletOptions struct {
	dir         string
	invitation  string
	credentials []string
	name        string
	lang        string
	http        string
	endpoint    string
	scripted    bool
}

func newWalletCmd(a *app) *cobra.Command {
	var o walletOptions
	cmd := &cobra.Command{
		Use:   "wallet",
		Short: "A terminal wallet (DIDComm holder) to chat with any packbot",
		Long: `A DIDComm holder in the terminal, on the same code as packbot's own channel: it connects to a
bot from its invitation, shows texts, the menu (numbered, with badges) and questions (numbered
answers), and presents credentials after asking.

Interactive mode: type text to chat; ":m" asks for the menu, ":m N" selects item N, ":a N"
answers the last question with option N, ":q" quits, ":h" helps. When the bot asks for a
credential you are asked y/n first.

Scripted mode (--scripted) reads actions and writes events as JSON lines, for tests and demos:
  in:  {"action":"text","content":"…"}  {"action":"menu"}  {"action":"select","option":"ID"}
       {"action":"answer","question":"ID","response":"Yes"}  {"action":"profile","name":"…","lang":"es"}
       {"action":"present","request":"ID"}  {"action":"decline","request":"ID"}  {"action":"ping"}
       {"action":"quit"}
  out: ready, connected, text, menu, question, proof-request, proof-answer, no-credential,
       profile, invitation, receipts, pong, sent, error — each {"event":NAME,…}

The wallet keeps its keys, connection and port in --data-dir, so running it again reconnects to
the same bot without an invitation.`,
		Example: `  packbot wallet --invitation http://127.0.0.1:8080/invitation --credential ana.json --name Ana --lang es
  packbot wallet --scripted < actions.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runWallet(ctx, a, o, cmd.InOrStdin())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.invitation, "invitation", "", "the bot's invitation: URL (the short <bot>/invitation too), JSON, or a file holding either (needed the first time)")
	f.StringArrayVar(&o.credentials, "credential", nil, "credential file to hold (repeatable; from 'packbot credential issue')")
	f.StringVar(&o.name, "name", "packbot wallet", "display name sent in the profile")
	f.StringVar(&o.lang, "lang", "en", "preferred language sent in the profile")
	f.StringVar(&o.http, "http", "", "address for the wallet's own endpoint (default: 127.0.0.1 and a port kept in --data-dir)")
	f.StringVar(&o.endpoint, "endpoint", "", "URL the bot reaches the wallet at, when not http://<--http address> (e.g. http://host.docker.internal:7000 for a bot in docker compose)")
	f.BoolVar(&o.scripted, "scripted", false, "JSON lines on stdin and stdout instead of the interactive prompt")
	cmd.AddCommand(&cobra.Command{
		Use:   "did",
		Short: "Print the wallet's holder DID (the subject for 'packbot credential issue')",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := holderKey(o.dir)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, k.DID())
			return err
		},
	})
	cmd.PersistentFlags().StringVar(&o.dir, "data-dir", "wallet-data", "where the wallet keeps its keys, store and connection")
	return cmd
}

// walletState is what the wallet remembers between runs.
type walletState struct {
	Addr string `json:"addr"`
	// Endpoint is the URL the bot reaches the wallet at (--endpoint), when not http://Addr.
	Endpoint   string `json:"endpoint,omitempty"`
	Connection string `json:"connection,omitempty"`
	Invitation string `json:"invitation,omitempty"`
}

func loadState(dir string) (walletState, error) {
	var s walletState
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

func saveState(dir string, s walletState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "state.json"), append(b, '\n'), 0o600)
}

// holderKey loads the wallet's holder key, creating it on first use.
func holderKey(dir string) (*credential.Key, error) {
	path := filepath.Join(dir, "holder.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k, err := credential.GenerateKey()
		if err != nil {
			return nil, err
		}
		if b, err = json.Marshal(k); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		return k, os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		return nil, err
	}
	k := &credential.Key{}
	if err := json.Unmarshal(b, k); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// readArg returns s, or the content of the file s names.
func readArg(s string) ([]byte, error) {
	if b, err := os.ReadFile(s); err == nil {
		return b, nil
	}
	return []byte(s), nil
}

func runWallet(ctx context.Context, a *app, o walletOptions, in io.Reader) error {
	r, err := loadWallet(ctx, o)
	if err != nil {
		return err
	}
	ln, err := r.listen(ctx)
	if err != nil {
		return err
	}
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(o.dir, "wallet.db"), &sqlstore.Options{Logger: a.logger})
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	defer func() { _ = st.Close() }()
	key, err := keyFile(filepath.Join(o.dir, "master.key"))
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	w, err := didcomm.OpenWallet(didcomm.WalletConfig{Records: st, Endpoint: r.endpoint, Label: o.name, MasterKey: key,
		Holder: r.holder, Credentials: r.creds, Logger: a.logger})
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	defer func() { _ = w.Close() }()
	srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	ui := newWalletUI(a, o)
	events := make(chan didcomm.WalletEvent, 64)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(runCtx, func(_ context.Context, e didcomm.WalletEvent) { events <- e }) }()
	ui.out(map[string]any{"event": "ready", "did": r.holder.DID(), "endpoint": r.endpoint, "listen": r.state.Addr},
		"wallet %s listening on %s, reached at %s", r.holder.DID(), r.state.Addr, r.endpoint)
	if err := r.connect(ctx, w, ui); err != nil {
		return err
	}
	return r.loop(ctx, w, ui, events, runDone, readLines(runCtx, in))
}

// walletRun is one run of the terminal wallet.
type walletRun struct {
	o        walletOptions
	holder   *credential.Key
	creds    [][]byte
	state    walletState
	inv      []byte // the invitation given (nil: none)
	endpoint string // where the bot reaches the wallet
}

// loadWallet reads what the wallet keeps in --data-dir and what its flags name (the
// credentials, the invitation, whose bot must be reachable).
func loadWallet(ctx context.Context, o walletOptions) (*walletRun, error) {
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return nil, err
	}
	r := &walletRun{o: o}
	var err error
	if r.holder, err = holderKey(o.dir); err != nil {
		return nil, err
	}
	for _, c := range o.credentials {
		b, err := os.ReadFile(c)
		if err != nil {
			return nil, fmt.Errorf("--credential: %w", err)
		}
		r.creds = append(r.creds, []byte(strings.TrimSpace(string(b))))
	}
	if r.state, err = loadState(o.dir); err != nil {
		return nil, fmt.Errorf("wallet state: %w", err)
	}
	if r.inv, err = readInvitation(ctx, o.invitation); err != nil {
		return nil, err
	}
	return r, nil
}

// listen opens the wallet's endpoint (on the port of the last run unless --http says) and
// settles the URL the bot reaches it at.
func (r *walletRun) listen(ctx context.Context) (net.Listener, error) {
	addr := firstNonEmpty(r.o.http, r.state.Addr, "127.0.0.1:0")
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wallet endpoint %s (set --http): %w", addr, err)
	}
	r.state.Addr = ln.Addr().String()
	if r.o.endpoint != "" {
		r.state.Endpoint = strings.TrimRight(r.o.endpoint, "/")
	}
	r.endpoint = firstNonEmpty(r.state.Endpoint, "http://"+r.state.Addr)
	return ln, nil
}

// connect connects to the bot of the invitation, or resumes the connection of the last run,
// and remembers it.
func (r *walletRun) connect(ctx context.Context, w *didcomm.Wallet, ui *walletUI) error {
	switch {
	case r.inv != nil:
		conn, err := w.Connect(ctx, string(r.inv))
		if err != nil {
			return err
		}
		r.state.Connection, r.state.Invitation = conn, strings.TrimSpace(string(r.inv))
	case r.state.Connection == "":
		return errors.New("no connection yet: give the bot's --invitation")
	default:
		ui.connected(r.state.Connection, "")
		ui.out(map[string]any{"event": "connected", "connection": r.state.Connection, "resumed": true},
			"resumed the connection %s", r.state.Connection)
		if err := w.SendProfile(ctx, r.state.Connection, r.o.name, r.o.lang); err != nil {
			ui.fail(err)
		}
	}
	if err := saveState(r.o.dir, r.state); err != nil {
		return fmt.Errorf("wallet state: %w", err)
	}
	return nil
}

// readLines sends the lines of in until it ends (then closes the channel) or ctx is done.
func readLines(ctx context.Context, in io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines
}

// loop shows the wallet's events and acts on the input lines until ctx is done, the input
// ends or says to quit, or the wallet stops (its error is returned).
func (r *walletRun) loop(ctx context.Context, w *didcomm.Wallet, ui *walletUI, events <-chan didcomm.WalletEvent,
	runDone <-chan error, lines <-chan string) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-runDone:
			return err
		case e := <-events:
			if e.Connected && e.Conn == r.state.Connection {
				ui.connected(e.Conn, e.Label)
				if err := w.SendProfile(ctx, e.Conn, r.o.name, r.o.lang); err != nil {
					ui.fail(err)
				}
			}
			ui.receive(ctx, w, e)
		case line, ok := <-lines:
			if !ok {
				return nil // end of input
			}
			if quit := ui.act(ctx, w, strings.TrimSpace(line)); quit {
				return nil
			}
		}
	}
}

// readInvitation reads --invitation (a URL, JSON, or a file holding either; nil when not given),
// fetches it when it is a short URL, and checks that the bot it names answers.
func readInvitation(ctx context.Context, arg string) ([]byte, error) {
	if arg == "" {
		return nil, nil
	}
	inv, err := readArg(arg)
	if err == nil {
		inv, err = fetchInvitation(ctx, inv)
	}
	if err == nil {
		err = checkBotReachable(ctx, string(inv))
	}
	return inv, err
}

// fetchInvitation returns inv, or the invitation it points to when it is a short invitation
// URL (RFC 0434: no ?oob= or ?c_i=, such as <PACKBOT_PUBLIC_URL>/invitation), fetched from the
// bot as phone wallets fetch it.
func fetchInvitation(ctx context.Context, inv []byte) ([]byte, error) {
	u, err := url.Parse(strings.TrimSpace(string(inv)))
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Query().Has("oob") || u.Query().Has("c_i") {
		return inv, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("invitation %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the invitation from %s: %w; is packbot serve running there?", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %s", resp.Status)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch the invitation from %s: %w", u, err)
	}
	return bytes.TrimSpace(body), nil
}

// checkBotReachable reads the invitation (a clear error when it is cut short) and makes sure
// its endpoint answers at all, so that a bot that is down or unreachable from here is said so
// now, not by a connection that never completes.
func checkBotReachable(ctx context.Context, invitation string) error {
	endpoint, err := didcomm.InvitationEndpoint(invitation)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return fmt.Errorf("the invitation's endpoint %q is not a URL: %w", endpoint, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the bot is unreachable at %s (from the invitation): %w; is packbot serve running, and does its "+
			"PACKBOT_PUBLIC_URL name an address this machine can reach?", endpoint, err)
	}
	_ = resp.Body.Close()
	return nil // any HTTP answer (the endpoint takes only POST) means the bot is there
}

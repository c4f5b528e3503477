package didcomm

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/channeltest"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/store"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func randomKey(t testing.TB) []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// botServer is the bot's channel mounted on an HTTP server, as in packbot serve.
type botServer struct {
	ch  *Channel
	srv *httptest.Server
	key []byte
}

// startBot opens the channel on st with master key key (new when nil) behind a loopback server.
func startBot(t testing.TB, st store.Records, key []byte, addr string) *botServer {
	t.Helper()
	return startBotWith(t, st, key, addr, nil)
}

// startBotWith is startBot with a change to the channel's configuration.
func startBotWith(t testing.TB, st store.Records, key []byte, addr string, change func(*Config)) *botServer {
	t.Helper()
	if key == nil {
		key = randomKey(t)
	}
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	if addr != "" { // a restart keeps its address, so wallets' records stay valid
		ln, err := listen(addr)
		if err != nil {
			t.Fatal(err)
		}
		srv.Listener = ln
	}
	srv.Start()
	cfg := Config{Records: st, PublicURL: srv.URL, Label: "packbot test bot", MasterKey: key,
		Profile: channel.Profile{DisplayName: "packbot test bot"}, Logger: testLogger(t)}
	if change != nil {
		change(&cfg)
	}
	ch, err := Open(t.Context(), cfg)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	ch.Mount(mux)
	b := &botServer{ch: ch, srv: srv, key: key}
	t.Cleanup(b.stop)
	return b
}

func (b *botServer) stop() {
	b.srv.Close()
	_ = b.ch.Close()
}

// testWallet is a real holder agent on its own loopback server, driven through the
// channeltest.Wallet interface.
type testWallet struct {
	w      *Wallet
	bot    *Channel
	conn   string // the wallet's own connection id
	botCon string // the bot's id for the same connection
	queue  channeltest.Queue[WalletEvent]
	// hold, when set, sees each event before the queue does (and may keep the wallet busy).
	hold   atomic.Pointer[func(WalletEvent)]
	holder *credential.Key
	claims map[string]string
}

// issuerForTests signs the test credentials; the harness's proof request trusts it.
var issuerForTests = credential.DemoIssuer()

func newTestWallet(t testing.TB, ctx context.Context, bot *Channel, st store.Records, claims map[string]string, creds func(holder *credential.Key) [][]byte) (*testWallet, error) {
	holder, err := credential.GenerateKey()
	if err != nil {
		return nil, err
	}
	var vcs [][]byte
	if creds != nil {
		vcs = creds(holder)
	} else {
		vc, err := issueForTests(holder, claims)
		if err != nil {
			return nil, err
		}
		vcs = [][]byte{vc}
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	w, err := OpenWallet(WalletConfig{Records: st, Namespace: "wallet-" + holder.DID()[8:20] + "/", Endpoint: srv.URL, Label: claims["name"],
		MasterKey: randomKey(t), Holder: holder, Credentials: vcs, Logger: testLogger(t)})
	if err != nil {
		srv.Close()
		return nil, err
	}
	mux.Handle("/", w.Handler())
	tw := &testWallet{w: w, bot: bot, holder: holder, claims: claims}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(runCtx, func(_ context.Context, e WalletEvent) {
			if h := tw.hold.Load(); h != nil {
				(*h)(e)
			}
			tw.queue.Push(e)
		})
	}()
	t.Cleanup(func() {
		stop()
		<-done
		srv.Close()
		_ = w.Close()
	})
	inv, err := bot.Invitation(ctx)
	if err != nil {
		return nil, err
	}
	if tw.conn, err = w.Connect(ctx, inv); err != nil {
		return nil, err
	}
	for {
		e, err := tw.next(ctx)
		if err != nil {
			return nil, err
		}
		if e.Connected && e.Conn == tw.conn {
			break
		}
	}
	rec, err := w.a.connection(tw.conn)
	if err != nil {
		return nil, err
	}
	// The wallet completes when it has sent its last message; afgo completes the bot's side of
	// the exchange asynchronously, so wait until the bot knows the connection.
	for {
		if tw.botCon, err = bot.a.connectionByDIDs(rec.TheirDID, rec.MyDID); err == nil {
			return tw, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the bot never completed the connection: %w", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (tw *testWallet) next(ctx context.Context) (WalletEvent, error) { return tw.queue.Next(ctx) }

func (tw *testWallet) Conn() string { return tw.botCon }

func (tw *testWallet) SendText(ctx context.Context, content, replyTo string) error {
	_, err := tw.w.SendText(ctx, tw.conn, content, replyTo)
	return err
}

func (tw *testWallet) RequestMenu(ctx context.Context) error { return tw.w.RequestMenu(ctx, tw.conn) }
func (tw *testWallet) SelectMenu(ctx context.Context, id string) error {
	return tw.w.SelectMenu(ctx, tw.conn, id)
}
func (tw *testWallet) Answer(ctx context.Context, qid, r string) error {
	return tw.w.Answer(ctx, tw.conn, qid, r)
}
func (tw *testWallet) SendProfile(ctx context.Context, name, lang string) error {
	return tw.w.SendProfile(ctx, tw.conn, name, lang)
}
func (tw *testWallet) Present(ctx context.Context, id string) error { return tw.w.Present(ctx, id) }
func (tw *testWallet) Decline(ctx context.Context, id string) error { return tw.w.Decline(ctx, id) }

// Next returns the next message; connection events and proof answers are not messages. A
// credential offered is accepted, and the credential issued is the message.
func (tw *testWallet) Next(ctx context.Context) (channeltest.Received, error) {
	for {
		e, err := tw.next(ctx)
		if err != nil {
			return channeltest.Received{}, err
		}
		if e.CredentialOffer != nil {
			if err := tw.w.AcceptCredential(ctx, e.CredentialOffer.ID); err != nil {
				return channeltest.Received{}, err
			}
			continue
		}
		if e.Credential != nil {
			return channeltest.Received{ID: e.ID, Credential: e.Credential}, nil
		}
		if e.Connected || e.ProofAnswer != nil {
			continue
		}
		return channeltest.Received{ID: e.ID, Text: e.Text, Menu: e.Menu, Question: e.Question, ProofRequest: e.ProofRequest,
			Profile: e.Profile, Invitation: e.Invitation, Receipts: e.Receipts}, nil
	}
}

// nextAnswer returns the verifier's next answer to a presentation.
func (tw *testWallet) nextAnswer(ctx context.Context) (*ProofAnswer, error) {
	for {
		e, err := tw.next(ctx)
		if err != nil {
			return nil, err
		}
		if e.ProofAnswer != nil {
			return e.ProofAnswer, nil
		}
	}
}

// Hold re-issues the wallet's credential with claims (the others stay), to the same holder.
func (tw *testWallet) Hold(_ context.Context, claims map[string]string) error {
	if tw.claims == nil {
		return errors.New("a wallet given its credentials cannot hold others")
	}
	held := maps.Clone(tw.claims)
	maps.Copy(held, claims)
	vc, err := issueForTests(tw.holder, held)
	if err != nil {
		return err
	}
	tw.claims = held
	tw.w.Hold([][]byte{vc})
	return nil
}

// issueForTests issues the test issuer's EmployeeCredential with claims to holder. A claim
// written as a JSON array (roles=["a","b"]) becomes an array attribute, as an issuer would put
// it.
func issueForTests(holder *credential.Key, claims map[string]string) ([]byte, error) {
	attrs := make(map[string]any, len(claims))
	for k, v := range claims {
		var arr []any
		if strings.HasPrefix(v, "[") && json.Unmarshal([]byte(v), &arr) == nil {
			attrs[k] = arr
		} else {
			attrs[k] = v
		}
	}
	return credential.Issue(issuerForTests, credential.IssueRequest{Types: []string{"EmployeeCredential"}, Subject: holder.DID(),
		Attributes: attrs, IssuedAt: time.Now().Add(-time.Minute)})
}

func listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

var (
	_ channeltest.Wallet = (*testWallet)(nil)
	_ channeltest.Holder = (*testWallet)(nil)
)

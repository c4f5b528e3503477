package channeltest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/packbot/packbot/channel"
)

// Memory is an in-memory channel with every capability, for tests of the bot: wallets connect
// with [Memory.Connect] and talk to the bot without any wire in between. Presentations are
// always "verified" with the wallet's claims; it checks nothing, so it has no place outside tests.
type Memory struct {
	seq     atomic.Int64
	mu      sync.Mutex
	h       channel.Handler
	ctx     context.Context
	ready   chan struct{}
	wallets map[string]*MemoryWallet
}

// NewMemory returns a channel that is not running yet.
func NewMemory() *Memory {
	return &Memory{ready: make(chan struct{}), wallets: make(map[string]*MemoryWallet)}
}

func (m *Memory) id(prefix string) string { return fmt.Sprintf("%s-%d", prefix, m.seq.Add(1)) }

// messageID is the wire id of a wallet's message: unique across channels (a bot that restarts on
// the same store gets a new channel, whose messages must not look like redeliveries).
func (m *Memory) messageID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return "in-" + hex.EncodeToString(b[:])
}

// Name is "memory".
func (m *Memory) Name() string { return "memory" }

// Run delivers wallet events to h until ctx is done.
func (m *Memory) Run(ctx context.Context, h channel.Handler) error {
	m.mu.Lock()
	m.h, m.ctx = h, ctx
	m.mu.Unlock()
	close(m.ready)
	<-ctx.Done()
	m.mu.Lock()
	m.h = nil
	m.mu.Unlock()
	return nil
}

// deliver hands an event to the bot's handler, in the calling wallet's order, and returns the
// handler's error (the event was not accepted: a real wallet would send it again).
func (m *Memory) deliver(ctx context.Context, e channel.Event) error {
	select {
	case <-m.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	m.mu.Lock()
	h, hctx := m.h, m.ctx
	m.mu.Unlock()
	if h == nil {
		return fmt.Errorf("memory channel stopped")
	}
	id := ""
	switch e := e.(type) {
	case channel.TextReceived:
		id = e.MessageID
	case channel.MenuSelected:
		id = e.MessageID
	case channel.QuestionAnswered:
		id = e.MessageID
	}
	if err := h.HandleEvent(hctx, id, e); err != nil {
		return fmt.Errorf("memory channel: event not accepted: %w", err)
	}
	return nil
}

// Connect connects a new wallet holding a credential with claims.
func (m *Memory) Connect(ctx context.Context, claims map[string]string) (*MemoryWallet, error) {
	m.mu.Lock()
	conn := m.id("conn")
	for m.wallets[conn] != nil { // taken by Restore
		conn = m.id("conn")
	}
	w := &MemoryWallet{m: m, conn: conn, claims: claims, proofs: make(map[string]string)}
	m.wallets[w.conn] = w
	m.mu.Unlock()
	return w, m.deliver(ctx, channel.ConnectionReady{Conn: w.conn, Label: claims["name"]})
}

// NewMemoryHarness returns a new [Memory] channel as a [Harness]: wallets connect with
// [Memory.Connect] and hold an EmployeeCredential.
func NewMemoryHarness() Harness {
	m := NewMemory()
	return Harness{
		Channel: m,
		Connect: func(ctx context.Context, claims map[string]string) (Wallet, error) {
			return m.Connect(ctx, claims)
		},
		ProofRequest: channel.ProofRequest{W3C: &channel.W3CRequest{CredentialType: "EmployeeCredential"}},
	}
}

// Restore registers the wallet of a connection made before (the bot restarts on the same store
// and the wallet is still there): messages to conn reach it; no event is delivered.
func (m *Memory) Restore(conn string, claims map[string]string) *MemoryWallet {
	w := &MemoryWallet{m: m, conn: conn, claims: claims, proofs: make(map[string]string)}
	m.mu.Lock()
	m.wallets[conn] = w
	m.mu.Unlock()
	return w
}

func (m *Memory) wallet(conn string) (*MemoryWallet, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.wallets[conn]
	if !ok {
		return nil, fmt.Errorf("memory channel: %s: %w", conn, channel.ErrUnknownConnection)
	}
	return w, nil
}

func (m *Memory) send(conn string, r Received) (string, error) {
	w, err := m.wallet(conn)
	if err != nil {
		return "", err
	}
	r.ID = r.wireID()
	if r.ID == "" {
		r.ID = m.id("msg")
	}
	w.inbox.Push(r)
	return r.ID, nil
}

// Close implements channel.Channel; the in-memory channel holds nothing to release.
func (m *Memory) Close() error { return nil }

// SendText implements channel.Channel.
func (m *Memory) SendText(_ context.Context, conn string, t channel.Text) (string, error) {
	return m.send(conn, Received{Text: &t})
}

// SendMenu implements channel.MenuSender.
func (m *Memory) SendMenu(_ context.Context, conn string, menu channel.Menu) error {
	_, err := m.send(conn, Received{Menu: &menu})
	return err
}

// AskQuestion implements channel.QuestionAsker.
func (m *Memory) AskQuestion(_ context.Context, conn string, q channel.Question) (string, error) {
	return m.send(conn, Received{Question: &q})
}

// RequestProof implements channel.ProofRequester.
func (m *Memory) RequestProof(_ context.Context, conn string, r channel.ProofRequest) (string, error) {
	id, err := m.send(conn, Received{ProofRequest: &r})
	if err == nil {
		w, _ := m.wallet(conn)
		w.mu.Lock()
		w.proofs[id] = id
		w.mu.Unlock()
	}
	return id, err
}

// SendProfile implements channel.ProfileSender.
func (m *Memory) SendProfile(_ context.Context, conn string, p channel.Profile) error {
	_, err := m.send(conn, Received{Profile: &p})
	return err
}

// SendInvitation implements channel.InvitationSender.
func (m *Memory) SendInvitation(_ context.Context, conn string, inv channel.Invitation) error {
	_, err := m.send(conn, Received{Invitation: &inv})
	return err
}

// SendReceipts implements channel.ReceiptSender.
func (m *Memory) SendReceipts(_ context.Context, conn string, r channel.Receipts) error {
	_, err := m.send(conn, Received{Receipts: &r})
	return err
}

// OfferCredential implements channel.CredentialOfferer: the wallet receives the offer.
func (m *Memory) OfferCredential(_ context.Context, conn string, o channel.CredentialOffer) error {
	_, err := m.send(conn, Received{Credential: &o})
	return err
}

// MemoryWallet is a wallet of a [Memory] channel.
type MemoryWallet struct {
	m      *Memory
	conn   string
	claims map[string]string
	inbox  Queue[Received]
	mu     sync.Mutex
	proofs map[string]string // proof request ids received
}

// Conn implements Wallet.
func (w *MemoryWallet) Conn() string { return w.conn }

// Next implements Wallet.
func (w *MemoryWallet) Next(ctx context.Context) (Received, error) { return w.inbox.Next(ctx) }

// SendText implements Wallet.
func (w *MemoryWallet) SendText(ctx context.Context, content, replyTo string) error {
	return w.m.deliver(ctx, channel.TextReceived{Conn: w.conn, MessageID: w.m.messageID(), ReplyTo: replyTo, Content: content})
}

// RequestMenu implements Wallet.
func (w *MemoryWallet) RequestMenu(ctx context.Context) error {
	return w.m.deliver(ctx, channel.MenuRequested{Conn: w.conn})
}

// SelectMenu implements Wallet.
func (w *MemoryWallet) SelectMenu(ctx context.Context, optionID string) error {
	return w.m.deliver(ctx, channel.MenuSelected{Conn: w.conn, MessageID: w.m.messageID(), OptionID: optionID})
}

// Answer implements Wallet.
func (w *MemoryWallet) Answer(ctx context.Context, questionID, response string) error {
	return w.m.deliver(ctx, channel.QuestionAnswered{Conn: w.conn, MessageID: w.m.messageID(), QuestionID: questionID, Response: response})
}

// SendProfile implements Wallet.
func (w *MemoryWallet) SendProfile(ctx context.Context, displayName, language string) error {
	return w.m.deliver(ctx, channel.ProfileReceived{Conn: w.conn, DisplayName: displayName, PreferredLanguage: language})
}

// Present implements Wallet: the result is verified with the wallet's claims; its digest is
// that of the claims and the request.
func (w *MemoryWallet) Present(ctx context.Context, requestID string) error {
	w.mu.Lock()
	claims := make(map[string]any, len(w.claims))
	for k, v := range w.claims {
		claims[k] = v
	}
	w.mu.Unlock()
	presented, _ := json.Marshal(map[string]any{"request": requestID, "claims": claims}) // strings: cannot fail
	digest := sha256.Sum256(presented)
	return w.m.deliver(ctx, channel.PresentationResult{Conn: w.conn, RequestID: requestID, Outcome: channel.Verified, Claims: claims,
		Digest: hex.EncodeToString(digest[:])})
}

// Hold implements Holder: the wallet's credential now has claims (those it had are replaced by
// the ones given; the others stay).
func (w *MemoryWallet) Hold(_ context.Context, claims map[string]string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	held := make(map[string]string, len(w.claims)+len(claims))
	for k, v := range w.claims {
		held[k] = v
	}
	for k, v := range claims {
		held[k] = v
	}
	w.claims = held
	return nil
}

// Decline implements Wallet.
func (w *MemoryWallet) Decline(ctx context.Context, requestID string) error {
	return w.m.deliver(ctx, channel.PresentationResult{Conn: w.conn, RequestID: requestID, Outcome: channel.Declined, Reason: "declined by the user"})
}

// Fail answers the proof request with an outcome other than Verified (NoCredential, Declined,
// VerificationFailed), as a real channel reports them.
func (w *MemoryWallet) Fail(ctx context.Context, requestID string, outcome channel.Outcome, reason string) error {
	return w.m.deliver(ctx, channel.PresentationResult{Conn: w.conn, RequestID: requestID, Outcome: outcome, Reason: reason})
}

// Interface guards.
var (
	_ channel.Channel           = (*Memory)(nil)
	_ channel.MenuSender        = (*Memory)(nil)
	_ channel.QuestionAsker     = (*Memory)(nil)
	_ channel.ProofRequester    = (*Memory)(nil)
	_ channel.ProfileSender     = (*Memory)(nil)
	_ channel.InvitationSender  = (*Memory)(nil)
	_ channel.ReceiptSender     = (*Memory)(nil)
	_ channel.CredentialOfferer = (*Memory)(nil)
	_ Wallet                    = (*MemoryWallet)(nil)
	_ Holder                    = (*MemoryWallet)(nil)
)

package didcomm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/common/service"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
)

// Config configures the bot's DIDComm channel.
type Config struct {
	// Records keeps the agent's keys, connections and protocol state (packbot's store).
	Records store.Records
	// PublicURL is where wallets reach packbot's HTTP server (http://127.0.0.1:8080); the
	// agent's endpoint is PublicURL + "/didcomm".
	PublicURL string
	// Label names the bot in invitations; Profile is what it sends as its own profile.
	Label   string
	Profile channel.Profile
	// MasterKey (32 bytes) locks the agent's private keys in the store; every replica sharing a
	// database must use the same key.
	MasterKey []byte
	// MaxBodyBytes bounds an inbound envelope (default 1 MiB).
	MaxBodyBytes int64
	HTTPClient   *http.Client
	Logger       *slog.Logger
	Now          func() time.Time
	// ProofTimeout is how long a proof request waits for the wallet's answer before the bot is
	// told it timed out (default DefaultProofTimeout).
	ProofTimeout time.Duration
	// Undelivered, when set, is called once for every message that could not be delivered
	// (each is also logged at WARN), with its reason: ReasonNoRoute, ReasonRefused,
	// ReasonHTTPStatus, ReasonTimeout or ReasonError. packbot serve counts them on /metrics.
	Undelivered func(reason string)
}

// EndpointPath is where the channel receives envelopes on packbot's HTTP server.
const EndpointPath = "/didcomm"

// Channel is the bot's side of the embedded DIDComm agent: a [channel.Channel] with every
// capability.
type Channel struct {
	a      *agent
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	proofs *proofs

	mu      sync.Mutex
	handler channel.Handler
	runCtx  context.Context
}

// Open builds the agent on cfg.Records. It does not start delivering events: mount it, then Run.
func Open(ctx context.Context, cfg Config) (*Channel, error) {
	if cfg.Records == nil || cfg.PublicURL == "" {
		return nil, errors.New("didcomm: Records and PublicURL are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Label == "" {
		cfg.Label = "packbot"
	}
	a, err := openAgent(agentConfig{
		Records: cfg.Records, Namespace: "didcomm/", Endpoint: strings.TrimRight(cfg.PublicURL, "/") + EndpointPath,
		Label: cfg.Label, MasterKey: cfg.MasterKey, HTTPClient: cfg.HTTPClient, MaxBodyBytes: cfg.MaxBodyBytes,
		Logger: cfg.Logger.With("component", "didcomm"), Undelivered: cfg.Undelivered,
	})
	if err != nil {
		return nil, err
	}
	c := &Channel{a: a, cfg: cfg, log: cfg.Logger.With("component", "didcomm"), now: cfg.Now}
	c.proofs = newProofs(a, c.log, cfg.Now, cfg.ProofTimeout)
	if _, err := a.invitation(ctx); err != nil {
		return nil, errors.Join(err, a.close())
	}
	return c, nil
}

// Close implements channel.Channel: it stops the agent. Call it after Run has returned.
func (c *Channel) Close() error { return c.a.close() }

// Name implements channel.Channel.
func (c *Channel) Name() string { return "didcomm" }

// Mount registers the inbound endpoint and GET /invitation on packbot's server.
func (c *Channel) Mount(mux *http.ServeMux) {
	mux.Handle(EndpointPath, c.a.inbound)
	mux.HandleFunc("GET /invitation", c.serveInvitation)
}

// Invitation returns the bot's reusable invitation as a URL wallets can scan.
func (c *Channel) Invitation(ctx context.Context) (string, error) {
	inv, err := c.ConnectionInvitation(ctx)
	return inv.URL, err
}

// ConnectionInvitation implements channel.Inviter: the bot's reusable out-of-band invitation,
// whose short form is GET /invitation on the bot's server.
func (c *Channel) ConnectionInvitation(ctx context.Context) (channel.ConnectionInvitation, error) {
	inv, err := c.a.invitation(ctx)
	if err != nil {
		return channel.ConnectionInvitation{}, err
	}
	short := strings.TrimRight(c.cfg.PublicURL, "/") + "/invitation"
	u, err := InvitationURL(short, inv)
	if err != nil {
		return channel.ConnectionInvitation{}, err
	}
	return channel.ConnectionInvitation{URL: u, ShortURL: short, Label: inv.Label}, nil
}

// SetLabel implements channel.Relabeler: the invitation is made again with label on its next
// request (GET /invitation, ConnectionInvitation); wallets holding the previous one still
// connect with it.
func (c *Channel) SetLabel(label string) {
	if label == "" {
		label = "packbot"
	}
	c.a.label.Store(&label)
}

// Run delivers inbound events to h until ctx is done.
func (c *Channel) Run(ctx context.Context, h channel.Handler) error {
	c.mu.Lock()
	c.handler, c.runCtx = h, ctx
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.handler = nil
		c.mu.Unlock()
	}()
	// Unanswered proof requests time out while the channel runs.
	expireCtx, stopExpire := context.WithCancel(ctx)
	expired := make(chan struct{})
	go func() { defer close(expired); c.proofs.expire(expireCtx, c.emit) }()
	defer func() { stopExpire(); <-expired }()
	return c.a.run(ctx, c.inbound, func(ctx context.Context, connID, label string) error {
		return c.emit(ctx, "", channel.ConnectionReady{Conn: connID, Label: label})
	})
}

// errNotRunning: an event arrived while Run is not delivering.
var errNotRunning = errors.New("didcomm: channel not running")

// emit hands e (whose DIDComm message id is id) to the handler and returns its error: the
// envelope is then answered 503, not acknowledged.
func (c *Channel) emit(ctx context.Context, id string, e channel.Event) error {
	c.mu.Lock()
	h := c.handler
	c.mu.Unlock()
	if h == nil {
		return errNotRunning
	}
	if err := h.HandleEvent(ctx, id, e); err != nil {
		return fmt.Errorf("%w: %w", errNotAccepted, err)
	}
	return nil
}

// inbound turns a DIDComm message into an event, or answers protocol chores itself. Its error
// (the bot did not accept the event) makes the envelope be answered 503.
func (c *Channel) inbound(ctx context.Context, connID string, m service.DIDCommMsgMap) error {
	typ := normalizeType(m.Type())
	raw, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	reply, id := replyTo(m), m.ID()
	switch typ {
	case typeBasicMessage:
		var b basicMessage
		if c.decode(ctx, connID, typ, raw, &b) {
			t, _ := time.Parse(time.RFC3339Nano, b.SentTime)
			return c.emit(ctx, id, channel.TextReceived{Conn: connID, MessageID: m.ID(), ReplyTo: reply, Content: b.Content, SentAt: t})
		}
	case typeMenuRequest:
		return c.emit(ctx, id, channel.MenuRequested{Conn: connID})
	case typePerform:
		var p performMessage
		if c.decode(ctx, connID, typ, raw, &p) {
			return c.emit(ctx, id, channel.MenuSelected{Conn: connID, MessageID: m.ID(), OptionID: p.Name})
		}
	case typeAnswer:
		var a answerMessage
		if c.decode(ctx, connID, typ, raw, &a) {
			thid, _ := m.ThreadID()
			return c.emit(ctx, id, channel.QuestionAnswered{Conn: connID, MessageID: m.ID(), QuestionID: thid, Response: a.Response})
		}
	case typeProfile:
		var p profileMessage
		if c.decode(ctx, connID, typ, raw, &p) {
			if err := c.emit(ctx, id, channel.ProfileReceived{Conn: connID, DisplayName: p.Profile.DisplayName,
				Description: p.Profile.Description, PreferredLanguage: p.Profile.PreferredLanguage}); err != nil {
				return err
			}
			if p.SendBackYour {
				c.sendProfile(ctx, connID, m.ID())
			}
		}
	case typeRequestProfile:
		c.sendProfile(ctx, connID, m.ID())
	case typePing:
		var p pingMessage
		if c.decode(ctx, connID, typ, raw, &p) && (p.ResponseRequested == nil || *p.ResponseRequested) {
			resp := pingMessage{header: header{Type: typePingResponse, ID: uuid.NewString(), Thread: &thread{ThID: m.ID()}}}
			if err := c.a.send(ctx, connID, resp); err != nil {
				c.log.WarnContext(ctx, "didcomm ping response", "connection", logid.Conn(connID), "err", err)
			}
		}
	case typePresentation, typePresentationProblem:
		if e, ok := c.proofs.inbound(ctx, connID, typ, m, raw); ok {
			if err := c.emit(ctx, id, e); err != nil {
				return err
			}
			thid, _ := m.ThreadID()
			c.proofs.forget(ctx, thid)
		}
	case typeRequestCredential, typeCredentialAck, typeCredentialProblem:
		c.credentialInbound(ctx, connID, typ, m, raw)
	case typeReceipts, typeRequestReceipt, typePingResponse, typePresentationAck:
		c.log.DebugContext(ctx, "didcomm message", "connection", connID, "type", typ)
	default:
		c.log.InfoContext(ctx, "didcomm message of an unsupported type ignored", "connection", logid.Conn(connID), "type", typ)
	}
	return nil
}

// decode reads a message body, logging (without content) when it is malformed.
func (c *Channel) decode(ctx context.Context, connID, typ string, raw []byte, v any) bool {
	if err := json.Unmarshal(raw, v); err != nil {
		c.log.WarnContext(ctx, "didcomm message refused", "connection", logid.Conn(connID), "type", typ, "reason", "malformed", "err", err)
		return false
	}
	return true
}

// replyTo is the id of the message m answers: ~thread.pthid (Credo's convention for basic
// messages), else a thid that is not m's own id.
func replyTo(m service.DIDCommMsgMap) string {
	if p := m.ParentThreadID(); p != "" {
		return p
	}
	if thid, err := m.ThreadID(); err == nil && thid != m.ID() {
		return thid
	}
	return ""
}

func (c *Channel) sendProfile(ctx context.Context, connID, thid string) {
	msg := profileMessage{header: header{Type: typeProfile, ID: uuid.NewString(), Thread: &thread{ThID: thid}},
		Profile: profile{DisplayName: c.cfg.Profile.DisplayName, Description: c.cfg.Profile.Description}}
	if err := c.a.send(ctx, connID, msg); err != nil {
		c.log.WarnContext(ctx, "didcomm profile answer", "connection", logid.Conn(connID), "err", err)
	}
}

// SendText implements channel.Channel.
func (c *Channel) SendText(ctx context.Context, conn string, t channel.Text) (string, error) {
	msg := basicMessage{header: header{Type: typeBasicMessage, ID: idOr(t.ID)}, SentTime: sentTime(c.now()), Content: t.Content}
	if t.ReplyTo != "" {
		msg.Thread = &thread{PThID: t.ReplyTo}
	}
	return msg.ID, c.a.send(ctx, conn, msg)
}

// SendMenu implements channel.MenuSender.
func (c *Channel) SendMenu(ctx context.Context, conn string, m channel.Menu) error {
	msg := menuMessage{header: header{Type: typeMenu, ID: idOr(m.ID)}, Title: m.Title, Description: m.Description,
		Options: make([]menuOption, len(m.Options))}
	for i, o := range m.Options {
		msg.Options[i] = menuOption{Name: o.ID, Title: o.Title, Description: o.Description, Disabled: o.Disabled}
	}
	return c.a.send(ctx, conn, msg)
}

// AskQuestion implements channel.QuestionAsker; the question's id is its thread.
func (c *Channel) AskQuestion(ctx context.Context, conn string, q channel.Question) (string, error) {
	msg := questionMessage{header: header{Type: typeQuestion, ID: idOr(q.ID)}, QuestionText: q.Text,
		QuestionDetail: q.Detail, Nonce: uuid.NewString(), ValidResponses: make([]validResponse, len(q.Options))}
	for i, o := range q.Options {
		msg.ValidResponses[i] = validResponse{Text: o}
	}
	return msg.ID, c.a.send(ctx, conn, msg)
}

// SendProfile implements channel.ProfileSender.
func (c *Channel) SendProfile(ctx context.Context, conn string, p channel.Profile) error {
	return c.a.send(ctx, conn, profileMessage{header: header{Type: typeProfile, ID: idOr(p.ID)},
		Profile: profile{DisplayName: p.DisplayName, Description: p.Description}})
}

// SendInvitation implements channel.InvitationSender with an in-band out-of-band 1.1 invitation.
func (c *Channel) SendInvitation(ctx context.Context, conn string, inv channel.Invitation) error {
	msg := oobInvitation{header: header{Type: typeOOBInvitation11, ID: idOr(inv.ID)}, Label: inv.Label,
		HandshakeProtocols: []string{"https://didcomm.org/didexchange/1.0"}}
	switch {
	case inv.URL != "":
		parsed, err := ParseInvitation(inv.URL)
		if err != nil {
			return fmt.Errorf("didcomm: send invitation: %w", err)
		}
		msg.Services = parsed.Services
		msg.Label = firstNonEmpty(inv.Label, parsed.Label)
	case inv.DID != "":
		msg.Services = []any{inv.DID}
	default:
		return fmt.Errorf("didcomm: send invitation: %w: no DID or URL", channel.ErrRefused)
	}
	return c.a.send(ctx, conn, msg)
}

// SendReceipts implements channel.ReceiptSender.
func (c *Channel) SendReceipts(ctx context.Context, conn string, r channel.Receipts) error {
	msg := receiptsMessage{header: header{Type: typeReceipts, ID: idOr(r.ID)}}
	for _, id := range r.MessageIDs {
		msg.Receipts = append(msg.Receipts, receipt{MessageID: id, State: r.State, Timestamp: c.now().Unix()})
	}
	return c.a.send(ctx, conn, msg)
}

// RequestProof implements channel.ProofRequester with present-proof 2.0 and a DIF presentation
// definition built from r.
func (c *Channel) RequestProof(ctx context.Context, conn string, r channel.ProofRequest) (string, error) {
	return c.proofs.request(ctx, conn, r)
}

// idOr is id, or a fresh one when empty.
func idOr(id string) string {
	if id == "" {
		return uuid.NewString()
	}
	return id
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// Interface guards.
var (
	_ channel.Channel          = (*Channel)(nil)
	_ channel.MenuSender       = (*Channel)(nil)
	_ channel.QuestionAsker    = (*Channel)(nil)
	_ channel.ProofRequester   = (*Channel)(nil)
	_ channel.ProfileSender    = (*Channel)(nil)
	_ channel.InvitationSender = (*Channel)(nil)
	_ channel.ReceiptSender    = (*Channel)(nil)
	_ channel.HTTPMounter      = (*Channel)(nil)
	_ channel.Inviter          = (*Channel)(nil)
)

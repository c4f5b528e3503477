package didcomm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hyperledger/aries-framework-go/pkg/client/didexchange"
	"github.com/hyperledger/aries-framework-go/pkg/client/outofband"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/common/service"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/dispatcher"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/transport"
	"github.com/hyperledger/aries-framework-go/pkg/framework/aries"
	"github.com/hyperledger/aries-framework-go/pkg/framework/aries/api"
	afgoctx "github.com/hyperledger/aries-framework-go/pkg/framework/context"
	"github.com/hyperledger/aries-framework-go/pkg/kms"
	"github.com/hyperledger/aries-framework-go/pkg/secretlock/local"
	"github.com/hyperledger/aries-framework-go/pkg/store/connection"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
)

// agentConfig configures the DIDComm agent shared by the bot's channel and the terminal wallet.
type agentConfig struct {
	Records store.Records
	// Namespace prefixes every record this agent keeps ("didcomm/" for the bot).
	Namespace string
	// Endpoint is the public URL where peers POST envelopes to this agent.
	Endpoint string
	// Label is the agent's name in invitations and DID exchange.
	Label string
	// MasterKey (32 bytes) locks the agent's private keys in the store.
	MasterKey    []byte
	HTTPClient   *http.Client
	MaxBodyBytes int64
	Logger       *slog.Logger
	// AcceptOnReceipt answers each well-formed envelope 202 as soon as it is read and handles it
	// afterwards, in order (see inboundTransport.received); run handles them. Wallets only.
	AcceptOnReceipt bool
	// Undelivered, when set, is called once for each message that could not be delivered, with
	// the reason (ReasonNoRoute, ReasonRefused, …).
	Undelivered func(reason string)
}

// inboundFunc receives a message addressed to this agent, with the connection it came on. An
// error means the message was not accepted: its envelope is answered 503.
type inboundFunc func(ctx context.Context, connID string, msg service.DIDCommMsgMap) error

// connectionFunc is told when a connection completes (ready for chat).
type connectionFunc func(ctx context.Context, connID, theirLabel string) error

// agent is one aries-framework-go instance, and the only place that touches afgo's clients.
type agent struct {
	cfg agentConfig
	// label is the name in the invitations made from now on (cfg.Label until SetLabel).
	label   atomic.Pointer[string]
	log     *slog.Logger
	fw      *aries.Aries
	ctx     *afgoctx.Provider
	oob     *outofband.Client
	dex     *didexchange.Client
	lookup  *connection.Lookup
	inbound *inboundTransport
	out     *outboundTransport
	msgs    *messageService
	life    context.Context // the agent's lifecycle context (storage operations)
	stop    context.CancelFunc
	closed  sync.Once
	closeEr error

	// sending counts the dispatches in flight (see send); close waits for them. closing, under
	// sendMu, refuses new ones once close has begun.
	sendMu  sync.Mutex
	sending sync.WaitGroup
	closing bool

	mu      sync.Mutex
	byDIDs  map[[2]string]string // (myDID, theirDID) → connection id
	records map[string]*connection.Record
}

// openAgent builds the framework on packbot's store. Its event loops start in run.
func openAgent(cfg agentConfig) (*agent, error) {
	if len(cfg.MasterKey) != 32 {
		return nil, errors.New("didcomm: master key must be 32 bytes")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	bridgeAFGOLogs(cfg.Logger)
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = newHTTPClient()
	}
	life, stop := context.WithCancel(context.Background())
	a := &agent{
		cfg: cfg, log: cfg.Logger, life: life, stop: stop,
		byDIDs: make(map[[2]string]string), records: make(map[string]*connection.Record),
	}
	a.inbound = &inboundTransport{endpoint: cfg.Endpoint, maxBody: cfg.MaxBodyBytes, log: cfg.Logger}
	if cfg.AcceptOnReceipt {
		a.inbound.received = make(chan []byte, receiveQueue)
	}
	a.msgs = &messageService{a: a}

	lock, err := local.NewService(strings.NewReader(base64.URLEncoding.EncodeToString(cfg.MasterKey)), nil)
	if err != nil {
		stop()
		return nil, fmt.Errorf("didcomm: secret lock: %w", err)
	}
	a.out = newOutboundTransport(life, cfg.HTTPClient, cfg.Logger)
	auth, anon := newPackers(&interopFixer{})
	sp := newStorageProvider(life, cfg.Records, cfg.Namespace+"store/")
	peerVDR, err := newCachedPeerVDR(sp)
	if err != nil {
		stop()
		return nil, err
	}
	a.fw, err = aries.New(
		aries.WithPacker(auth, anon),
		aries.WithStoreProvider(sp),
		aries.WithVDR(peerVDR), // before afgo's own peer VDR, which it shadows
		aries.WithProtocolStateStoreProvider(newStorageProvider(life, cfg.Records, cfg.Namespace+"state/")),
		aries.WithSecretLock(lock),
		aries.WithInboundTransport(a.inbound),
		aries.WithOutboundTransports(a.out),
		// Registered before afgo's defaults, so it also takes present-proof 2.0 from afgo's service.
		aries.WithProtocols(api.ProtocolSvcCreator{
			Create: func(api.Provider) (dispatcher.ProtocolService, error) { return a.msgs, nil },
		}),
		aries.WithMediaTypeProfiles([]string{transport.MediaTypeAIP2RFC0019Profile, transport.MediaTypeProfileDIDCommAIP1}),
	)
	if err != nil {
		stop()
		return nil, fmt.Errorf("didcomm: start framework: %w", err)
	}
	if err := a.clients(); err != nil {
		return nil, errors.Join(err, a.close())
	}
	if err := a.checkMasterKey(life); err != nil {
		return nil, errors.Join(err, a.close())
	}
	return a, nil
}

// ErrMasterKey: the master key cannot unlock the agent's keys kept in the store (they were
// locked with another key).
var ErrMasterKey = errors.New("the DIDComm master key does not unlock the agent's stored keys")

// checkMasterKey opens one of the agent's stored private keys, if it has any: with another
// master key than the one they were locked with, the agent would start and then refuse every
// envelope ("no recipient key of this agent").
func (a *agent) checkMasterKey(ctx context.Context) error {
	ns := a.cfg.Namespace + "store/" + strings.ToLower(kms.AriesWrapperStoreName)
	rs, err := a.cfg.Records.QueryRecords(ctx, ns)
	if err != nil {
		return fmt.Errorf("didcomm: read stored keys: %w", err)
	}
	if len(rs) == 0 {
		return nil
	}
	if _, err := a.ctx.KMS().Get(rs[0].Key); err != nil {
		return fmt.Errorf("didcomm: %w (%d stored keys; key %s: %w)", ErrMasterKey, len(rs), rs[0].Key, err)
	}
	return nil
}

func (a *agent) clients() error {
	var err error
	if a.ctx, err = a.fw.Context(); err != nil {
		return fmt.Errorf("didcomm: framework context: %w", err)
	}
	if a.oob, err = outofband.New(a.ctx); err != nil {
		return fmt.Errorf("didcomm: out-of-band client: %w", err)
	}
	if a.dex, err = didexchange.New(a.ctx); err != nil {
		return fmt.Errorf("didcomm: did-exchange client: %w", err)
	}
	if a.lookup, err = connection.NewLookup(a.ctx); err != nil {
		return fmt.Errorf("didcomm: connection lookup: %w", err)
	}
	return nil
}

// close stops the framework. Safe after a partial open, and idempotent.
func (a *agent) close() error {
	a.closed.Do(func() {
		a.stop() // ends the deliveries in flight (their transport runs on a.life)
		a.sendMu.Lock()
		a.closing = true
		a.sendMu.Unlock()
		a.sending.Wait()
		if a.fw != nil {
			if err := a.fw.Close(); err != nil {
				a.closeEr = fmt.Errorf("didcomm: close framework: %w", err)
			}
		}
	})
	return a.closeEr
}

// run accepts DID exchange requests and reports completed connections until ctx is done.
func (a *agent) run(ctx context.Context, onInbound inboundFunc, onConnection connectionFunc) error {
	a.msgs.set(ctx, onInbound)
	defer a.msgs.clear()
	if a.inbound.received != nil {
		rctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { a.inbound.receive(rctx) })
		defer wg.Wait()
		defer stop()
	}

	actions := make(chan service.DIDCommAction, 16)
	states := make(chan service.StateMsg, 16)
	if err := a.dex.RegisterActionEvent(actions); err != nil {
		return fmt.Errorf("didcomm: did-exchange actions: %w", err)
	}
	defer func() { _ = a.dex.UnregisterActionEvent(actions) }()
	if err := a.dex.RegisterMsgEvent(states); err != nil {
		return fmt.Errorf("didcomm: did-exchange states: %w", err)
	}
	defer func() { _ = a.dex.UnregisterMsgEvent(states) }()

	for {
		select {
		case <-ctx.Done():
			return nil
		case act := <-actions:
			// Every request or response on our invitation is accepted: who may do what is
			// decided later, by credentials.
			act.Continue(nil)
		case st := <-states:
			if st.Type == service.PostState && st.StateID == "abandoned" {
				a.abandoned(ctx, st)
				continue
			}
			if st.Type != service.PostState || st.StateID != "completed" {
				continue
			}
			props, ok := st.Properties.(didexchange.Event)
			if !ok {
				continue
			}
			rec, err := a.lookup.GetConnectionRecord(props.ConnectionID())
			if err != nil {
				a.log.WarnContext(ctx, "didcomm connection completed but not found", "connection", logid.Conn(props.ConnectionID()), "err", err)
				continue
			}
			a.remember(rec)
			a.log.InfoContext(ctx, "didcomm connection completed", "connection", logid.Conn(rec.ConnectionID), "their_label", rec.TheirLabel)
			if err := onConnection(ctx, rec.ConnectionID, rec.TheirLabel); err != nil {
				// The connection's first message tells the bot about it instead.
				a.log.WarnContext(ctx, "didcomm connection completed but not reported", "connection", logid.Conn(rec.ConnectionID), "err", err)
			}
		}
	}
}

// abandoned reports a DID exchange afgo gave up on — most often because its response could not
// be delivered (a wallet's mediator refused it, or is down). The connection stays "abandoned",
// never ready; its id and the reason are logged once, and an undelivered response is counted.
func (a *agent) abandoned(ctx context.Context, st service.StateMsg) {
	connID, cause := "", ""
	if props, ok := st.Properties.(didexchange.Event); ok {
		connID = props.ConnectionID()
	}
	if e, ok := st.Properties.(error); ok {
		cause = e.Error()
	}
	reason, endpoint, undelivered := parseUndelivered(cause)
	if !undelivered {
		a.log.WarnContext(ctx, "didcomm connection abandoned", "connection", logid.Conn(connID), "reason", "protocol", "err", cause)
		return
	}
	// The message that failed is the one afgo was answering st.Msg with.
	sent := didexchange10 + "request" // to an invitation
	if st.Msg != nil {
		switch t := st.Msg.Type(); {
		case strings.HasSuffix(t, "/request"):
			sent = didexchange10 + "response"
		case strings.HasSuffix(t, "/response"):
			sent = didexchange10 + "complete"
		}
	}
	a.log.WarnContext(ctx, "didcomm message not delivered", "connection", logid.Conn(connID), "type", sent,
		"endpoint", endpointHost(endpoint), "reason", reason, "state", "abandoned", "err", cause)
	if a.cfg.Undelivered != nil {
		a.cfg.Undelivered(reason)
	}
}

func (a *agent) remember(rec *connection.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.records) >= connectionCacheSize {
		// Bounded: a forgotten connection is read from the store again when it speaks.
		clear(a.records)
		clear(a.byDIDs)
	}
	a.records[rec.ConnectionID] = rec
	a.byDIDs[[2]string{rec.MyDID, rec.TheirDID}] = rec.ConnectionID
}

// connectionCacheSize bounds the connection records kept in memory (the store has them all).
const connectionCacheSize = 10_000

// connection returns the completed connection with id connID.
func (a *agent) connection(connID string) (*connection.Record, error) {
	a.mu.Lock()
	rec, ok := a.records[connID]
	a.mu.Unlock()
	if ok {
		return rec, nil
	}
	rec, err := a.lookup.GetConnectionRecord(connID)
	if err != nil {
		return nil, errUnknownConnection(connID, err)
	}
	if rec.State != "completed" {
		return nil, errUnknownConnection(connID, fmt.Errorf("state %s", rec.State))
	}
	a.remember(rec)
	return rec, nil
}

// connectionByDIDs returns the id of the connection between myDID and theirDID.
func (a *agent) connectionByDIDs(myDID, theirDID string) (string, error) {
	a.mu.Lock()
	id, ok := a.byDIDs[[2]string{myDID, theirDID}]
	a.mu.Unlock()
	if ok {
		return id, nil
	}
	rec, err := a.lookup.GetConnectionRecordByDIDs(myDID, theirDID)
	if err != nil {
		return "", fmt.Errorf("no connection between %s and %s: %w", myDID, theirDID, err)
	}
	a.remember(rec)
	return rec.ConnectionID, nil
}

// send sends a DIDComm v1 message on a connection. The message keeps its own ~thread.
//
// It returns ctx's error as soon as ctx is done. afgo's dispatcher takes no context, so the
// dispatch runs in a goroutine of the agent's (close waits for it): one that ctx cut short ends
// on its own, within deliveryTimeout, and its message may still reach the peer; a message sent
// again carries the same id.
func (a *agent) send(ctx context.Context, connID string, msg any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("didcomm: send to %s: %w", connID, err)
	}
	rec, err := a.connection(connID)
	if err != nil {
		a.log.WarnContext(a.life, "didcomm message not delivered", "connection", logid.Conn(connID), "type", messageType(msg),
			"reason", ReasonNoRoute, "err", err)
		if a.cfg.Undelivered != nil {
			a.cfg.Undelivered(ReasonNoRoute)
		}
		return err
	}
	// The dispatcher wants its own map type; afgo's struct conversion drops promoted fields, so
	// go through encoding/json.
	raw, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("didcomm: encode message: %w", err)
	}
	m, err := service.ParseDIDCommMsgMap(raw)
	if err != nil {
		return fmt.Errorf("didcomm: encode message: %w", err)
	}
	// Once the sending goroutine has the map, it is afgo's: its JSON encoding deletes and
	// restores keys, so nothing here reads the map again (the type is taken first).
	typ := m.Type()
	if endpoint, err := a.route(rec.TheirDID); err != nil {
		return a.undelivered(connID, typ, endpoint, &deliveryError{Endpoint: endpoint, Reason: ReasonNoRoute, Err: err})
	}
	a.sendMu.Lock()
	if a.closing {
		a.sendMu.Unlock()
		return fmt.Errorf("didcomm: send %s to %s: the agent is closed", typ, connID)
	}
	a.sending.Add(1)
	a.sendMu.Unlock()
	done := make(chan error, 1)
	go func() {
		defer a.sending.Done()
		done <- a.ctx.OutboundDispatcher().SendToDID(m, rec.MyDID, rec.TheirDID)
	}()
	select {
	case err := <-done:
		if err != nil {
			return a.undelivered(connID, typ, "", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("didcomm: send %s to %s: %w", typ, connID, ctx.Err())
	}
}

// route returns the endpoint messages to theirDID go to, or why there is none.
func (a *agent) route(theirDID string) (string, error) {
	doc, err := a.ctx.VDRegistry().Resolve(theirDID)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", shortDID(theirDID), err)
	}
	dest, err := service.CreateDestination(doc.DIDDocument)
	if err != nil {
		return "", err
	}
	endpoint, err := dest.ServiceEndpoint.URI()
	if err != nil || !supportedScheme(endpoint) {
		return endpoint, fmt.Errorf("endpoint %q is not http(s) or ws(s)", clipKey(endpoint))
	}
	return endpoint, nil
}

// undelivered reports a message that could not be delivered — one WARN line with the
// connection, the message type, the endpoint and the reason, and the Undelivered hook — and
// returns the error for the caller.
func (a *agent) undelivered(connID, msgType, endpoint string, err error) error {
	reason, ep := undeliveredReason(err)
	if endpoint == "" {
		endpoint = ep
	}
	a.log.WarnContext(a.life, "didcomm message not delivered", "connection", logid.Conn(connID), "type", msgType,
		"endpoint", endpointHost(endpoint), "reason", reason, "err", err)
	if a.cfg.Undelivered != nil {
		a.cfg.Undelivered(reason)
	}
	return fmt.Errorf("didcomm: send %s to %s: %w (%w)", msgType, connID, ErrUndelivered, err)
}

// messageService is a protocol service for every message type this package handles itself
// (basic message, action menu, question-answer, user profile, receipts, trust ping, present-proof
// 2.0): it hands each inbound message on with its connection id.
type messageService struct {
	a  *agent
	mu sync.Mutex
	fn inboundFunc
	// ctx is the running channel's context, handed to fn with each message.
	ctx context.Context
}

func (s *messageService) set(ctx context.Context, fn inboundFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx, s.fn = ctx, fn
}

func (s *messageService) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx, s.fn = nil, nil
}

// Name implements dispatcher.ProtocolService.
func (s *messageService) Name() string { return "packbot" }

// Accept implements dispatcher.ProtocolService.
func (s *messageService) Accept(msgType string) bool { return knownTypes[msgType] }

// Initialize implements dispatcher.ProtocolService.
func (s *messageService) Initialize(any) error { return nil }

// HandleOutbound implements dispatcher.ProtocolService; messages go out through agent.send.
func (s *messageService) HandleOutbound(service.DIDCommMsg, string, string) (string, error) {
	return "", errors.New("didcomm: send through the agent")
}

// HandleInbound implements dispatcher.ProtocolService.
func (s *messageService) HandleInbound(msg service.DIDCommMsg, dc service.DIDCommContext) (string, error) {
	s.mu.Lock()
	fn, ctx := s.fn, s.ctx
	s.mu.Unlock()
	if fn == nil {
		return "", errors.New("didcomm: not running")
	}
	connID, err := s.a.connectionByDIDs(dc.MyDID(), dc.TheirDID())
	if err != nil {
		return "", err
	}
	m, ok := msg.(service.DIDCommMsgMap)
	if !ok {
		raw, err := json.Marshal(msg)
		if err != nil {
			return "", err
		}
		if m, err = service.ParseDIDCommMsgMap(raw); err != nil {
			return "", err
		}
	}
	return "", fn(ctx, connID, m)
}

func errUnknownConnection(connID string, err error) error {
	return fmt.Errorf("didcomm: connection %s: %w (%w)", connID, channel.ErrUnknownConnection, err)
}

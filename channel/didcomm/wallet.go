package didcomm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/common/service"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
)

// ErrNoCredential is returned by [Wallet.Present] when the wallet holds no credential of the
// requested type; the bot has then been told so.
var ErrNoCredential = errors.New("no credential of the requested type")

// WalletConfig configures a holder agent: the terminal wallet and the tests' wallets.
type WalletConfig struct {
	Records store.Records
	// Namespace prefixes the wallet's records (default "wallet/"); several wallets may share a
	// store with different namespaces.
	Namespace string
	// Endpoint is where this wallet receives envelopes (its own HTTP listener; see Handler).
	Endpoint  string
	Label     string
	MasterKey []byte
	// Holder signs presentations; its DID must be the subject of the credentials.
	Holder      *credential.Key
	Credentials [][]byte
	HTTPClient  *http.Client
	Logger      *slog.Logger
}

// WalletEvent is something that reached the wallet: a completed connection, or one message
// (exactly one of the pointers is set).
type WalletEvent struct {
	Conn string
	// Connected is set when the connection completes; Label is the bot's.
	Connected bool
	Label     string
	// ID is the message's id: what a reply, an answer or a presentation refers to.
	ID           string
	ReplyTo      string
	Text         *channel.Text
	Menu         *channel.Menu
	Question     *channel.Question
	ProofRequest *channel.ProofRequest
	Profile      *channel.Profile
	Invitation   *channel.Invitation
	Receipts     *channel.Receipts
	// ProofAnswer is the verifier's answer to a presentation: accepted, or the reason it was not.
	ProofAnswer *ProofAnswer
	// CredentialOffer is a credential offered to keep (its ID the offer's, to accept it with
	// AcceptCredential): Credential is the offered credential without its proof.
	CredentialOffer *channel.CredentialOffer
	// Credential is a credential issued after the wallet accepted its offer (ID the offer's),
	// checked against the offer and its issuer's signature, and kept by the wallet.
	Credential *channel.CredentialOffer
	// Pong answers a Ping; ReplyTo is the ping's id.
	Pong bool
}

// ProofAnswer is the verifier's ack or problem report.
type ProofAnswer struct {
	RequestID string
	Accepted  bool
	Reason    string
}

// Wallet is a DIDComm holder: it connects to a bot, chats, and presents credentials.
type Wallet struct {
	a   *agent
	cfg WalletConfig
	log *slog.Logger

	mu     sync.Mutex
	held   map[string]heldRequest
	offers map[string]heldOffer
	// creds are the credentials the wallet presents (cfg.Credentials until Hold); received are
	// those issued to it (receipts).
	creds, received [][]byte
}

// OpenWallet builds the holder agent on cfg.Records.
func OpenWallet(cfg WalletConfig) (*Wallet, error) {
	if cfg.Records == nil || cfg.Endpoint == "" || cfg.Holder == nil {
		return nil, errors.New("didcomm: wallet needs Records, Endpoint and Holder")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "wallet/"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a, err := openAgent(agentConfig{Records: cfg.Records, Namespace: cfg.Namespace, Endpoint: cfg.Endpoint, Label: cfg.Label,
		MasterKey: cfg.MasterKey, HTTPClient: cfg.HTTPClient, Logger: cfg.Logger.With("component", "wallet"), AcceptOnReceipt: true})
	if err != nil {
		return nil, err
	}
	return &Wallet{a: a, cfg: cfg, log: cfg.Logger.With("component", "wallet"), held: make(map[string]heldRequest),
		offers: make(map[string]heldOffer), creds: slices.Clone(cfg.Credentials)}, nil
}

// Handler receives envelopes for the wallet; serve it at Endpoint.
func (w *Wallet) Handler() http.Handler { return w.a.inbound }

// DID is the holder's DID.
func (w *Wallet) DID() string { return w.cfg.Holder.DID() }

// Close stops the wallet's agent.
func (w *Wallet) Close() error { return w.a.close() }

// Run delivers what reaches the wallet to fn until ctx is done.
func (w *Wallet) Run(ctx context.Context, fn func(context.Context, WalletEvent)) error {
	return w.a.run(ctx, func(ctx context.Context, conn string, m service.DIDCommMsgMap) error {
		if e, ok := w.inbound(ctx, conn, m); ok {
			fn(ctx, e)
		}
		return nil
	}, func(ctx context.Context, conn, label string) error {
		fn(ctx, WalletEvent{Conn: conn, Connected: true, Label: label})
		return nil
	})
}

// Connect accepts an invitation (URL or JSON) and returns the new connection's id; a Connected
// event follows when DID exchange completes. Run must be running.
func (w *Wallet) Connect(_ context.Context, invitation string) (string, error) {
	inv, err := ParseInvitation(invitation)
	if err != nil {
		return "", err
	}
	conn, err := w.a.oob.AcceptInvitation(inv, w.cfg.Label)
	if err != nil {
		return "", fmt.Errorf("didcomm: accept invitation: %w", err)
	}
	return conn, nil
}

func (w *Wallet) inbound(ctx context.Context, conn string, m service.DIDCommMsgMap) (WalletEvent, bool) {
	typ := normalizeType(m.Type())
	raw, err := json.Marshal(m)
	if err != nil {
		return WalletEvent{}, false
	}
	e := WalletEvent{Conn: conn, ID: m.ID(), ReplyTo: replyTo(m)}
	switch typ {
	case typeBasicMessage:
		var b basicMessage
		if json.Unmarshal(raw, &b) != nil {
			return e, false
		}
		e.Text = &channel.Text{Content: b.Content, ReplyTo: e.ReplyTo}
	case typeMenu:
		var mm menuMessage
		if json.Unmarshal(raw, &mm) != nil {
			return e, false
		}
		e.Menu = &channel.Menu{Title: mm.Title, Description: mm.Description}
		for _, o := range mm.Options {
			e.Menu.Options = append(e.Menu.Options, channel.MenuOption{ID: o.Name, Title: o.Title, Description: o.Description, Disabled: o.Disabled})
		}
	case typeQuestion:
		var q questionMessage
		if json.Unmarshal(raw, &q) != nil {
			return e, false
		}
		e.Question = &channel.Question{Text: q.QuestionText, Detail: q.QuestionDetail}
		for _, r := range q.ValidResponses {
			e.Question.Options = append(e.Question.Options, r.Text)
		}
	case typeProfile:
		var p profileMessage
		if json.Unmarshal(raw, &p) != nil {
			return e, false
		}
		e.Profile = &channel.Profile{DisplayName: p.Profile.DisplayName, Description: p.Profile.Description}
	case typeOOBInvitation11:
		var inv oobInvitation
		if json.Unmarshal(raw, &inv) != nil {
			return e, false
		}
		e.Invitation = &channel.Invitation{Label: inv.Label}
		if len(inv.Services) > 0 {
			if did, ok := inv.Services[0].(string); ok {
				e.Invitation.DID = did
			}
		}
		if u, err := InvitationURL("https://invitation.invalid/", inv); err == nil {
			e.Invitation.URL = u
		}
	case typeReceipts:
		var r receiptsMessage
		if json.Unmarshal(raw, &r) != nil {
			return e, false
		}
		e.Receipts = &channel.Receipts{}
		for _, x := range r.Receipts {
			e.Receipts.MessageIDs = append(e.Receipts.MessageIDs, x.MessageID)
			e.Receipts.State = x.State
		}
	case typeRequestPresentation:
		req, err := parseRequest(conn, raw)
		if err != nil {
			w.log.WarnContext(ctx, "wallet proof request refused", "connection", logid.Conn(conn), "err", err)
			return e, false
		}
		w.mu.Lock()
		w.held[m.ID()] = req
		w.mu.Unlock()
		r := req.Request
		e.ProofRequest = &r
	case typePresentationAck, typePresentationProblem:
		thid, _ := m.ThreadID()
		e.ProofAnswer = &ProofAnswer{RequestID: thid, Accepted: typ == typePresentationAck}
		if typ == typePresentationProblem {
			var pr problemReport
			_ = json.Unmarshal(raw, &pr)
			e.ProofAnswer.Reason = pr.Description.En
		}
	case typeOfferCredential, typeIssueCredential, typeCredentialProblem:
		return w.credentialInbound(ctx, e, typ, m, raw)
	case typePing:
		resp := pingMessage{header: header{Type: typePingResponse, ID: uuid.NewString(), Thread: &thread{ThID: m.ID()}}}
		if err := w.a.send(ctx, conn, resp); err != nil {
			w.log.WarnContext(ctx, "wallet ping response", "err", err)
		}
		return e, false
	case typePingResponse:
		thid, _ := m.ThreadID()
		e.Pong, e.ReplyTo = true, thid
	default:
		return e, false
	}
	return e, true
}

// SendText sends a chat message (replyTo: the id of a message it answers, or "").
func (w *Wallet) SendText(ctx context.Context, conn, content, replyTo string) (string, error) {
	msg := basicMessage{header: header{Type: typeBasicMessage, ID: uuid.NewString()}, SentTime: sentTime(time.Now()), Content: content}
	if replyTo != "" {
		msg.Thread = &thread{PThID: replyTo}
	}
	return msg.ID, w.a.send(ctx, conn, msg)
}

// Ping sends a trust ping asking for a response (a Pong event); it returns the ping's id.
func (w *Wallet) Ping(ctx context.Context, conn string) (string, error) {
	yes := true
	msg := pingMessage{header: header{Type: typePing, ID: uuid.NewString()}, ResponseRequested: &yes}
	return msg.ID, w.a.send(ctx, conn, msg)
}

// RequestMenu asks the bot for its menu.
func (w *Wallet) RequestMenu(ctx context.Context, conn string) error {
	return w.a.send(ctx, conn, header{Type: typeMenuRequest, ID: uuid.NewString()})
}

// SelectMenu chooses a menu option.
func (w *Wallet) SelectMenu(ctx context.Context, conn, optionID string) error {
	return w.a.send(ctx, conn, performMessage{header: header{Type: typePerform, ID: uuid.NewString()}, Name: optionID})
}

// Answer answers the question whose id is questionID.
func (w *Wallet) Answer(ctx context.Context, conn, questionID, response string) error {
	return w.a.send(ctx, conn, answerMessage{header: header{Type: typeAnswer, ID: uuid.NewString(), Thread: &thread{ThID: questionID}}, Response: response})
}

// SendProfile sends the user's profile.
func (w *Wallet) SendProfile(ctx context.Context, conn, displayName, language string) error {
	return w.a.send(ctx, conn, profileMessage{header: header{Type: typeProfile, ID: uuid.NewString()},
		Profile: profile{DisplayName: displayName, PreferredLanguage: language}})
}

func (w *Wallet) takeRequest(requestID string) (heldRequest, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	req, ok := w.held[requestID]
	if !ok {
		return heldRequest{}, fmt.Errorf("didcomm: no open proof request %s", requestID)
	}
	delete(w.held, requestID)
	return req, nil
}

// Present answers a proof request with the wallet's credentials of the requested type. With
// none, it tells the bot so and returns ErrNoCredential.
func (w *Wallet) Present(ctx context.Context, requestID string) error {
	req, err := w.takeRequest(requestID)
	if err != nil {
		return err
	}
	var creds [][]byte
	var typ string
	if req.Request.W3C != nil { // set by the wallet's decoding of every request
		typ = req.Request.W3C.CredentialType
	}
	w.mu.Lock()
	held := w.creds
	w.mu.Unlock()
	for _, c := range held {
		if slices.Contains(credentialTypes(c), typ) {
			creds = append(creds, c)
		}
	}
	if len(creds) == 0 {
		return errors.Join(ErrNoCredential, w.problem(ctx, req.Conn, requestID, codeNoCredential, "no credential of type "+typ))
	}
	// A presentation with a DIF presentation_submission, as the submission format expects.
	vp, err := credential.Submit(w.cfg.Holder, req.Definition, creds, req.Challenge, req.Domain)
	if err != nil {
		return fmt.Errorf("didcomm: present: %w", err)
	}
	msg := presentation{header: header{Type: typePresentation, ID: uuid.NewString(), Thread: &thread{ThID: requestID}},
		Formats: []attachFormat{{AttachID: "presentation", Format: formatPESubmission}},
		Attach:  []attachment{{ID: "presentation", MimeType: "application/ld+json", Data: attachData{JSON: vp}}}}
	return w.a.send(ctx, req.Conn, msg)
}

// Decline refuses a proof request.
func (w *Wallet) Decline(ctx context.Context, requestID string) error {
	req, err := w.takeRequest(requestID)
	if err != nil {
		return err
	}
	return w.problem(ctx, req.Conn, requestID, codeDeclined, "declined by the user")
}

func (w *Wallet) problem(ctx context.Context, conn, thid, code, text string) error {
	pr := problemReport{header: header{Type: typePresentationProblem, ID: uuid.NewString(), Thread: &thread{ThID: thid}}}
	pr.Description.Code, pr.Description.En = code, text
	return w.a.send(ctx, conn, pr)
}

// credentialTypes reads the types of a JSON-LD credential or of a VC-JWT, without verifying it
// (the verifier does that).
func credentialTypes(c []byte) []string {
	var ld struct {
		Type any `json:"type"`
		VC   *struct {
			Type any `json:"type"`
		} `json:"vc"`
	}
	s := strings.Trim(strings.TrimSpace(string(c)), `"`)
	if parts := strings.Split(s, "."); len(parts) == 3 && !strings.HasPrefix(s, "{") {
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil || json.Unmarshal(payload, &ld) != nil || ld.VC == nil {
			return nil
		}
		ld.Type = ld.VC.Type
	} else if json.Unmarshal(c, &ld) != nil {
		return nil
	}
	switch t := ld.Type.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

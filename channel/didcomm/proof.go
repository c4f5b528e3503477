package didcomm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/common/service"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
)

// Present-proof 2.0 (Aries RFC 0454) with a DIF presentation-exchange attachment (RFC 0510).
// The bot requests, the wallet presents; the request's id is the protocol's thread id.
const (
	formatPEDefinition = "dif/presentation-exchange/definitions@v1.0"
	formatPESubmission = "dif/presentation-exchange/submission@v1.0"

	// Problem-report codes. The first is the one the VS Agent and Hologram wallets use.
	codeNoCredential       = "e.req.no-compatible-credentials"
	codeDeclined           = "request-declined"
	codeVerificationFailed = "verification-failed"
)

type attachData struct {
	JSON   json.RawMessage `json:"json,omitempty"`
	Base64 string          `json:"base64,omitempty"`
}

type attachment struct {
	ID       string     `json:"@id"`
	MimeType string     `json:"mime-type,omitempty"`
	Data     attachData `json:"data"`
}

type attachFormat struct {
	AttachID string `json:"attach_id"`
	Format   string `json:"format"`
}

type requestPresentation struct {
	header
	Comment     string         `json:"comment,omitempty"`
	WillConfirm bool           `json:"will_confirm,omitempty"`
	Formats     []attachFormat `json:"formats"`
	Attach      []attachment   `json:"request_presentations~attach"`
}

type presentation struct {
	header
	Formats []attachFormat `json:"formats"`
	Attach  []attachment   `json:"presentations~attach"`
}

type problemReport struct {
	header
	Description struct {
		Code string `json:"code"`
		En   string `json:"en,omitempty"`
	} `json:"description"`
}

type ackMessage struct {
	header
	Status string `json:"status"`
}

// peRequest is the RFC 0510 request attachment.
type peRequest struct {
	Options struct {
		Challenge string `json:"challenge"`
		Domain    string `json:"domain"`
	} `json:"options"`
	Definition json.RawMessage `json:"presentation_definition"`
}

// pendingProof is a request waiting for its presentation, kept in the store so that a restart
// (or another replica) can still verify the answer.
type pendingProof struct {
	Conn      string            `json:"conn"`
	Challenge string            `json:"challenge"`
	Domain    string            `json:"domain"`
	Policy    credential.Policy `json:"policy"`
	Created   time.Time         `json:"created"`
}

// proofs is the verifier's side of present-proof.
type proofs struct {
	a       *agent
	log     *slog.Logger
	now     func() time.Time
	ns      string
	timeout time.Duration
}

// DefaultProofTimeout is how long a proof request waits for the wallet's answer.
const DefaultProofTimeout = 5 * time.Minute

func newProofs(a *agent, log *slog.Logger, now func() time.Time, timeout time.Duration) *proofs {
	if timeout <= 0 {
		timeout = DefaultProofTimeout
	}
	return &proofs{a: a, log: log, now: now, ns: a.cfg.Namespace + "packbot/proofs", timeout: timeout}
}

// expire runs until ctx is done: every quarter of the time limit (30 s at most) it forgets the
// requests that waited longer than the limit and hands each to emit as a TimedOut result, so
// that the user is told and may try again. With several replicas, each may report the same
// request; the bot acts on the first (the request is no longer pending after it).
func (p *proofs) expire(ctx context.Context, emit func(context.Context, string, channel.Event) error) {
	tick := time.NewTicker(min(p.timeout/4, 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rs, err := p.a.cfg.Records.QueryRecords(ctx, p.ns)
		if err != nil {
			if ctx.Err() == nil {
				p.log.WarnContext(ctx, "didcomm pending proof requests", "err", err)
			}
			continue
		}
		for _, r := range rs {
			var pend pendingProof
			if json.Unmarshal(r.Value, &pend) != nil || p.now().Sub(pend.Created) < p.timeout {
				continue
			}
			// The event's id makes every replica's report of this timeout one event; the request
			// is forgotten once the bot has it.
			if err := emit(ctx, "timeout/"+r.Key, channel.PresentationResult{Conn: pend.Conn, RequestID: r.Key, Outcome: channel.TimedOut,
				Reason: fmt.Sprintf("no answer within %s", p.timeout)}); err != nil {
				p.log.WarnContext(ctx, "didcomm proof request timeout not accepted; reported again later", "connection", logid.Conn(pend.Conn), "request", r.Key, "err", err)
				continue
			}
			p.log.InfoContext(ctx, "didcomm proof request unanswered", "connection", logid.Conn(pend.Conn), "request", r.Key, "waited", p.timeout)
			p.forget(ctx, r.Key)
		}
	}
}

// domain is the host wallets reach the bot at; presentations must be bound to it.
func (p *proofs) domain() string {
	if u, err := url.Parse(p.a.cfg.Endpoint); err == nil && u.Host != "" {
		return u.Host
	}
	return p.a.cfg.Label
}

// request sends a request-presentation built from r and records it.
func (p *proofs) request(ctx context.Context, conn string, r channel.ProofRequest) (string, error) {
	if _, err := p.a.connection(conn); err != nil {
		return "", err
	}
	if r.W3C == nil || r.W3C.CredentialType == "" {
		return "", fmt.Errorf("didcomm: request proof: %w: no W3C credential type", channel.ErrRefused)
	}
	pol := credential.Policy{Type: r.W3C.CredentialType, Issuers: r.W3C.Issuers, Formats: r.W3C.Formats}
	def, err := credential.Definition(pol, r.Purpose)
	if err != nil {
		return "", fmt.Errorf("didcomm: request proof: %w", err)
	}
	id := r.ID
	if id == "" {
		id = uuid.NewString()
	}
	pend := pendingProof{Conn: conn, Challenge: uuid.NewString(), Domain: p.domain(), Policy: pol, Created: p.now()}
	if prev, ok := p.pending(ctx, conn, id); ok {
		pend = prev // the same request sent again (after a crash): the same challenge
	}
	var req peRequest
	req.Options.Challenge, req.Options.Domain, req.Definition = pend.Challenge, pend.Domain, def
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	msg := requestPresentation{header: header{Type: typeRequestPresentation, ID: id}, Comment: r.Purpose, WillConfirm: true,
		Formats: []attachFormat{{AttachID: "definition", Format: formatPEDefinition}},
		Attach:  []attachment{{ID: "definition", MimeType: "application/json", Data: attachData{JSON: body}}}}
	rec, err := json.Marshal(pend)
	if err != nil {
		return "", err
	}
	if err := p.a.cfg.Records.PutRecord(ctx, store.Record{Namespace: p.ns, Key: msg.ID, Value: rec,
		Tags: []store.Tag{{Name: "conn", Value: conn}}}); err != nil {
		return "", fmt.Errorf("didcomm: record proof request: %w", err)
	}
	if err := p.a.send(ctx, conn, msg); err != nil {
		return "", errors.Join(err, p.a.cfg.Records.DeleteRecord(ctx, p.ns, msg.ID))
	}
	return msg.ID, nil
}

// pending loads the pending request thid of conn, if there is one (another connection may not
// answer it).
func (p *proofs) pending(ctx context.Context, conn, thid string) (pendingProof, bool) {
	r, err := p.a.cfg.Records.GetRecord(ctx, p.ns, thid)
	if err != nil {
		return pendingProof{}, false
	}
	var pend pendingProof
	if json.Unmarshal(r.Value, &pend) != nil || pend.Conn != conn {
		return pendingProof{}, false
	}
	return pend, true
}

// forget drops the pending request thid once its outcome was accepted by the bot (until then,
// a presentation sent again is checked again).
func (p *proofs) forget(ctx context.Context, thid string) {
	if err := p.a.cfg.Records.DeleteRecord(ctx, p.ns, thid); err != nil {
		p.log.WarnContext(ctx, "didcomm forget proof request", "request", thid, "err", err)
	}
}

// inbound handles a presentation or a problem report for one of our requests, and returns the
// event to deliver.
func (p *proofs) inbound(ctx context.Context, conn string, typ string, m service.DIDCommMsgMap, raw []byte) (channel.Event, bool) {
	thid, _ := m.ThreadID()
	switch typ {
	case typePresentationProblem:
		var pr problemReport
		if json.Unmarshal(raw, &pr) != nil {
			return nil, false
		}
		if _, ok := p.pending(ctx, conn, thid); !ok {
			return nil, false
		}
		res := channel.PresentationResult{Conn: conn, RequestID: thid, Outcome: channel.Declined, Reason: "declined: " + pr.Description.Code}
		if strings.Contains(pr.Description.Code, "no-compatible") || pr.Description.Code == "no-credential" {
			res.Outcome, res.Reason = channel.NoCredential, "no suitable credential"
		}
		return res, true
	case typePresentation:
		pend, ok := p.pending(ctx, conn, thid)
		if !ok {
			p.log.WarnContext(ctx, "didcomm presentation for no pending request", "connection", logid.Conn(conn), "thread", thid)
			return nil, false
		}
		res := p.verify(conn, thid, pend, raw)
		ack := ackMessage{header: header{Type: typePresentationAck, ID: uuid.NewString(), Thread: &thread{ThID: thid}}, Status: "OK"}
		var reply any = ack
		if res.Outcome != channel.Verified {
			pr := problemReport{header: header{Type: typePresentationProblem, ID: uuid.NewString(), Thread: &thread{ThID: thid}}}
			pr.Description.Code, pr.Description.En = codeVerificationFailed, res.Reason
			reply = pr
		}
		if err := p.a.send(ctx, conn, reply); err != nil {
			p.log.WarnContext(ctx, "didcomm presentation answer", "connection", logid.Conn(conn), "err", err)
		}
		return res, true
	}
	return nil, false
}

// verify checks a presentation message against its request.
func (p *proofs) verify(conn, thid string, pend pendingProof, raw []byte) channel.PresentationResult {
	res := channel.PresentationResult{Conn: conn, RequestID: thid, Outcome: channel.VerificationFailed}
	var msg presentation
	if err := json.Unmarshal(raw, &msg); err != nil || len(msg.Attach) == 0 {
		res.Reason = "malformed presentation message"
		return res
	}
	vp, err := attachmentJSON(msg.Attach[0])
	if err != nil {
		res.Reason = "malformed presentation attachment: " + err.Error()
		return res
	}
	sum := sha256.Sum256(vp)
	res.Digest = hex.EncodeToString(sum[:])
	got, err := credential.Verify(vp, pend.Challenge, pend.Domain, pend.Policy, p.now())
	if err != nil {
		res.Reason = credential.Reason(err) + ": " + err.Error()
		return res
	}
	res.Outcome, res.Claims, res.Issuer, res.Holder, res.Types, res.Expires = channel.Verified, got.Claims, got.Issuer, got.Holder, got.Types, got.Expires
	return res
}

// attachmentJSON returns an attachment's content, inline JSON or base64.
func attachmentJSON(a attachment) ([]byte, error) {
	if len(a.Data.JSON) > 0 {
		return a.Data.JSON, nil
	}
	if a.Data.Base64 != "" {
		return decodeBase64(a.Data.Base64)
	}
	return nil, errors.New("empty attachment")
}

// heldRequest is a proof request a wallet received and has not answered yet.
type heldRequest struct {
	Conn       string
	Challenge  string
	Domain     string
	Definition json.RawMessage
	Request    channel.ProofRequest
}

// parseRequest reads a request-presentation message on the wallet's side.
func parseRequest(conn string, raw []byte) (heldRequest, error) {
	var msg requestPresentation
	if err := json.Unmarshal(raw, &msg); err != nil || len(msg.Attach) == 0 {
		return heldRequest{}, errors.New("malformed request-presentation")
	}
	body, err := attachmentJSON(msg.Attach[0])
	if err != nil {
		return heldRequest{}, err
	}
	var req peRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return heldRequest{}, fmt.Errorf("request attachment: %w", err)
	}
	pol, err := credential.PolicyFromDefinition(req.Definition)
	if err != nil {
		return heldRequest{}, err
	}
	return heldRequest{Conn: conn, Challenge: req.Options.Challenge, Domain: req.Options.Domain, Definition: req.Definition,
		Request: channel.ProofRequest{Purpose: msg.Comment,
			W3C: &channel.W3CRequest{CredentialType: pol.Type, Issuers: pol.Issuers, Formats: pol.Formats}}}, nil
}

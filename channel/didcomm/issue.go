package didcomm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/common/service"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/store"
)

// Issue-credential 2.0 (Aries RFC 0453) with the JSON-LD credential detail format (RFC 0593),
// for credentials the bot has signed already (receipts): the bot offers the credential's detail
// (the credential without its proof, and the proof's type and purpose); the wallet requests it;
// the bot answers with the signed credential, which must be exactly the detail plus its proof;
// the wallet acks. The offer's id is the protocol's thread id. Credo's JSON-LD format service
// accepts this exchange and stores the credential (its W3C credential records).
const (
	issueCredential        = "https://didcomm.org/issue-credential/2.0/"
	typeOfferCredential    = issueCredential + "offer-credential"
	typeRequestCredential  = issueCredential + "request-credential"
	typeIssueCredential    = issueCredential + "issue-credential"
	typeCredentialAck      = issueCredential + "ack"
	typeCredentialProblem  = issueCredential + "problem-report"
	typeCredentialPreview  = issueCredential + "credential-preview"
	formatLDDetail         = "aries/ld-proof-vc-detail@v1.0"
	formatLDCredential     = "aries/ld-proof-vc@v1.0"
	codeCredentialMismatch = "credential-request-mismatch"

	// offerTTL is how long an unanswered offer is kept: a wallet may accept it later.
	offerTTL = 30 * 24 * time.Hour
)

func init() {
	for _, t := range []string{typeOfferCredential, typeRequestCredential, typeIssueCredential, typeCredentialAck, typeCredentialProblem} {
		knownTypes[t] = true
	}
}

type previewAttribute struct {
	Name     string `json:"name"`
	MimeType string `json:"mime-type,omitempty"`
	Value    string `json:"value"`
}

type credentialPreview struct {
	Type       string             `json:"@type"`
	Attributes []previewAttribute `json:"attributes"`
}

type offerCredentialMessage struct {
	header
	Comment string             `json:"comment,omitempty"`
	Preview *credentialPreview `json:"credential_preview,omitempty"`
	Formats []attachFormat     `json:"formats"`
	Attach  []attachment       `json:"offers~attach"`
}

type requestCredentialMessage struct {
	header
	Formats []attachFormat `json:"formats"`
	Attach  []attachment   `json:"requests~attach"`
}

type issueCredentialMessage struct {
	header
	Comment string         `json:"comment,omitempty"`
	Formats []attachFormat `json:"formats"`
	Attach  []attachment   `json:"credentials~attach"`
}

// ldDetail is RFC 0593's credential detail: what is to be issued, and how it is to be signed.
type ldDetail struct {
	Credential json.RawMessage `json:"credential"`
	Options    ldOptions       `json:"options"`
}

type ldOptions struct {
	ProofType    string `json:"proofType"`
	ProofPurpose string `json:"proofPurpose"`
}

// pendingOffer is an offer waiting for the wallet's request, kept in the store so that a restart
// (or another replica) can still answer it.
type pendingOffer struct {
	Conn       string          `json:"conn"`
	Comment    string          `json:"comment,omitempty"`
	Credential json.RawMessage `json:"credential"`
	Created    time.Time       `json:"created"`
}

// offersNS is where pending offers are kept.
func (c *Channel) offersNS() string { return c.a.cfg.Namespace + "packbot/offers" }

// OfferCredential implements channel.CredentialOfferer: it offers the signed credential
// o.Credential with issue-credential 2.0 and records the offer; the credential is issued when
// the wallet requests it. The same offer sent again (the outbox after a crash) is the same
// thread.
func (c *Channel) OfferCredential(ctx context.Context, conn string, o channel.CredentialOffer) error {
	if _, err := c.a.connection(conn); err != nil {
		return err
	}
	detail, err := detailOf(o.Credential)
	if err != nil {
		return fmt.Errorf("didcomm: offer credential: %w: %w", channel.ErrRefused, err)
	}
	body, err := json.Marshal(detail)
	if err != nil {
		return err
	}
	id := idOr(o.ID)
	msg := offerCredentialMessage{header: header{Type: typeOfferCredential, ID: id}, Comment: o.Comment,
		Formats: []attachFormat{{AttachID: "ld-proof-vc-detail", Format: formatLDDetail}},
		Attach:  []attachment{base64Attachment("ld-proof-vc-detail", body)}}
	if preview := previewOf(o); len(preview) > 0 {
		msg.Preview = &credentialPreview{Type: typeCredentialPreview, Attributes: preview}
	}
	c.purgeOffers(ctx)
	rec, err := json.Marshal(pendingOffer{Conn: conn, Comment: o.Comment, Credential: o.Credential, Created: c.now()})
	if err != nil {
		return err
	}
	if err := c.a.cfg.Records.PutRecord(ctx, store.Record{Namespace: c.offersNS(), Key: id, Value: rec,
		Tags: []store.Tag{{Name: "conn", Value: conn}}}); err != nil {
		return fmt.Errorf("didcomm: record credential offer: %w", err)
	}
	if err := c.a.send(ctx, conn, msg); err != nil {
		return errors.Join(err, c.a.cfg.Records.DeleteRecord(ctx, c.offersNS(), id))
	}
	return nil
}

// purgeOffers forgets offers no wallet answered within offerTTL.
func (c *Channel) purgeOffers(ctx context.Context) {
	rs, err := c.a.cfg.Records.QueryRecords(ctx, c.offersNS())
	if err != nil {
		c.log.WarnContext(ctx, "didcomm pending credential offers", "err", err)
		return
	}
	for _, r := range rs {
		var p pendingOffer
		if json.Unmarshal(r.Value, &p) == nil && c.now().Sub(p.Created) < offerTTL {
			continue
		}
		if err := c.a.cfg.Records.DeleteRecord(ctx, c.offersNS(), r.Key); err != nil {
			c.log.WarnContext(ctx, "didcomm forget credential offer", "offer", r.Key, "err", err)
		}
	}
}

// credentialInbound answers the wallet's side of an offer: a request gets the credential, an
// ack or a problem report ends the offer.
func (c *Channel) credentialInbound(ctx context.Context, conn, typ string, m service.DIDCommMsgMap, raw []byte) {
	thid, _ := m.ThreadID()
	r, err := c.a.cfg.Records.GetRecord(ctx, c.offersNS(), thid)
	var p pendingOffer
	if err != nil || json.Unmarshal(r.Value, &p) != nil || p.Conn != conn {
		c.log.InfoContext(ctx, "didcomm credential message for no pending offer ignored", "connection", logid.Conn(conn), "type", typ, "thread", thid)
		return
	}
	switch typ {
	case typeRequestCredential:
		c.issue(ctx, conn, thid, p, raw)
		return // forgotten on the ack: the issue may be lost and requested again
	case typeCredentialAck:
		c.log.InfoContext(ctx, "didcomm credential stored by the wallet", "connection", logid.Conn(conn), "offer", thid)
	case typeCredentialProblem:
		var pr problemReport
		_ = json.Unmarshal(raw, &pr)
		c.log.InfoContext(ctx, "didcomm credential offer refused by the wallet", "connection", logid.Conn(conn), "offer", thid,
			"code", safeText(pr.Description.Code))
	}
	if err := c.a.cfg.Records.DeleteRecord(ctx, c.offersNS(), thid); err != nil {
		c.log.WarnContext(ctx, "didcomm forget credential offer", "offer", thid, "err", err)
	}
}

// issue sends the signed credential of offer p when the wallet's request asks for exactly what
// was offered; otherwise a problem report.
func (c *Channel) issue(ctx context.Context, conn, thid string, p pendingOffer, raw []byte) {
	var req requestCredentialMessage
	want, err := detailOf(p.Credential)
	if err == nil && json.Unmarshal(raw, &req) == nil && len(req.Attach) > 0 {
		err = sameDetail(req.Attach[0], want)
	} else if err == nil {
		err = errors.New("malformed request-credential")
	}
	var reply any = issueCredentialMessage{header: header{Type: typeIssueCredential, ID: uuid.NewString(), Thread: &thread{ThID: thid}},
		Comment: p.Comment, Formats: []attachFormat{{AttachID: "ld-proof-vc", Format: formatLDCredential}},
		Attach: []attachment{base64Attachment("ld-proof-vc", p.Credential)}}
	if err != nil {
		c.log.WarnContext(ctx, "didcomm credential request refused", "connection", logid.Conn(conn), "offer", thid, "err", err)
		pr := problemReport{header: header{Type: typeCredentialProblem, ID: uuid.NewString(), Thread: &thread{ThID: thid}}}
		pr.Description.Code, pr.Description.En = codeCredentialMismatch, err.Error()
		reply = pr
	}
	if err := c.a.send(ctx, conn, reply); err != nil {
		c.log.WarnContext(ctx, "didcomm credential answer", "connection", logid.Conn(conn), "offer", thid, "err", err)
	}
}

// detailOf is the JSON-LD detail of a signed credential: the credential without its proof, and
// the proof's type and purpose.
func detailOf(signed []byte) (ldDetail, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(signed, &doc); err != nil {
		return ldDetail{}, fmt.Errorf("credential: %w", err)
	}
	var proof struct {
		Type    string `json:"type"`
		Purpose string `json:"proofPurpose"`
	}
	raw := doc["proof"]
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil && len(list) == 1 {
		raw = list[0]
	}
	if err := json.Unmarshal(raw, &proof); err != nil || proof.Type == "" {
		return ldDetail{}, errors.New("credential has no single proof")
	}
	delete(doc, "proof")
	unsigned, err := json.Marshal(doc)
	if err != nil {
		return ldDetail{}, err
	}
	return ldDetail{Credential: unsigned, Options: ldOptions{ProofType: proof.Type, ProofPurpose: proof.Purpose}}, nil
}

// sameDetail checks that a request's attachment asks for the detail want.
func sameDetail(a attachment, want ldDetail) error {
	b, err := attachmentJSON(a)
	if err != nil {
		return err
	}
	var got ldDetail
	if err := json.Unmarshal(b, &got); err != nil {
		return fmt.Errorf("request detail: %w", err)
	}
	var g, w any
	if json.Unmarshal(got.Credential, &g) != nil || json.Unmarshal(want.Credential, &w) != nil || !reflect.DeepEqual(g, w) {
		return errors.New("the requested credential is not the one offered")
	}
	if got.Options != want.Options {
		return fmt.Errorf("requested proof %+v, offered %+v", got.Options, want.Options)
	}
	return nil
}

// previewOf is what wallets show of an offer: o's preview, else the credential's text claims.
func previewOf(o channel.CredentialOffer) []previewAttribute {
	var out []previewAttribute
	for _, a := range o.Preview {
		out = append(out, previewAttribute{Name: a.Name, Value: a.Value})
	}
	if len(out) > 0 {
		return out
	}
	var vc struct {
		Subject map[string]any `json:"credentialSubject"`
	}
	if json.Unmarshal(o.Credential, &vc) != nil {
		return nil
	}
	for k, v := range vc.Subject {
		if s, ok := v.(string); ok && k != "id" {
			out = append(out, previewAttribute{Name: k, Value: s})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func base64Attachment(id string, body []byte) attachment {
	return attachment{ID: id, MimeType: "application/json", Data: attachData{Base64: base64.StdEncoding.EncodeToString(body)}}
}

// safeText clips a peer's text for logs.
func safeText(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// heldOffer is an offer a wallet received and has not answered yet.
type heldOffer struct {
	Conn    string
	Comment string
	Detail  ldDetail
}

// parseOffer reads an offer-credential on the wallet's side.
func parseOffer(conn string, raw []byte) (heldOffer, error) {
	var msg offerCredentialMessage
	if err := json.Unmarshal(raw, &msg); err != nil || len(msg.Attach) == 0 {
		return heldOffer{}, errors.New("malformed offer-credential")
	}
	b, err := attachmentJSON(msg.Attach[0])
	if err != nil {
		return heldOffer{}, err
	}
	var d ldDetail
	if err := json.Unmarshal(b, &d); err != nil || len(d.Credential) == 0 || d.Options.ProofType == "" {
		return heldOffer{}, errors.New("offer without a JSON-LD credential detail")
	}
	return heldOffer{Conn: conn, Comment: msg.Comment, Detail: d}, nil
}

// checkIssued checks, on the wallet's side, an issued credential against the offer's detail:
// the same credential with a proof of the offered type, signed by its issuer.
func checkIssued(raw []byte, offer heldOffer) (json.RawMessage, error) {
	var msg issueCredentialMessage
	if err := json.Unmarshal(raw, &msg); err != nil || len(msg.Attach) == 0 {
		return nil, errors.New("malformed issue-credential")
	}
	vc, err := attachmentJSON(msg.Attach[0])
	if err != nil {
		return nil, err
	}
	got, err := detailOf(vc)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(got) // from a decoded document: cannot fail
	if err := sameDetail(attachment{Data: attachData{JSON: b}}, offer.Detail); err != nil {
		return nil, fmt.Errorf("issued credential: %w", err)
	}
	if _, err := credential.CheckSigned(vc); err != nil {
		return nil, fmt.Errorf("issued credential: %w", err)
	}
	return vc, nil
}

var _ channel.CredentialOfferer = (*Channel)(nil)

// credentialInbound is the wallet's side of issue-credential: an offer is held and reported, an
// issued credential is checked, kept, acknowledged and reported.
func (w *Wallet) credentialInbound(ctx context.Context, e WalletEvent, typ string, m service.DIDCommMsgMap, raw []byte) (WalletEvent, bool) {
	thid, _ := m.ThreadID()
	switch typ {
	case typeOfferCredential:
		o, err := parseOffer(e.Conn, raw)
		if err != nil {
			w.log.WarnContext(ctx, "wallet credential offer refused", "connection", logid.Conn(e.Conn), "err", err)
			return e, false
		}
		w.mu.Lock()
		w.offers[m.ID()] = o
		w.mu.Unlock()
		e.CredentialOffer = &channel.CredentialOffer{ID: m.ID(), Comment: o.Comment, Credential: o.Detail.Credential}
		return e, true
	case typeIssueCredential:
		w.mu.Lock()
		o, ok := w.offers[thid]
		delete(w.offers, thid)
		w.mu.Unlock()
		if !ok || o.Conn != e.Conn {
			return e, false
		}
		vc, err := checkIssued(raw, o)
		if err != nil {
			w.log.WarnContext(ctx, "wallet issued credential refused", "connection", logid.Conn(e.Conn), "offer", thid, "err", err)
			pr := problemReport{header: header{Type: typeCredentialProblem, ID: uuid.NewString(), Thread: &thread{ThID: thid}}}
			pr.Description.Code, pr.Description.En = codeCredentialMismatch, err.Error()
			if err := w.a.send(ctx, e.Conn, pr); err != nil {
				w.log.WarnContext(ctx, "wallet credential problem report", "err", err)
			}
			return e, false
		}
		w.mu.Lock()
		w.received = append(w.received, vc)
		w.mu.Unlock()
		ack := ackMessage{header: header{Type: typeCredentialAck, ID: uuid.NewString(), Thread: &thread{ThID: thid}}, Status: "OK"}
		if err := w.a.send(ctx, e.Conn, ack); err != nil {
			w.log.WarnContext(ctx, "wallet credential ack", "err", err)
		}
		e.ID = thid
		e.Credential = &channel.CredentialOffer{ID: thid, Comment: o.Comment, Credential: vc}
		return e, true
	}
	w.log.InfoContext(ctx, "wallet credential message", "type", typ, "thread", thid)
	return e, false
}

// AcceptCredential requests the credential offered by offer offerID; it arrives as a
// Credential event.
func (w *Wallet) AcceptCredential(ctx context.Context, offerID string) error {
	w.mu.Lock()
	o, ok := w.offers[offerID]
	w.mu.Unlock()
	if !ok {
		return fmt.Errorf("didcomm: no open credential offer %s", offerID)
	}
	body, err := json.Marshal(o.Detail)
	if err != nil {
		return err
	}
	req := requestCredentialMessage{header: header{Type: typeRequestCredential, ID: uuid.NewString(), Thread: &thread{ThID: offerID}},
		Formats: []attachFormat{{AttachID: "ld-proof-vc-detail", Format: formatLDDetail}},
		Attach:  []attachment{base64Attachment("ld-proof-vc-detail", body)}}
	return w.a.send(ctx, o.Conn, req)
}

// Received returns the credentials issued to the wallet, oldest first.
func (w *Wallet) Received() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.received)
}

// Hold replaces the credentials the wallet presents (a credential re-issued by its issuer).
func (w *Wallet) Hold(creds [][]byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.creds = slices.Clone(creds)
}

package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/store"
)

// Receipts. When an approved call has run (done or failed), its requester is offered a receipt:
// a W3C verifiable credential signed by the bot, of type [ReceiptType], whose claims say what
// ran (tool, server, the arguments' fingerprint — never their values), its outcome and the
// fingerprint of its result, when, the approvers' votes with their proof digests, and the audit
// record of the execution (its id and chain hash), so that `packbot receipt verify` can check
// the audit still holds it. The offer goes through the durable outbox to the requester's most
// recent connection ([OfferKind]); a policy with receipt: false gives none.
//
// The receipt is made once the outcome is committed: a crash between that commit and the
// offer's loses the receipt (the audit keeps the record); it is never offered twice.

// ReceiptType is the credential type of receipts.
const ReceiptType = "PackbotReceipt"

// ReceiptIDPrefix starts a receipt's id; the approval's id follows.
const ReceiptIDPrefix = "urn:packbot:receipt:"

// Receipt claims (credentialSubject), by name.
const (
	ClaimIdentity          = "identity"
	ClaimTool              = "tool"
	ClaimServer            = "server"
	ClaimArgsFingerprint   = "argumentsFingerprint"
	ClaimOutcome           = "outcome"
	ClaimResultFingerprint = "resultFingerprint"
	ClaimExecutedAt        = "executedAt"
	ClaimRequestedAt       = "requestedAt"
	ClaimApprovalID        = "approvalId"
	ClaimVotes             = "votes" // [{approver, decision, at, proofDigest}]
	ClaimAuditRecordID     = "auditRecordId"
	ClaimAuditRecordHash   = "auditRecordHash"
)

// Claims of each vote in ClaimVotes. (Not "proof" nor "id": the W3C credentials context gives
// those a meaning of their own, and a wallet would sign and verify another document.)
const (
	VoteApprover    = "approver"
	VoteDecision    = "decision"
	VoteAt          = "at"
	VoteProofDigest = "proofDigest"
)

// ReceiptSigner signs receipts (credential.Signer implements it): the credential with id,
// claims as its subject, issued at issued, as JSON-LD.
type ReceiptSigner interface {
	// Issuer is the DID receipts name as their issuer.
	Issuer() string
	Sign(id string, claims map[string]any, issued time.Time) ([]byte, error)
}

// OfferKind is the outbox kind of an [Offer].
const OfferKind = "credential-offer"

// Offer is an outbox message offering a credential to keep to its identity: the bot delivers it
// to the identity's most recent connection that takes it, with Comment in that connection's
// language (a channel without credential offers sends it as a text).
type Offer struct {
	ID         string          `json:"id"`
	Credential json.RawMessage `json:"credential"`
	Comment    i18n.Message    `json:"comment"`
}

// offerReceipt signs a's receipt, quoting rec, the audit record committed with its outcome,
// and puts its offer to the requester in the outbox (logged, not returned, when it cannot: the
// outcome stands without it).
func (s *Service) offerReceipt(ctx context.Context, a store.Approval, rec store.AuditRecord) {
	if s.receipts == nil || (a.Exec != store.ExecDone && a.Exec != store.ExecFailed) {
		return
	}
	if p := s.policy(a); p != nil && !p.Receipts() {
		return
	}
	if err := s.queueReceipt(ctx, a, rec); err != nil {
		s.log.ErrorContext(ctx, "receipt not offered", slog.String("id", a.ID), slog.Any("err", err))
	}
}

func (s *Service) queueReceipt(ctx context.Context, a store.Approval, rec store.AuditRecord) error {
	if rec.ID == 0 {
		return fmt.Errorf("approval %s: %w", a.ID, errNoRecord)
	}
	if rec.Hash == "" { // written to be sealed after its commit: seal it now, to quote its hash
		if _, _, err := s.st.SealAudit(ctx); err != nil {
			return fmt.Errorf("approval %s: %w", a.ID, err)
		}
		sealed, err := s.st.GetAudit(ctx, rec.ID)
		if err != nil {
			return fmt.Errorf("approval %s: %w", a.ID, err)
		}
		if sealed.Hash == "" {
			return fmt.Errorf("approval %s: audit record %d was not sealed (set aside: its MAC is wrong)", a.ID, rec.ID)
		}
		rec = sealed
	}
	vc, err := s.receipts.Sign(ReceiptIDPrefix+a.ID, ReceiptClaims(a, rec), s.now())
	if err != nil {
		return err
	}
	key := "RECEIPT_OFFER_EXECUTED"
	if rec.Outcome != store.OutcomeExecuted {
		key = "RECEIPT_OFFER_FAILED"
	}
	o := Offer{ID: "receipt-" + a.ID, Credential: vc, Comment: i18n.Message{Key: key, Args: []string{"tool", a.Tool, "server", a.Server}}}
	m, err := store.NewOutboxMessage(a.Requester, "", OfferKind, o)
	if err != nil {
		return err
	}
	if _, err := s.st.EnqueueOutbox(ctx, m); err != nil {
		return fmt.Errorf("queue the receipt: %w", err)
	}
	s.log.InfoContext(ctx, "receipt offered", slog.String("id", a.ID), slog.String("requester", a.Requester),
		slog.Int64("audit", rec.ID))
	s.kick(a.Requester)
	return nil
}

// errNoRecord: the audit holds no record of an execution.
var errNoRecord = errors.New("the audit holds no record of the execution")

// ReceiptClaims are the claims of the receipt of a's execution, recorded in the audit as rec:
// fingerprints and identities, never the arguments or the result themselves.
func ReceiptClaims(a store.Approval, rec store.AuditRecord) map[string]any {
	result := a.Result
	if rec.Outcome != store.OutcomeExecuted {
		result = []byte(a.Error)
	}
	sum := sha256.Sum256(result)
	votes := make([]any, 0, len(a.Votes))
	for _, v := range a.Votes {
		votes = append(votes, map[string]any{VoteApprover: v.Approver, VoteDecision: v.Decision, VoteAt: stamp(v.At), VoteProofDigest: v.Proof})
	}
	return map[string]any{
		ClaimIdentity:          a.Requester,
		ClaimTool:              a.Tool,
		ClaimServer:            a.Server,
		ClaimArgsFingerprint:   rec.ArgsFingerprint,
		ClaimOutcome:           rec.Outcome,
		ClaimResultFingerprint: hex.EncodeToString(sum[:]),
		ClaimExecutedAt:        stamp(rec.At),
		ClaimRequestedAt:       stamp(a.CreatedAt),
		ClaimApprovalID:        a.ID,
		ClaimVotes:             votes,
		ClaimAuditRecordID:     strconv.FormatInt(rec.ID, 10),
		ClaimAuditRecordHash:   rec.Hash,
	}
}

// stamp is t as receipts write times: RFC 3339, UTC, milliseconds (as stored).
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

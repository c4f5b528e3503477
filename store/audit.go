package store

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Audit decisions and outcomes.
const (
	DecisionAllow    = "allow"
	DecisionDeny     = "deny"
	DecisionApproval = "approval"

	OutcomeExecuted = "executed"
	OutcomeFailed   = "failed"
	OutcomeDenied   = "denied"
	OutcomePending  = "pending"
)

// Approval transitions, as audit records ([AuditRecord].Event). The store writes them in the
// transaction of the transition.
const (
	// EventApprovalCreated: Identity asked for a call that needs approval (ArgsFingerprint is
	// the request's fingerprint, Outcome PENDING, Detail the quorum, expiry and approver roles).
	EventApprovalCreated = "approval.created"
	// EventApprovalVoted: Identity voted (Decision is VoteApprove or VoteReject); Outcome is
	// the request's status after the vote (APPROVED when it reached the quorum); Detail is the
	// digest of the presentation a fresh proof made ("" without one).
	EventApprovalVoted = "approval.voted"
	// EventApprovalCancelled: the requester (Identity) cancelled it, or an approver's decision
	// withdrew it because its tool is gone.
	EventApprovalCancelled = "approval.cancelled"
	// EventApprovalExpired: nobody decided it in time (Identity "").
	EventApprovalExpired = "approval.expired"
)

// AuditRecord is one record of the audit: a tool call as seen by RBAC (allowed, denied,
// approval-gated, executed or failed), or a transition of an approval request (Event). It never
// holds argument values, only their fingerprint.
type AuditRecord struct {
	ID              int64
	At              time.Time
	Identity        string
	Roles           []string
	Server          string
	Tool            string
	ArgsFingerprint string
	Decision        string
	ApprovalID      string
	Outcome         string
	Latency         time.Duration
	Error           string
	// ResultFingerprint is the SHA-256 (hex) of an executed call's result; "" otherwise.
	ResultFingerprint string
	// Event is "" for a tool call, else the approval transition the record tells
	// (EventApproval…).
	Event string
	// Detail is what a transition adds (EventApprovalCreated: the request's terms;
	// EventApprovalVoted: the fresh proof's digest).
	Detail string
	// Hash is the record's chain hash (hex), set by the store when the record is sealed: when
	// it is written, or soon after (see MAC).
	Hash string
	// Link places the record in its chain; set by the store with Hash.
	Link AuditLink
	// MAC vouches for a record written to be sealed after its commit ([Audit.SealAudit]):
	// [AuditMAC] of its content under the store's audit key, set by the store when it writes
	// the record; "" for a record chained as it is written.
	MAC string
}

// AuditLink places a record in the audit's hash chains: the store keeps several chains
// (lanes), so that concurrent writers never wait for each other, and signed checkpoints
// ([AuditCheckpoint]) bind the heads of all of them.
type AuditLink struct {
	Lane   int64  // the chain
	Seq    int64  // the record's place in it: 1, 2, 3… (0: in no chain)
	PrevID int64  // the record before it in the lane (0 for the first)
	Prev   string // that record's Hash ("" for the first)
}

// auditHashVersion starts every record's hashed text.
const auditHashVersion = "packbot-audit-1"

// AuditMAC is a new MAC of r's content under key: a random nonce (16 hex digits), ":", and the
// hex HMAC-SHA256 of the nonce and the text AuditHash hashes without the record's place (Link)
// and ID, which it gets when it is sealed. A store that seals records after their commit writes
// one with each record, and seals only records whose MAC is right: a record forged or changed in
// the database before its seal is not sealed as genuine. The nonce tells two records of the same
// content apart, and a copy of a record (its MAC too) from the record.
func AuditMAC(key []byte, r AuditRecord) string {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // never fails (crypto/rand)
	n := hex.EncodeToString(nonce[:])
	return n + ":" + auditMAC(key, n, r)
}

// CheckAuditMAC reports whether r.MAC is a MAC of r's content under key (see AuditMAC).
func CheckAuditMAC(key []byte, r AuditRecord) bool {
	n, mac, ok := strings.Cut(r.MAC, ":")
	return ok && len(n) == 16 && hmac.Equal([]byte(auditMAC(key, n, r)), []byte(mac))
}

// auditMAC is the HMAC of r's content with the nonce n.
func auditMAC(key []byte, n string, r AuditRecord) string {
	r.Link, r.ID = AuditLink{}, 0
	m := hmac.New(sha256.New, key)
	m.Write([]byte(n))
	m.Write([]byte(auditHashText(r)))
	return hex.EncodeToString(m.Sum(nil))
}

// AuditHash is the chain hash of r (hex SHA-256): its place (Link), its ID and every field but
// Hash, in a fixed text (see auditHashText). The store computes it when it seals r: as it
// writes it (on PostgreSQL in SQL: see store/sqlstore), or soon after ([Audit.SealAudit]);
// anyone can compute it again to check the record.
func AuditHash(r AuditRecord) string {
	sum := sha256.Sum256([]byte(auditHashText(r)))
	return hex.EncodeToString(sum[:])
}

// auditHashText is what AuditHash hashes: the version, then each field after a "|", numbers in
// decimal and strings prefixed by their length in characters and ":" (so that no two records
// have the same text). Roles are their JSON array ("" when none), as stored.
func auditHashText(r AuditRecord) string {
	var b strings.Builder
	b.WriteString(auditHashVersion)
	num := func(n int64) {
		b.WriteByte('|')
		b.WriteString(strconv.FormatInt(n, 10))
	}
	str := func(s string) {
		b.WriteByte('|')
		b.WriteString(strconv.Itoa(utf8.RuneCountInString(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	str(r.Link.Prev)
	num(r.Link.Lane)
	num(r.Link.Seq)
	num(r.ID)
	num(r.Link.PrevID)
	num(r.At.UnixMilli())
	str(r.Identity)
	str(AuditRoles(r.Roles))
	str(r.Server)
	str(r.Tool)
	str(r.ArgsFingerprint)
	str(r.Decision)
	str(r.ApprovalID)
	str(r.Outcome)
	num(int64(r.Latency))
	str(r.Error)
	str(r.ResultFingerprint)
	str(r.Event)
	str(r.Detail)
	return b.String()
}

// AuditRoles is how a record's roles are stored and hashed: a JSON array, "" when there are
// none.
func AuditRoles(roles []string) string {
	if len(roles) == 0 {
		return ""
	}
	b, _ := json.Marshal(roles) // strings: cannot fail
	return string(b)
}

// AuditLane is the head of one lane: its last record.
type AuditLane struct {
	Lane int64
	Seq  int64 // 0: no record yet
	ID   int64
	Hash string
}

// AuditCheckpoint is a signed statement of every lane's head ([AuditLane]), made
// periodically by a running bot with its own key (package audit). Checkpoints are numbered
// 1, 2, 3… and each names the one before it, so that none can be removed or changed unseen.
type AuditCheckpoint struct {
	Seq       int64
	At        time.Time
	Signer    string // the signer's DID
	Body      []byte // what was signed
	Signature []byte
}

// AuditQuery narrows [Audit.ListAudit]; empty fields match everything.
type AuditQuery struct {
	Identity   string
	Server     string
	Tool       string
	Decision   string
	Outcome    string
	ApprovalID string
	// Events also returns the approval transitions (records with an Event); by default only
	// tool calls are returned.
	Events bool
	Since  time.Time // inclusive
	Until  time.Time // exclusive; zero: no end
	Limit  int       // <= 0: 100
}

// Matches reports whether r is one of the records q selects (Limit aside).
func (q AuditQuery) Matches(r AuditRecord) bool {
	eq := func(want, got string) bool { return want == "" || want == got }
	return eq(q.Identity, r.Identity) && eq(q.Server, r.Server) && eq(q.Tool, r.Tool) && eq(q.Decision, r.Decision) &&
		eq(q.Outcome, r.Outcome) && eq(q.ApprovalID, r.ApprovalID) && (q.Events || r.Event == "") &&
		!r.At.Before(q.Since) && (q.Until.IsZero() || r.At.Before(q.Until))
}

// Audit is the append-only, hash-chained record of tool calls and approval transitions. Rows
// are written by the store in the transaction of what caused them (an event's completion, an
// approval's transition or execution); every row gets its ID, Hash and Link then. All methods
// are safe for concurrent use by many goroutines and processes sharing the database.
type Audit interface {
	// AppendAudit stores a row on its own and returns its id. At defaults to the store's clock
	// when zero.
	AppendAudit(ctx context.Context, r AuditRecord) (int64, error)
	// ListAudit returns matching rows, newest first (by At, then ID).
	ListAudit(ctx context.Context, q AuditQuery) ([]AuditRecord, error)
	// GetAudit returns one row, or ErrNotFound.
	GetAudit(ctx context.Context, id int64) (AuditRecord, error)
	// AuditLanes returns the head of every lane, in lane order.
	AuditLanes(ctx context.Context) ([]AuditLane, error)
	// AuditChain returns up to limit (<= 0: 1,000) rows of lane with Seq > after, in Seq
	// order; lane 0 lists the rows in no chain (Seq 0: not sealed yet; -1: set aside by
	// SealAudit; or in no lane), by ID, with ID > after.
	AuditChain(ctx context.Context, lane, after int64, limit int) ([]AuditRecord, error)
	// AddAuditCheckpoint stores a checkpoint; ErrConflict when its Seq exists (another
	// replica made that one).
	AddAuditCheckpoint(ctx context.Context, c AuditCheckpoint) error
	// AuditCheckpoints returns up to limit (<= 0: 1,000) checkpoints with Seq > after, in Seq
	// order; after < 0 returns the last limit checkpoints (still in Seq order).
	AuditCheckpoints(ctx context.Context, after int64, limit int) ([]AuditCheckpoint, error)
	// SealAudit links into the chain the records written to be sealed after their commit (a
	// store with an audit key on PostgreSQL writes them so: see [AuditRecord.MAC]), in the order
	// of their ids, and returns how many it sealed and how many it set aside: a record whose
	// MAC is wrong is never sealed (Seq -1; verification reports it). Several processes may seal
	// at once; each record is sealed once. A store that chains records as it writes them
	// returns 0, 0.
	SealAudit(ctx context.Context) (sealed, refused int, err error)
}

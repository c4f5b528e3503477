package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Store is the whole persistence contract. Every method is safe for concurrent use by many
// goroutines and by several processes sharing one database. Every method honours ctx.
// Close releases the underlying pool; it is idempotent, and methods called after it return
// [ErrClosed].
type Store interface {
	Sessions
	Records
	Credentials
	Outbox
	Memory
	Audit
	Approvals
	Directory
	Inbox

	// Ping reports whether the database answers and the schema is at the version this binary
	// expects (migrations applied). /readyz is Ping.
	Ping(ctx context.Context) error
	// SchemaVersion is the number of the last migration applied.
	SchemaVersion(ctx context.Context) (int, error)
	Close() error
}

// Session states (conversation.md).
const (
	StateChat      = "CHAT"
	StateAuth      = "AUTH"
	StateMCPConfig = "MCP_CONFIG"
)

// Session is the persisted state of one wallet connection.
type Session struct {
	ConnectionID  string
	State         string // StateChat, StateAuth or StateMCPConfig; "" is read as StateChat
	Language      string
	Authenticated bool
	Identity      string // the userIdentityAttribute claim; "" before authentication
	DisplayName   string
	Roles         []string
	// CredentialExpiry is when the presented credential stops being valid; zero when none.
	CredentialExpiry time.Time
	// Flow is the typed state of an unfinished dialog, encoded by package flows
	// ({"v":2,"dialog":…}; earlier rows have version 1's shape and still load); nil when no
	// dialog is open. The store keeps it verbatim.
	Flow []byte
	// MenuDigest identifies the last contextual menu sent to the connection ("" when none was),
	// so that a menu is re-sent only when it changed, by whichever replica handles the
	// connection next.
	MenuDigest string
	// Login identifies the authentication requirement the user's login satisfied (a digest of
	// the pack's authentication settings, made by package flows); "" when not authenticated, or
	// authenticated before logins were recorded. A pack whose requirement differs logs them out.
	Login     string
	CreatedAt time.Time // set by the store on first write
	UpdatedAt time.Time // set by the store on every write
}

// Sessions stores one [Session] per connection.
type Sessions interface {
	// GetSession returns the session of a connection, or ErrNotFound.
	GetSession(ctx context.Context, connectionID string) (Session, error)
	// UpdateSession runs update on the current session (a zero Session with only ConnectionID
	// set when none exists yet; CreatedAt is zero then) with the row locked, and writes what
	// update returns. An error from update aborts the write and is returned wrapped. The
	// closure may run more than once; it must be pure.
	UpdateSession(ctx context.Context, connectionID string, update func(Session) (Session, error)) (Session, error)
	// DeleteSession removes a session; deleting a missing one is not an error.
	DeleteSession(ctx context.Context, connectionID string) error
	// SessionsByIdentity returns the sessions of every connection authenticated as identity,
	// most recently updated first (indexed).
	SessionsByIdentity(ctx context.Context, identity string) ([]Session, error)
	// ListSessions returns up to q.Limit sessions (<= 0: 1,000) ordered by connection id,
	// starting strictly after q.After, updated at or after q.UpdatedSince (zero: all), so that a
	// caller can page through every session.
	ListSessions(ctx context.Context, q SessionQuery) ([]Session, error)
}

// SessionQuery narrows [Sessions.ListSessions].
type SessionQuery struct {
	After        string
	UpdatedSince time.Time
	Limit        int
}

// Tag is a name/value label on a [Record], used to find records without reading them all.
type Tag struct {
	Name  string
	Value string
}

// Record is one entry of the key-value area: the DIDComm agent keeps its connection records,
// DID documents and keys here, grouped by Namespace (the agent's store name).
type Record struct {
	Namespace string
	Key       string
	Value     []byte
	Tags      []Tag
}

// TagFilter selects records carrying a tag named Name; when AnyValue is false the tag's value
// must equal Value.
type TagFilter struct {
	Name     string
	Value    string
	AnyValue bool
}

// RecordOp is one operation of [Records.BatchRecords]: Delete removes Key, otherwise the record
// is put. With If set the op is conditional.
type RecordOp struct {
	Key    string
	Value  []byte
	Tags   []Tag
	Delete bool
	// If, when not nil, is a condition on the record as it is when the op runs (after the
	// batch's earlier ops): when it does not hold, the whole batch changes nothing and fails
	// with [ErrConflict].
	If *RecordCondition
}

// RecordCondition makes a [RecordOp] a compare-and-swap: the record must not exist (Absent),
// or must exist with exactly Value. The check and the op are atomic: of several batches
// conditioned on one record's same state, one applies and the others get [ErrConflict], on
// one process or on replicas sharing a database.
type RecordCondition struct {
	Absent bool
	Value  []byte // when not Absent
}

// Records is the tagged key-value area.
type Records interface {
	// PutRecord writes a record, replacing its value and all its tags if it exists.
	PutRecord(ctx context.Context, r Record) error
	// GetRecord returns one record with its tags, or ErrNotFound.
	GetRecord(ctx context.Context, namespace, key string) (Record, error)
	// DeleteRecord removes a record and its tags; deleting a missing record is not an error.
	DeleteRecord(ctx context.Context, namespace, key string) error
	// QueryRecords returns the records of namespace matching every filter (AND), ordered by key.
	// No filters returns the whole namespace.
	QueryRecords(ctx context.Context, namespace string, filters ...TagFilter) ([]Record, error)
	// BatchRecords applies ops in order in one transaction: all or nothing. An op whose
	// condition (RecordOp.If) does not hold fails the batch with ErrConflict: the caller read
	// a state that another writer has changed since, and may read again and retry.
	BatchRecords(ctx context.Context, namespace string, ops []RecordOp) error
}

// Credential kinds.
const (
	// KindConfig holds a user's userConfig field values for a server (JSON object).
	KindConfig = "config"
	// KindOAuth holds a user's OAuth token set for a server.
	KindOAuth = "oauth"
	// KindDraft holds field values typed during an unfinished configuration flow.
	KindDraft = "draft"
)

// Credential statuses.
const (
	CredentialUnknown = ""       // saved, not yet used
	CredentialOK      = "ok"     // the server accepted it
	CredentialFailed  = "failed" // the server rejected it; the user must configure again
)

// Sealed is a secret encrypted by store/secret: the id of the key that sealed it, the nonce and
// the AES-256-GCM ciphertext (tag included). The store never sees the plaintext.
type Sealed struct {
	KeyID      string
	Nonce      []byte
	Ciphertext []byte
}

// Credential is a user's sealed credential for one MCP server, keyed by the user's identity
// attribute (never by display name) and the server name.
type Credential struct {
	Identity  string
	Server    string
	Kind      string // KindConfig, KindOAuth or KindDraft
	Secret    Sealed
	Status    string // CredentialUnknown, CredentialOK or CredentialFailed
	CreatedAt time.Time
	UpdatedAt time.Time
}

// CredentialQuery narrows [Credentials.ListCredentials]; empty fields match everything.
// Results are ordered by (Identity, Server, Kind) and start strictly after After, so a caller
// can page through every row.
type CredentialQuery struct {
	Identity string
	Server   string
	After    CredentialKey
	Limit    int // <= 0: no limit
	// NotKeyID keeps only rows sealed under another key id (the rows a rotation must visit).
	NotKeyID string
}

// CredentialKey identifies one credential row.
type CredentialKey struct {
	Identity string
	Server   string
	Kind     string
}

// Credentials stores sealed per-user MCP credentials.
type Credentials interface {
	// PutCredential inserts or replaces a credential row.
	PutCredential(ctx context.Context, c Credential) error
	// GetCredential returns one row, or ErrNotFound.
	GetCredential(ctx context.Context, k CredentialKey) (Credential, error)
	// UpdateCredential runs update on an existing row with the row locked and writes the result;
	// ErrNotFound when the row does not exist. The closure may run more than once.
	UpdateCredential(ctx context.Context, k CredentialKey, update func(Credential) (Credential, error)) (Credential, error)
	// DeleteCredentials removes the rows of identity on server; kind "" removes every kind.
	// Deleting nothing is not an error.
	DeleteCredentials(ctx context.Context, identity, server, kind string) error
	// ListCredentials pages through rows (see CredentialQuery).
	ListCredentials(ctx context.Context, q CredentialQuery) ([]Credential, error)
}

// OutboxMessage is a notice or result waiting to reach a user. It is addressed to an identity
// (delivered to whichever connection that identity has, now or later) or, for a user who has not
// authenticated, to a connection.
type OutboxMessage struct {
	ID           int64
	Identity     string
	ConnectionID string
	Kind         string // what Payload holds, e.g. "text", "approval-result"
	Payload      []byte // JSON, opaque to the store
	CreatedAt    time.Time
	// NextAttemptAt is when the message may next be claimed. A claim moves it forward by the
	// lease, so a claimer that crashes releases the message when its lease ends.
	NextAttemptAt time.Time
	Attempts      int
	LastError     string
}

// NewOutboxMessage is the one constructor of outbox rows (grep for it: nothing else builds
// one): v, encoded as JSON, of kind, to identity (whichever connection it has when the row is
// delivered) or, with identity "", to conn. The caller writes the row in the transaction of what
// caused it: an event's completion ([Completion].Outbox), an approval's step (the notices of
// [Approvals]' updaters), or alone ([Outbox].EnqueueOutbox).
func NewOutboxMessage(identity, conn, kind string, v any) (OutboxMessage, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return OutboxMessage{}, fmt.Errorf("encode %s outbox message: %w", kind, err)
	}
	return OutboxMessage{Identity: identity, ConnectionID: conn, Kind: kind, Payload: payload}, nil
}

// OutboxClaim selects messages to deliver. Identity and ConnectionID narrow the claim to one
// recipient (both empty: any recipient). Messages are claimed in ID order.
type OutboxClaim struct {
	Identity     string
	ConnectionID string
	Now          time.Time
	// DueBy, when set, claims messages due by then instead of by Now (a recipient who just
	// connected gets what was put off while they were away); the lease still starts at Now.
	DueBy time.Time
	Lease time.Duration
	Limit int
}

// Outbox is the durable queue of outbound notices: a message stays until a channel accepted it.
type Outbox interface {
	// EnqueueOutbox stores a message and returns its id. CreatedAt and NextAttemptAt default to
	// the store's clock when zero.
	EnqueueOutbox(ctx context.Context, m OutboxMessage) (int64, error)
	// ClaimOutbox claims up to Limit due messages (NextAttemptAt <= Now): each returned message
	// has Attempts incremented and NextAttemptAt = Now + Lease. Concurrent claimers, in this or
	// another process, never receive the same message while its lease runs.
	ClaimOutbox(ctx context.Context, c OutboxClaim) ([]OutboxMessage, error)
	// AckOutbox removes delivered messages (in one statement). Acking a missing message is not
	// an error.
	AckOutbox(ctx context.Context, ids ...int64) error
	// RetryOutbox releases a claimed message for another attempt at next, recording why the
	// attempt failed.
	RetryOutbox(ctx context.Context, id int64, next time.Time, reason string) error
	// PendingOutbox counts the undelivered messages of an identity.
	PendingOutbox(ctx context.Context, identity string) (int, error)
}

// MemoryEntry is one message of conversation memory.
type MemoryEntry struct {
	Seq       int64 // assigned by the store, increasing per key
	Role      string
	Content   string
	Data      []byte // JSON, e.g. tool calls; opaque to the store
	CreatedAt time.Time
}

// Memory keeps the recent conversation per memory key (the identity once authenticated, the
// connection before).
type Memory interface {
	// AppendMemory appends entries in order, then keeps only the newest keep entries of key
	// (keep <= 0 keeps everything).
	AppendMemory(ctx context.Context, key string, entries []MemoryEntry, keep int) error
	// LoadMemory returns the newest limit entries of key, oldest first (limit <= 0: all).
	LoadMemory(ctx context.Context, key string, limit int) ([]MemoryEntry, error)
	// ClearMemory forgets key.
	ClearMemory(ctx context.Context, key string) error
}

package store

import (
	"context"
	"errors"
	"time"
)

// The durable inbox (architecture.md, "The event pipeline"). A channel acknowledges an inbound
// event only after [Inbox.AcceptEvent] has committed it; the bot handles the events of one
// connection strictly in order, one at a time, on the one replica that holds the connection's
// [Lease], and removes an event only in the transaction that commits everything it caused
// ([Inbox.CompleteEvent]). Every write a worker makes for an event is fenced by its lease: a
// holder that lost the lease (it stalled, and another replica took over) can no longer write.

// ErrLeaseLost is returned by fenced writes when the caller no longer holds the connection's
// lease at the epoch it names: nothing was written, and the new holder will handle the event.
var ErrLeaseLost = errors.New("connection lease lost")

// ErrUnavailable wraps errors that are worth retrying as they are: the database could not be
// reached, the connection broke, the server is restarting or shutting down, a serialization
// failure or deadlock. Implementations wrap such errors with it (keeping the cause in the
// chain) so that callers retry with backoff instead of failing the event.
var ErrUnavailable = errors.New("store unavailable")

// Inbox event states.
const (
	EventPending = "pending" // accepted, not completed
	EventDone    = "done"    // completed; kept (without payload) only to recognise redeliveries
	EventParked  = "parked"  // given up after too many failures; waits for an operator
)

// InboxEvent is one inbound event as the inbox keeps it.
type InboxEvent struct {
	// ID is assigned by the store on acceptance and increases with acceptance order (across
	// connections and processes); a connection's events are handled in ID order.
	ID           int64
	ConnectionID string
	// Key is the channel's own id of the event (a DIDComm message @id, a VS Agent message id).
	// A second event of the same connection with the same Key is a redelivery: it is not stored
	// again (as long as the first is kept, see [Inbox.PurgeInbox]). An empty Key gets a unique
	// one from the store (such events cannot be recognised when redelivered).
	Key string
	// Kind and Payload are the event, encoded by the bot (opaque to the store; Payload is JSON).
	Kind    string
	Payload []byte
	State   string // EventPending, EventDone or EventParked
	// Attempts counts the failed handlings so far (panics, errors); transient store outages do
	// not count. NextAttemptAt is when the event may be handled again after a failure.
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	// Steps is the journal of external work begun while handling the event (JSON, opaque to the
	// store): written before the work starts, so that a crash in the middle is recognised when
	// the event is handled again. Nil when none began.
	Steps      []byte
	AcceptedAt time.Time
	// DoneAt is when the event was completed or parked (zero while pending).
	DoneAt time.Time
}

// Lease is a connection's exclusive right to handle its events. Epoch increases every time the
// lease is taken (by another holder, or again by the same holder after it was released or
// expired), so that a holder can prove in each fenced write that it still holds the lease it
// took.
type Lease struct {
	ConnectionID string
	Holder       string
	Epoch        int64
	ExpiresAt    time.Time
}

// Accept is one event to accept, with how the caller wants its connection's lease handled.
type Accept struct {
	Event InboxEvent // ConnectionID, Key, Kind and Payload; the rest is set by the store
	// Holder, when set, asks for the connection's lease for Holder if it can be taken: no lease,
	// an expired one, one held by a holder that is not alive (see [Inbox.Heartbeat]), or one
	// held by Holder itself (taken again: a new epoch). Leave it empty when the caller already
	// holds the lease and has a worker running for the connection: the lease is then only
	// reported, and no wake-up is published.
	Holder string
	// TTL is the lease's lifetime when taken (required with Holder).
	TTL time.Duration
	// Now is the accepting replica's clock (zero: the store's).
	Now time.Time
}

// Accepted is what [Inbox.AcceptEvent] did.
type Accepted struct {
	// ID of the event; for a redelivery, the ID of the event first accepted with that Key.
	ID int64
	// Duplicate: the Key was seen before; nothing was stored.
	Duplicate bool
	// Lease is the connection's lease after the call: taken (Holder = Accept.Holder, a new
	// Epoch), or held by someone else, or zero when there is none (only when Accept.Holder was
	// empty). When another live holder has it, the store has asked it to look at the
	// connection's events (see [Bus]), in the same transaction.
	Lease Lease
	// Taken: the lease was taken for Accept.Holder by this call.
	Taken bool
	// Older are the IDs of the connection's pending events accepted before this one, in order
	// (the caller holding the lease must handle them first; events another replica accepted
	// show up here even if its notification has not arrived yet).
	Older []int64
}

// Completion is everything the handling of one event caused, committed with its removal from
// the inbox in one transaction by [Inbox.CompleteEvent].
type Completion struct {
	EventID int64
	// Lease fences the write: it must still be held (same holder and epoch), and it is
	// renewed to Now + TTL by the same transaction.
	Lease Lease
	TTL   time.Duration
	Now   time.Time // zero: the store's clock
	// Park, when set, parks the event with this reason instead of completing it.
	Park string
	// Session, when not nil, replaces the connection's session (ConnectionID is the event's
	// connection; CreatedAt is kept when the row exists, set to Now otherwise; UpdatedAt is the
	// Session's when set — a write that is not the user's activity keeps the old one, since
	// notices go to an identity's most recently updated connection — else Now). DeleteSession
	// removes it instead (a closed connection).
	Session       *Session
	DeleteSession bool
	// Memory is appended per key (each key's entries in order, trimmed to Keep newest); the
	// keys of ClearMemory are forgotten first.
	Memory      []MemoryAppend
	ClearMemory []string
	// Outbox messages are stored with the event's completion: replies to this connection and
	// notices to others. Their NextAttemptAt is honoured (a caller that delivers them itself
	// right after the commit sets it to Now + its delivery lease, so that no other deliverer
	// claims them meanwhile).
	Outbox []OutboxMessage
	// Audit rows of the tool calls the event made.
	Audit []AuditRecord
	// AckOutbox removes outbox messages delivered earlier (acks batched into the next commit).
	AckOutbox []int64
}

// MemoryAppend is one [Memory.AppendMemory] done inside a completion.
type MemoryAppend struct {
	Key     string
	Entries []MemoryEntry
	Keep    int
}

// Completed is what [Inbox.CompleteEvent] committed.
type Completed struct {
	// OutboxIDs are the ids of Completion.Outbox, in order.
	OutboxIDs []int64
}

// Failure records a failed handling of an event, fenced by the lease.
type Failure struct {
	EventID int64
	Lease   Lease
	// Next is when the event may be handled again; Reason is kept as LastError.
	Next   time.Time
	Reason string
	// Count adds one to Attempts (a panic or an error of the flow); transient store outages
	// do not count.
	Count bool
}

// ParkedQuery narrows [Inbox.ListParked]; empty fields match everything.
type ParkedQuery struct {
	ConnectionID string
	Limit        int // <= 0: 100
}

// Inbox is the durable queue of inbound events and the per-connection leases that order their
// handling. All methods are safe for concurrent use by many goroutines and by several processes
// sharing the database. Fenced methods return [ErrLeaseLost] (and write nothing) when the
// lease they name is no longer held at that epoch. A lease that expired but that nobody took
// over is still held: its holder's fenced writes succeed until another holder takes it. Epochs
// of a connection only grow, across releases too, so a fencing token is never handed out
// twice while the connection has anything in the inbox (a lease whose connection has nothing
// left is forgotten: see DropEvent and PurgeInbox).
type Inbox interface {
	// AcceptEvent stores a pending event unless its (ConnectionID, Key) was seen, and handles
	// the connection's lease as [Accept] says, in one transaction (one round trip where the
	// database allows). It returns once the event is durable.
	AcceptEvent(ctx context.Context, a Accept) (Accepted, error)
	// TakeLease takes the connection's lease for holder under the same conditions as
	// [Accept.Holder]; ok is false (and the current lease returned) when someone else holds it.
	TakeLease(ctx context.Context, conn, holder string, ttl time.Duration, now time.Time) (l Lease, ok bool, err error)
	// RenewLeases extends to now + ttl the leases of conns that holder still holds (any epoch)
	// and returns the conns it no longer holds.
	RenewLeases(ctx context.Context, holder string, conns []string, ttl time.Duration, now time.Time) (lost []string, err error)
	// ReleaseLease gives up a lease, but only when the connection has no pending event that is
	// due by now (released false otherwise: the caller keeps the lease and handles them).
	// Releasing a lease no longer held is not an error (released true).
	ReleaseLease(ctx context.Context, l Lease, now time.Time) (released bool, err error)
	// PendingEvents returns up to limit (<= 0: 100) pending events of conn with ID > after, in
	// ID order, with their payloads (due or not: the caller decides when to handle them).
	PendingEvents(ctx context.Context, conn string, after int64, limit int) ([]InboxEvent, error)
	// SaveSteps replaces the event's journal (fenced). It returns once the journal is durable.
	SaveSteps(ctx context.Context, eventID int64, l Lease, steps []byte) error
	// CompleteEvent commits c in one transaction (fenced); the event becomes EventDone (its
	// payload and journal dropped) or EventParked (kept, with c.Park as LastError). When the
	// lease is held but the event is not a pending event of its connection (done already, as
	// when a completion is retried after its commit's reply was lost; parked; unknown) it
	// returns ErrNotFound and writes nothing. Memory appends to one key are merged (entries in
	// order, the last Keep); a key both cleared and appended to keeps numbering its entries
	// after the forgotten ones, while a key only cleared starts again from 1.
	CompleteEvent(ctx context.Context, c Completion) (Completed, error)
	// FailEvent records a failed handling (fenced): LastError, NextAttemptAt and, with Count,
	// Attempts + 1. The event stays pending and the lease stays with the caller.
	FailEvent(ctx context.Context, f Failure) (InboxEvent, error)
	// ClaimableConnections returns up to limit (<= 0: 100) connections that have a pending
	// event due by now and whose lease is free, expired, or held by a holder that is not alive:
	// the ones a replica should take over (a crash, a lost notification). Oldest due pending
	// event first.
	ClaimableConnections(ctx context.Context, now time.Time, limit int) ([]string, error)
	// ListParked returns parked events, oldest first, with payloads and reasons.
	ListParked(ctx context.Context, q ParkedQuery) ([]InboxEvent, error)
	// ReplayParked makes a parked event pending again (Attempts 0, due now, LastError kept until
	// the next failure replaces it); ErrNotFound when no parked event has that id. The
	// connection's next handling takes it, in ID order: it keeps its ID, older than the events
	// handled since, so a worker finds it with PendingEvents(conn, 0, …), not after its last ID.
	// No wake-up is published: a connection without a live lease becomes claimable.
	ReplayParked(ctx context.Context, eventID int64, now time.Time) (InboxEvent, error)
	// DropEvent deletes a pending event (fenced) as if it had never been accepted — an event
	// the bot does not handle, of a connection it does not know — and, when the inbox holds
	// nothing else of the connection, the connection's lease too: forgotten is then true, and the
	// caller holds the lease no more. ErrNotFound when the event is not a pending event of the
	// lease's connection.
	DropEvent(ctx context.Context, eventID int64, l Lease) (forgotten bool, err error)
	// PurgeInbox deletes done events completed before before (their Keys no longer recognise
	// redeliveries) and returns how many; with them go the released leases of connections the
	// inbox and the outbox hold nothing more of (a later take starts their epochs again: a
	// holder of one of theirs would have been stalled since the events were done).
	PurgeInbox(ctx context.Context, before time.Time) (int, error)
	// Heartbeat says holder is alive until now + ttl; a holder whose heartbeat ran out is dead,
	// and its leases may be taken at once (not only when they expire). A holder that never beat
	// is alive until its leases expire. Replicas beat more often than ttl. ForgetHolder removes
	// a holder's heartbeat and releases its leases (a clean shutdown).
	Heartbeat(ctx context.Context, holder string, ttl time.Duration, now time.Time) error
	ForgetHolder(ctx context.Context, holder string) error
}

// Notification topics of the [Bus].
const (
	// TopicWake asks a holder to look at a connection's events (Payload: the connection id).
	TopicWake = "wake"
	// TopicInvalidate tells every replica that cached state of some identities changed (badge
	// counts): Payload is a JSON array of identities.
	TopicInvalidate = "invalidate"
)

// Notification is one message of the [Bus].
type Notification struct {
	// To is the holder it is for; empty: every replica.
	To      string
	Topic   string
	Payload string
}

// Bus carries notifications between the replicas sharing a database (PostgreSQL
// LISTEN/NOTIFY). A store whose database serves one process only (SQLite) has no bus; the
// caller asks with a type assertion to [BusProvider]. Notifications are best-effort wake-ups
// (a listener that is reconnecting misses them): the inbox's state, not the bus, is the truth,
// and ClaimableConnections and PendingEvents find whatever a lost notification was about.
type Bus interface {
	// Listen calls fn for every notification to holder or to every replica, until ctx is done
	// (then it returns nil) or the listening connection fails (then it returns the error; the
	// caller listens again). ready is closed once the listener is subscribed. fn runs on the
	// listener's goroutine and must not block.
	Listen(ctx context.Context, holder string, ready chan<- struct{}, fn func(Notification)) error
	// Publish sends n (committed at once; [Inbox.AcceptEvent] publishes its own wake-ups in its
	// transaction). Payloads are at most 7,000 bytes.
	Publish(ctx context.Context, n Notification) error
}

// BusProvider is implemented by stores that may have a [Bus]: Bus returns it and true when
// the database is shared by replicas (PostgreSQL), nil and false otherwise (SQLite). The bus
// is a separate value so that a store without one never satisfies [Bus] by accident.
type BusProvider interface {
	Bus() (Bus, bool)
}

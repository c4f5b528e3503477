package audit

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/packbot/packbot/store"
)

// Story is an approval request as the audit tells it: who asked, for what (by fingerprint),
// under which terms, who voted when, how it ended. It never holds the arguments, the result or
// the error text of the request (they may hold values): only their fingerprints.
type Story struct {
	ID            string      `json:"id"`
	Server        string      `json:"server"`
	Tool          string      `json:"tool"`
	Fingerprint   string      `json:"fingerprint"`
	Requester     string      `json:"requester"`
	RequesterName string      `json:"requesterName,omitempty"`
	ApproverRoles []string    `json:"approverRoles"`
	Quorum        int         `json:"quorum"`
	CreatedAt     time.Time   `json:"createdAt"`
	ExpiresAt     time.Time   `json:"expiresAt"`
	Status        string      `json:"status"`
	ResolvedBy    string      `json:"resolvedBy,omitempty"`
	ResolvedAt    *time.Time  `json:"resolvedAt,omitempty"`
	Votes         []StoryVote `json:"votes"`
	Execution     string      `json:"execution,omitempty"`
	// ResultFingerprint is the SHA-256 (hex) of the stored result of the execution.
	ResultFingerprint string `json:"resultFingerprint,omitempty"`
}

// StoryVote is one vote of a [Story].
type StoryVote struct {
	Approver string    `json:"approver"`
	Decision string    `json:"decision"`
	At       time.Time `json:"at"`
}

// StoryOf is a's story.
func StoryOf(a store.Approval) *Story {
	s := &Story{ID: a.ID, Server: a.Server, Tool: a.Tool, Fingerprint: a.Fingerprint, Requester: a.Requester, RequesterName: a.RequesterName,
		ApproverRoles: slices.Clone(a.ApproverRoles), Quorum: a.Quorum, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt, Status: a.Status,
		ResolvedBy: a.ResolvedBy, Execution: a.Exec, Votes: []StoryVote{}}
	if !a.ResolvedAt.IsZero() {
		t := a.ResolvedAt
		s.ResolvedAt = &t
	}
	for _, v := range a.Votes {
		s.Votes = append(s.Votes, StoryVote{Approver: v.Approver, Decision: v.Decision, At: v.At})
	}
	if len(a.Result) > 0 {
		sum := sha256.Sum256(a.Result)
		s.ResultFingerprint = hex.EncodeToString(sum[:])
	}
	return s
}

// Entry is one audit record and, when it belongs to an approval request, the request's story.
type Entry struct {
	Record store.AuditRecord
	Story  *Story
}

// entryJSON is an Entry as a JSON line: the record's fields, and the story under "approval".
type entryJSON struct {
	ID                int64     `json:"id"`
	At                time.Time `json:"at"`
	Event             string    `json:"event,omitempty"`
	Identity          string    `json:"identity"`
	Roles             []string  `json:"roles"`
	Server            string    `json:"server"`
	Tool              string    `json:"tool"`
	ArgsFingerprint   string    `json:"argsFingerprint"`
	Decision          string    `json:"decision"`
	Outcome           string    `json:"outcome"`
	ApprovalID        string    `json:"approvalId,omitempty"`
	LatencyMs         float64   `json:"latencyMs"`
	Error             string    `json:"error,omitempty"`
	ResultFingerprint string    `json:"resultFingerprint,omitempty"`
	Detail            string    `json:"detail,omitempty"`
	Lane              int64     `json:"lane"`
	Seq               int64     `json:"seq"`
	Hash              string    `json:"hash"`
	Approval          *Story    `json:"approval,omitempty"`
}

// MarshalJSON writes the entry as one JSON object (for SIEM export: one per line).
func (e Entry) MarshalJSON() ([]byte, error) {
	r := e.Record
	roles := r.Roles
	if roles == nil {
		roles = []string{}
	}
	return json.Marshal(entryJSON{ID: r.ID, At: r.At, Event: r.Event, Identity: r.Identity, Roles: roles, Server: r.Server,
		Tool: r.Tool, ArgsFingerprint: r.ArgsFingerprint, Decision: r.Decision, Outcome: r.Outcome, ApprovalID: r.ApprovalID,
		LatencyMs: float64(r.Latency) / float64(time.Millisecond), Error: r.Error, ResultFingerprint: r.ResultFingerprint, Detail: r.Detail,
		Lane: r.Link.Lane, Seq: r.Link.Seq, Hash: r.Hash, Approval: e.Story})
}

// Cursor is where a reader is in each lane: the last seq it read.
type Cursor map[int64]int64

// Reader lists and follows the audit with the stories of the approvals. It reads what every
// replica wrote (the store is shared). Not safe for concurrent use.
type Reader struct {
	st Store
}

// NewReader returns a reader of st.
func NewReader(st Store) *Reader { return &Reader{st: st} }

// List returns the newest q.Limit records matching q, oldest first, with their stories, and the
// cursor from which Follow takes the records written after them.
func (rd *Reader) List(ctx context.Context, q store.AuditQuery) ([]Entry, Cursor, error) {
	cur, err := rd.cursor(ctx)
	if err != nil {
		return nil, nil, err
	}
	rs, err := rd.st.ListAudit(ctx, q)
	if err != nil {
		return nil, nil, fmt.Errorf("list the audit: %w", err)
	}
	stories := map[string]*Story{}
	out := make([]Entry, 0, len(rs))
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		if r.Link.Seq > cur[r.Link.Lane] {
			continue // written after the cursor was taken: Follow has it
		}
		e, err := rd.entry(ctx, r, stories)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, e)
	}
	return out, cur, nil
}

// cursor is where every lane's head is now.
func (rd *Reader) cursor(ctx context.Context) (Cursor, error) {
	lanes, err := rd.st.AuditLanes(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the audit's lanes: %w", err)
	}
	cur := Cursor{}
	for _, l := range lanes {
		cur[l.Lane] = l.Seq
	}
	return cur, nil
}

// entry is r with its story (read once per call of the caller: stories caches them).
func (rd *Reader) entry(ctx context.Context, r store.AuditRecord, stories map[string]*Story) (Entry, error) {
	e := Entry{Record: r}
	if r.ApprovalID == "" {
		return e, nil
	}
	if s, ok := stories[r.ApprovalID]; ok {
		e.Story = s
		return e, nil
	}
	a, err := rd.st.GetApproval(ctx, r.ApprovalID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return e, fmt.Errorf("read approval %s: %w", r.ApprovalID, err)
	default:
		e.Story = StoryOf(a)
	}
	stories[r.ApprovalID] = e.Story
	return e, nil
}

// Follow emits, from cur on, every record matching q (Limit aside) that any replica appends,
// in the order of their time, looking every every, until ctx ends (nil) or emit fails. Each
// lane is read in chain order from where cur left it, so that no record is missed or emitted
// twice, whichever replica wrote it and whenever it committed. A record is emitted once it is
// sealed: on a store that seals records after their commit, within the sealer's period.
func (rd *Reader) Follow(ctx context.Context, q store.AuditQuery, cur Cursor, every time.Duration, emit func(Entry) error) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := rd.followOnce(ctx, q, cur, emit); err != nil {
			if ctx.Err() != nil {
				return nil // stopped, also in the middle of a read
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// followOnce emits the records matching q written after cur, and moves cur past them.
func (rd *Reader) followOnce(ctx context.Context, q store.AuditQuery, cur Cursor, emit func(Entry) error) error {
	lanes, err := rd.st.AuditLanes(ctx)
	if err != nil {
		return fmt.Errorf("follow the audit: %w", err)
	}
	var rs []store.AuditRecord
	for _, l := range lanes {
		for l.Seq > cur[l.Lane] {
			page, err := rd.st.AuditChain(ctx, l.Lane, cur[l.Lane], pageSize)
			if err != nil {
				return fmt.Errorf("follow the audit: %w", err)
			}
			if len(page) == 0 {
				break
			}
			rs = append(rs, page...)
			cur[l.Lane] = page[len(page)-1].Link.Seq
		}
	}
	slices.SortStableFunc(rs, func(a, b store.AuditRecord) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
	stories := map[string]*Story{}
	for _, r := range rs {
		if !q.Matches(r) {
			continue
		}
		e, err := rd.entry(ctx, r, stories)
		if err != nil {
			return err
		}
		if err := emit(e); err != nil {
			return err
		}
	}
	return nil
}

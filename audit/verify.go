package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/packbot/packbot/store"
)

// Kinds of [Problem].
const (
	Changed   = "changed"   // a record's fields (or place) are not those it was written with
	Removed   = "removed"   // a record is gone
	Inserted  = "inserted"  // a record was never appended: in no chain, or after its lane's head
	Reordered = "reordered" // a record is not where its chain put it
	Forged    = "forged"    // a checkpoint does not verify, is gone, or is signed by another key
)

// Problem is one thing verification found wrong. It is an error, so that [VerifyRecord] can
// return it.
type Problem struct {
	Kind       string
	Record     int64 // the record named; 0 when only its place is known
	Lane, Seq  int64 // the record's place (0 for a checkpoint's problem)
	Checkpoint int64 // the checkpoint concerned, if any
	Detail     string
	// order sorts problems in the order of the chain, as far as it is known: twice the id of the
	// record before the place (plus one) or of the record named; checkpoints' last.
	order int64
}

// Error describes the problem in one line, naming the record (or its place) first.
func (p *Problem) Error() string { return p.String() }

func (p Problem) String() string {
	switch {
	case p.Kind == Forged:
		return fmt.Sprintf("checkpoint %d: %s", p.Checkpoint, p.Detail)
	case p.Record != 0:
		return fmt.Sprintf("record %d %s (lane %d, seq %d): %s", p.Record, p.Kind, p.Lane, p.Seq, p.Detail)
	}
	return fmt.Sprintf("the record at lane %d, seq %d %s: %s", p.Lane, p.Seq, p.Kind, p.Detail)
}

// Options narrow [Verify].
type Options struct {
	// Signer is the DID every checkpoint must be signed by (the bot's: [Key.DID]). Empty, any
	// valid signature counts, but checkpoints signed by more than one key are a problem.
	Signer string
	// Last, when > 0, checks only the last Last records of each lane and the last 100
	// checkpoints (doctor's bounded check).
	Last int
	// MACKey is the store's audit key ([MACKeyFromMaster]): with it, a record not sealed yet
	// whose MAC is right is pending, and one whose MAC is wrong is a problem. Without it,
	// unsealed records with a MAC are counted as Unchecked.
	MACKey []byte
}

// Report is what [Verify] checked and found.
type Report struct {
	Records     int // records checked
	Lanes       int // lanes with records
	Checkpoints int // checkpoints checked
	Signers     []string
	// LastCheckpoint is the newest checkpoint (zero when there is none); Uncovered counts the
	// records appended after it, which no signature protects yet.
	LastCheckpoint store.AuditCheckpoint
	Uncovered      int64
	// Pending counts the records written to be sealed after their commit and not sealed yet,
	// whose MACs are right; Unchecked those whose MACs could not be checked (no Options.MACKey).
	Pending, Unchecked int
	// Problems, the first record changed, removed, inserted or reordered first.
	Problems []Problem
}

// OK reports whether nothing is wrong.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// pageSize is how many records or checkpoints are read at a time.
const pageSize = 1000

// maxProblems bounds what a report lists.
const maxProblems = 100

// expectation is a lane's head as a checkpoint signed it.
type expectation struct {
	checkpoint int64
	state      laneState
}

type verifier struct {
	st     Store
	o      Options
	rep    Report
	expect map[int64][]expectation // by lane, in seq order
	// macs maps the MACs read (their first 8 bytes) to their records: a second record with a
	// first one's MAC is a copy of it.
	macs map[string]int64
}

// Verify checks the whole audit (or, with o.Last, its tail): each lane's records follow each
// other with nothing missing, inserted or moved, each record's hash is that of its content and
// place, each lane's head is its last record, no record is outside the chains; the checkpoints
// follow each other, each is signed (by o.Signer) and names the checkpoint before it, and the
// records they name are there, unchanged. A problem is in the report; the error is the store's.
func Verify(ctx context.Context, st Store, o Options) (Report, error) {
	v := &verifier{st: st, o: o, expect: map[int64][]expectation{}, macs: map[string]int64{}}
	lanes, err := st.AuditLanes(ctx)
	if err != nil {
		return v.rep, fmt.Errorf("verify the audit: %w", err)
	}
	if err := v.checkpoints(ctx); err != nil {
		return v.rep, fmt.Errorf("verify the audit's checkpoints: %w", err)
	}
	for _, l := range lanes {
		if err := v.lane(ctx, l); err != nil {
			return v.rep, fmt.Errorf("verify the audit's lane %d: %w", l.Lane, err)
		}
	}
	if err := v.offChain(ctx); err != nil {
		return v.rep, fmt.Errorf("verify the audit: %w", err)
	}
	v.uncovered(lanes)
	slices.SortStableFunc(v.rep.Problems, func(a, b Problem) int { return cmp.Compare(a.order, b.order) })
	if len(v.rep.Problems) > maxProblems {
		v.rep.Problems = v.rep.Problems[:maxProblems]
	}
	return v.rep, nil
}

func (v *verifier) problem(p Problem) {
	if p.order == 0 {
		p.order = 2 * p.Record
	}
	if p.Kind == Forged {
		p.order = 1<<62 + p.Checkpoint
	}
	v.rep.Problems = append(v.rep.Problems, p)
}

// checkpoints reads the checkpoints (the last 100 with o.Last), checks them and records what
// each signed of the lanes.
func (v *verifier) checkpoints(ctx context.Context) error {
	c := checkpointWalk{v: v, signers: map[string]bool{}, heads: map[int64]int64{}, bounded: v.o.Last > 0}
	if c.bounded {
		cps, err := v.st.AuditCheckpoints(ctx, -1, 100)
		if err != nil {
			return err
		}
		c.check(cps)
	} else {
		for after := int64(0); ; {
			cps, err := v.st.AuditCheckpoints(ctx, after, pageSize)
			if err != nil {
				return err
			}
			c.check(cps)
			if len(cps) < pageSize {
				break
			}
			after = cps[len(cps)-1].Seq
		}
	}
	for s := range c.signers {
		v.rep.Signers = append(v.rep.Signers, s)
	}
	slices.Sort(v.rep.Signers)
	if v.o.Signer == "" && len(v.rep.Signers) > 1 {
		v.problem(Problem{Kind: Forged, Checkpoint: v.rep.LastCheckpoint.Seq, Detail: fmt.Sprintf("the checkpoints are signed by %d keys (%v): "+
			"name the bot's (PACKBOT_DIDCOMM_KEY) to know which are forged", len(v.rep.Signers), v.rep.Signers)})
	}
	for l := range v.expect {
		slices.SortStableFunc(v.expect[l], func(a, b expectation) int { return cmp.Compare(a.state.Seq, b.state.Seq) })
	}
	return nil
}

// checkpointWalk checks checkpoints in order.
type checkpointWalk struct {
	v       *verifier
	prev    *store.AuditCheckpoint // the last one read (nil before the first)
	signers map[string]bool
	heads   map[int64]int64 // lane → seq, as the last good checkpoint signed it
	bounded bool            // the first one read is not the first one
}

func (w *checkpointWalk) check(cps []store.AuditCheckpoint) {
	v := w.v
	for i := range cps {
		c := &cps[i]
		v.rep.Checkpoints++
		v.rep.LastCheckpoint = *c
		prev := w.prev
		switch {
		case prev != nil && c.Seq != prev.Seq+1:
			v.problem(Problem{Kind: Forged, Checkpoint: prev.Seq + 1, Detail: fmt.Sprintf("checkpoints %d to %d are gone", prev.Seq+1, c.Seq-1)})
			prev = nil
		case prev == nil && !w.bounded && c.Seq != 1:
			v.problem(Problem{Kind: Forged, Checkpoint: 1, Detail: fmt.Sprintf("checkpoints 1 to %d are gone", c.Seq-1)})
		}
		w.prev = c
		b, err := parseCheckpoint(*c, prev)
		if err != nil {
			v.problem(Problem{Kind: Forged, Checkpoint: c.Seq, Detail: err.Error()})
			continue
		}
		if v.o.Signer != "" && c.Signer != v.o.Signer {
			v.problem(Problem{Kind: Forged, Checkpoint: c.Seq, Detail: fmt.Sprintf("signed by %s, not by the bot (%s)", c.Signer, v.o.Signer)})
			continue
		}
		w.signers[c.Signer] = true
		for _, l := range b.Lanes {
			if l.Seq < w.heads[l.Lane] {
				v.problem(Problem{Kind: Forged, Checkpoint: c.Seq, Detail: fmt.Sprintf("lane %d goes back from seq %d to %d", l.Lane, w.heads[l.Lane], l.Seq)})
			}
			w.heads[l.Lane] = l.Seq
			v.expect[l.Lane] = append(v.expect[l.Lane], expectation{checkpoint: c.Seq, state: l})
		}
	}
}

// lane walks one lane's records in order.
func (v *verifier) lane(ctx context.Context, head store.AuditLane) error {
	if head.Seq > 0 {
		v.rep.Lanes++
	}
	after, trustFirst := int64(0), false
	if v.o.Last > 0 && head.Seq > int64(v.o.Last) {
		after, trustFirst = head.Seq-int64(v.o.Last), true
	}
	exp := v.expect[head.Lane]
	for len(exp) > 0 && exp[0].state.Seq <= after {
		exp = exp[1:]
	}
	prev := store.AuditLane{Lane: head.Lane}
	for {
		rs, err := v.st.AuditChain(ctx, head.Lane, after, pageSize)
		if err != nil {
			return err
		}
		for _, r := range rs {
			v.rep.Records++
			if trustFirst {
				prev, trustFirst = store.AuditLane{Lane: head.Lane, Seq: r.Link.Seq - 1, ID: r.Link.PrevID, Hash: r.Link.Prev}, false
			}
			reported := v.record(head, prev, r)
			for len(exp) > 0 && exp[0].state.Seq < r.Link.Seq {
				if !reported && exp[0].state.Seq > prev.Seq { // not a gap already reported
					v.problem(Problem{Kind: Removed, Record: exp[0].state.ID, Lane: head.Lane, Seq: exp[0].state.Seq, Checkpoint: exp[0].checkpoint,
						Detail: fmt.Sprintf("checkpoint %d names it, and it is not in its lane", exp[0].checkpoint)})
				}
				exp = exp[1:]
			}
			for len(exp) > 0 && exp[0].state.Seq == r.Link.Seq {
				if e := exp[0]; !reported && (e.state.ID != r.ID || e.state.Hash != r.Hash) {
					v.problem(Problem{Kind: Changed, Record: r.ID, Lane: head.Lane, Seq: r.Link.Seq, Checkpoint: e.checkpoint,
						Detail: fmt.Sprintf("checkpoint %d signed record %d with hash %s here", e.checkpoint, e.state.ID, e.state.Hash)})
					reported = true
				}
				exp = exp[1:]
			}
			prev = store.AuditLane{Lane: head.Lane, Seq: r.Link.Seq, ID: r.ID, Hash: r.Hash}
			after = r.Link.Seq
		}
		if len(rs) < pageSize {
			break
		}
	}
	for _, e := range exp {
		v.problem(Problem{Kind: Removed, Record: e.state.ID, Lane: head.Lane, Seq: e.state.Seq, Checkpoint: e.checkpoint,
			Detail: fmt.Sprintf("checkpoint %d names it, and its lane ends at seq %d", e.checkpoint, prev.Seq)})
	}
	switch {
	case prev.Seq < head.Seq:
		v.problem(Problem{Kind: Removed, Record: onlyIf(head.Seq == prev.Seq+1, head.ID), Lane: head.Lane, Seq: prev.Seq + 1, order: 2*prev.ID + 1,
			Detail: fmt.Sprintf("the lane ends at seq %d, its head is record %d at seq %d", prev.Seq, head.ID, head.Seq)})
	case prev.Seq == head.Seq && (prev.ID != head.ID || prev.Hash != head.Hash):
		v.problem(Problem{Kind: Changed, Record: prev.ID, Lane: head.Lane, Seq: prev.Seq,
			Detail: fmt.Sprintf("the lane's head names record %d with hash %s", head.ID, head.Hash)})
	}
	return nil
}

// record checks r, read after prev in head's lane, and reports whether it found a problem.
func (v *verifier) record(head, prev store.AuditLane, r store.AuditRecord) bool {
	p := Problem{Record: r.ID, Lane: r.Link.Lane, Seq: r.Link.Seq, order: 2*prev.ID + 1}
	switch {
	case r.Link.Seq > head.Seq:
		p.Kind, p.Detail = Inserted, fmt.Sprintf("it comes after its lane's head (record %d at seq %d)", head.ID, head.Seq)
	case r.Link.Seq > prev.Seq+1:
		p.Kind, p.Seq = Removed, prev.Seq+1
		p.Record = onlyIf(r.Link.PrevID != prev.ID && r.Link.Seq == prev.Seq+2, r.Link.PrevID)
		p.Detail = fmt.Sprintf("seq %d to %d of the lane are missing: record %d at seq %d names record %d before it", prev.Seq+1, r.Link.Seq-1,
			r.ID, r.Link.Seq, r.Link.PrevID)
	case r.Link.PrevID != prev.ID || r.Link.Prev != prev.Hash:
		p.Kind, p.Detail = Reordered, fmt.Sprintf("it names record %d before it, but follows record %d", r.Link.PrevID, prev.ID)
	case r.Hash != store.AuditHash(r):
		p.Kind, p.Detail = Changed, "its hash is not that of its content and place"
	case v.copied(r) != 0:
		p.Kind, p.Detail = Inserted, fmt.Sprintf("it is a copy of record %d (the same content and MAC)", v.copied(r))
	default:
		return false
	}
	v.problem(p)
	return true
}

// onlyIf is id when ok, else 0.
func onlyIf(ok bool, id int64) int64 {
	if ok {
		return id
	}
	return 0
}

// offChain reports the records that are in no chain.
func (v *verifier) offChain(ctx context.Context) error {
	for after := int64(0); ; {
		rs, err := v.st.AuditChain(ctx, 0, after, pageSize)
		if err != nil {
			return err
		}
		for _, r := range rs {
			v.rep.Records++
			v.unsealed(r)
			after = r.ID
		}
		if len(rs) < pageSize {
			return nil
		}
	}
}

// unsealed checks r, a record in no chain: one written to be sealed after its commit, not sealed
// yet, is pending when its MAC is right (unchecked without a key); any other is a problem.
func (v *verifier) unsealed(r store.AuditRecord) {
	p := Problem{Kind: Inserted, Record: r.ID, Lane: r.Link.Lane, Seq: r.Link.Seq, Detail: "it is in no chain"}
	switch {
	case r.Link.Seq < 0:
		p.Detail = "it was set aside, not sealed: its MAC was wrong (forged, or changed before its seal)"
	case r.Link.Seq > 0 || r.MAC == "":
	case v.copied(r) != 0:
		p.Detail = fmt.Sprintf("it is a copy of record %d (the same content and MAC), not sealed yet", v.copied(r))
	case v.o.MACKey == nil:
		v.rep.Unchecked++
		return
	case !store.CheckAuditMAC(v.o.MACKey, r):
		p.Detail = "it is not sealed yet and its MAC is wrong: forged, or changed before its seal"
	default:
		v.rep.Pending++
		return
	}
	v.problem(p)
}

// copied returns the record read before r with r's MAC (0 when there is none, or r has none),
// and remembers r's.
func (v *verifier) copied(r store.AuditRecord) int64 {
	if r.MAC == "" {
		return 0
	}
	k := r.MAC[:min(16, len(r.MAC))]
	if first, ok := v.macs[k]; ok && first != r.ID {
		return first
	}
	v.macs[k] = r.ID
	return 0
}

// uncovered counts the records appended after the last checkpoint.
func (v *verifier) uncovered(lanes []store.AuditLane) {
	signed := map[int64]int64{}
	if last := v.rep.LastCheckpoint; last.Seq > 0 {
		if b, err := parseCheckpoint(last, nil); err == nil {
			for _, l := range b.Lanes {
				signed[l.Lane] = l.Seq
			}
		}
	}
	for _, l := range lanes {
		v.rep.Uncovered += max(l.Seq-signed[l.Lane], 0)
	}
}

// RecordCheck is what [VerifyRecord] found.
type RecordCheck struct {
	Record store.AuditRecord
	// Checkpoint is the first checkpoint that covers the record (0 when none does yet), and
	// Signer its signer.
	Checkpoint int64
	Signer     string
}

// VerifyRecord checks one record, as a receipt that quotes its id and hash needs: it is in the
// store unchanged (its hash is hash, and that of its content and place), in its place (the
// records before and after it name it), and — when a checkpoint covers it — every record from
// it to the head that checkpoint signed for its lane links up, and the checkpoint is signed (by
// signer, when set). What is wrong is returned as a *[Problem] (errors.As); other errors are
// the store's.
func VerifyRecord(ctx context.Context, st Store, id int64, hash, signer string) (RecordCheck, error) {
	r, err := st.GetAudit(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return RecordCheck{}, &Problem{Kind: Removed, Record: id, Detail: "it is not in the audit"}
	}
	if err != nil {
		return RecordCheck{}, fmt.Errorf("verify audit record %d: %w", id, err)
	}
	rc := RecordCheck{Record: r}
	p := &Problem{Record: id, Lane: r.Link.Lane, Seq: r.Link.Seq}
	switch {
	case r.Hash != hash:
		p.Kind, p.Detail = Changed, fmt.Sprintf("its hash is %s, not %s", r.Hash, hash)
	case r.Link.Seq <= 0:
		p.Kind, p.Detail = Inserted, "it is in no chain"
	case r.Hash != store.AuditHash(r):
		p.Kind, p.Detail = Changed, "its hash is not that of its content and place"
	}
	if p.Kind != "" {
		return rc, p
	}
	if r.Link.PrevID != 0 {
		before, err := st.GetAudit(ctx, r.Link.PrevID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return rc, &Problem{Kind: Removed, Record: r.Link.PrevID, Lane: r.Link.Lane, Seq: r.Link.Seq - 1, Detail: fmt.Sprintf("record %d names it before it", id)}
		case err != nil:
			return rc, fmt.Errorf("verify audit record %d: %w", id, err)
		case before.Hash != r.Link.Prev || before.Link.Lane != r.Link.Lane || before.Link.Seq != r.Link.Seq-1:
			return rc, &Problem{Kind: Reordered, Record: id, Lane: r.Link.Lane, Seq: r.Link.Seq, Detail: fmt.Sprintf("record %d is not the one before it", before.ID)}
		}
	}
	return rc, covered(ctx, st, &rc, signer)
}

// covered finds the first checkpoint that covers rc.Record and checks the records from it to
// the head the checkpoint signed; without one, that the record after it names it, or that it is
// its lane's head.
func covered(ctx context.Context, st Store, rc *RecordCheck, signer string) error {
	r := rc.Record
	cp, target, err := coveringCheckpoint(ctx, st, r.Link)
	if err != nil {
		return fmt.Errorf("verify audit record %d: %w", r.ID, err)
	}
	until := r.Link.Seq + 1 // without a checkpoint: the record after it
	if cp.Seq > 0 {
		if _, err := parseCheckpoint(cp, nil); err != nil {
			return &Problem{Kind: Forged, Checkpoint: cp.Seq, Detail: err.Error()}
		}
		if signer != "" && cp.Signer != signer {
			return &Problem{Kind: Forged, Checkpoint: cp.Seq, Detail: fmt.Sprintf("signed by %s, not by the bot (%s)", cp.Signer, signer)}
		}
		rc.Checkpoint, rc.Signer, until = cp.Seq, cp.Signer, target.Seq
	}
	prev := store.AuditLane{Lane: r.Link.Lane, Seq: r.Link.Seq, ID: r.ID, Hash: r.Hash}
	for prev.Seq < until {
		rs, err := st.AuditChain(ctx, r.Link.Lane, prev.Seq, pageSize)
		if err != nil {
			return fmt.Errorf("verify audit record %d: %w", r.ID, err)
		}
		if len(rs) == 0 {
			break
		}
		for _, n := range rs {
			if n.Link.Seq != prev.Seq+1 || n.Link.PrevID != prev.ID || n.Link.Prev != prev.Hash || n.Hash != store.AuditHash(n) {
				return &Problem{Kind: Changed, Record: n.ID, Lane: n.Link.Lane, Seq: n.Link.Seq,
					Detail: fmt.Sprintf("the chain from record %d breaks here", r.ID)}
			}
			prev = store.AuditLane{Lane: n.Link.Lane, Seq: n.Link.Seq, ID: n.ID, Hash: n.Hash}
			if prev.Seq >= until {
				break
			}
		}
	}
	switch {
	case cp.Seq > 0 && (prev.Seq != target.Seq || prev.ID != target.ID || prev.Hash != target.Hash):
		return &Problem{Kind: Removed, Record: target.ID, Lane: target.Lane, Seq: target.Seq, Checkpoint: cp.Seq,
			Detail: fmt.Sprintf("checkpoint %d signed it, and the chain from record %d does not reach it", cp.Seq, r.ID)}
	case cp.Seq == 0 && prev.Seq == r.Link.Seq: // no record after it: it must be its lane's head
		lanes, err := st.AuditLanes(ctx)
		if err != nil {
			return fmt.Errorf("verify audit record %d: %w", r.ID, err)
		}
		i := slices.IndexFunc(lanes, func(l store.AuditLane) bool { return l.Lane == r.Link.Lane })
		if i < 0 || lanes[i].ID != r.ID || lanes[i].Hash != r.Hash {
			return &Problem{Kind: Removed, Lane: r.Link.Lane, Seq: r.Link.Seq + 1, Detail: fmt.Sprintf("record %d is not its lane's last, and nothing follows it", r.ID)}
		}
	}
	return nil
}

// coveringCheckpoint returns the first checkpoint whose head of l's lane is at or after l
// (zero when none is), and that head. Checkpoints cover ever more of a lane, so it is the one
// after the last that does not cover l, looked for page by page from the end.
func coveringCheckpoint(ctx context.Context, st Store, l store.AuditLink) (store.AuditCheckpoint, laneState, error) {
	last, err := st.AuditCheckpoints(ctx, -1, 1)
	if err != nil || len(last) == 0 {
		return store.AuditCheckpoint{}, laneState{}, err
	}
	found, head := store.AuditCheckpoint{}, laneState{}
	for end := last[0].Seq; end > 0; {
		after := max(end-pageSize, 0)
		cps, err := st.AuditCheckpoints(ctx, after, pageSize)
		if err != nil {
			return store.AuditCheckpoint{}, laneState{}, err
		}
		for i := len(cps) - 1; i >= 0; i-- {
			s, ok := coverage(cps[i], l)
			if !ok {
				return found, head, nil
			}
			found, head = cps[i], s
		}
		end = after
	}
	return found, head, nil
}

// coverage returns the head checkpoint c signed of l's lane, if it is at or after l.
func coverage(c store.AuditCheckpoint, l store.AuditLink) (laneState, bool) {
	var b checkpointBody
	if json.Unmarshal(c.Body, &b) != nil {
		return laneState{}, false
	}
	i := slices.IndexFunc(b.Lanes, func(s laneState) bool { return s.Lane == l.Lane && s.Seq >= l.Seq })
	if i < 0 {
		return laneState{}, false
	}
	return b.Lanes[i], true
}

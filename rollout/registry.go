package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/packbot/packbot/store"
)

// The applied packs and what each replica runs are records of the store, so that every
// replica on one database, and the pack commands, see them:
//
//	packbot/packs    current        the version in force (a Version, without its text)
//	packbot/packs    v/<digest>     a pack's text, with the version it was last applied as
//	packbot/packs    file/<source>  the digest a pack file had when serve last read it
//	packbot/replicas <replica>      what a replica runs (a Report)
const (
	packNamespace    = "packbot/packs"
	replicaNamespace = "packbot/replicas"
	currentKey       = "current"
)

// Topic is the bus topic that tells every replica a pack was applied (payload: its version).
// Replicas also look at the version in force every few seconds, for a notification lost or a
// store without a bus.
const Topic = "pack"

// How a pack version came to be applied.
const (
	OriginFile  = "file"  // serve read it from its pack file (at start, on a change, on SIGHUP)
	OriginApply = "apply" // packbot pack apply
)

// ReportEvery is how often a replica reports what it runs; Live is how recently it must have
// reported to count as running.
const (
	ReportEvery = 15 * time.Second
	Live        = 3 * ReportEvery
)

// Version is one applied version of a pack. A version number is given to one digest only.
type Version struct {
	Version   int64     `json:"version"`
	Digest    string    `json:"digest"`
	Source    string    `json:"source"` // the file (or embedded:…) it came from
	Origin    string    `json:"origin"` // OriginFile or OriginApply
	AppliedAt time.Time `json:"appliedAt"`
	// Text is the pack as written (${NAME} placeholders unexpanded: each replica expands them
	// from its own environment). Only in the v/<digest> record.
	Text []byte `json:"text,omitempty"`
}

// Label is how the commands and logs name v: "v3 (sha 1a2b3c4d)".
func (v Version) Label() string {
	if v.Version == 0 {
		return "unversioned"
	}
	return "v" + strconv.FormatInt(v.Version, 10) + " (sha " + v.Digest[:min(8, len(v.Digest))] + ")"
}

// Is reports whether v and w are the same version: the same number and the same content.
// Comparing numbers alone would leave a replica on a version a record written before numbers
// were unique gave to another content.
func (v Version) Is(w Version) bool { return v.Version == w.Version && v.Digest == w.Digest }

// Digest is the digest of a pack's text, as versions record it.
func Digest(text []byte) string {
	h := sha256.Sum256(text)
	return hex.EncodeToString(h[:])
}

// Report is what a replica runs, as it last said.
type Report struct {
	Replica string `json:"replica"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Version int64  `json:"version"`
	Digest  string `json:"digest"`
	// Refused is the newest version this replica refused (0: none since what it runs),
	// RefusedDigest its digest, and Problem why.
	Refused       int64     `json:"refused,omitempty"`
	RefusedDigest string    `json:"refusedDigest,omitempty"`
	Problem       string    `json:"problem,omitempty"`
	Seen          time.Time `json:"seen"`
}

// Runs reports whether the replica runs v.
func (r Report) Runs(v Version) bool { return Version{Version: r.Version, Digest: r.Digest}.Is(v) }

// RefusedAtLeast reports whether the replica refused v or a later version (a report from
// before refusals carried their digest counts by number).
func (r Report) RefusedAtLeast(v Version) bool {
	return r.Refused > v.Version || r.Refused == v.Version && r.Refused != 0 && (r.RefusedDigest == "" || r.RefusedDigest == v.Digest)
}

// Running is the version the replica runs.
func (r Report) Running() Version { return Version{Version: r.Version, Digest: r.Digest} }

// Registry is the deployment state of the replicas sharing one store. Its methods are safe for
// concurrent use, by goroutines and by processes on one database.
type Registry struct {
	st  store.Records
	bus store.Bus // nil: none (SQLite)
	now func() time.Time
}

// Options configure a [Registry]; nil means defaults.
type Options struct {
	// Now is the clock of the times recorded (default time.Now).
	Now func() time.Time
}

// NewRegistry returns the registry kept in st. When st has a bus ([store.BusProvider]), Apply
// notifies the replicas on it.
func NewRegistry(st store.Records, opts *Options) *Registry {
	r := &Registry{st: st, now: time.Now}
	if opts != nil && opts.Now != nil {
		r.now = opts.Now
	}
	if bp, ok := st.(store.BusProvider); ok {
		if bus, ok := bp.Bus(); ok {
			r.bus = bus
		}
	}
	return r
}

// Current returns the version in force; ok is false when none was ever applied.
func (r *Registry) Current(ctx context.Context) (v Version, ok bool, err error) {
	v, raw, err := r.current(ctx)
	return v, raw != nil, err
}

// current returns the version in force and its record's value (nil when there is none).
func (r *Registry) current(ctx context.Context) (Version, []byte, error) {
	var v Version
	rec, err := r.st.GetRecord(ctx, packNamespace, currentKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return v, nil, nil
	case err != nil:
		return v, nil, fmt.Errorf("read the applied pack: %w", err)
	}
	if err := json.Unmarshal(rec.Value, &v); err != nil {
		return v, nil, fmt.Errorf("read the applied pack: record %s/%s: %w", packNamespace, currentKey, err)
	}
	return v, rec.Value, nil
}

// Text returns the text of the applied version v.
func (r *Registry) Text(ctx context.Context, v Version) ([]byte, error) {
	rec, err := r.st.GetRecord(ctx, packNamespace, "v/"+v.Digest)
	if err != nil {
		return nil, fmt.Errorf("read pack %s: %w", v.Label(), err)
	}
	var full Version
	if err := json.Unmarshal(rec.Value, &full); err != nil {
		return nil, fmt.Errorf("read pack %s: %w", v.Label(), err)
	}
	return full.Text, nil
}

// FileSeen is the digest the pack file source had when serve last read it ("" when never).
func (r *Registry) FileSeen(ctx context.Context, source string) (string, error) {
	rec, err := r.st.GetRecord(ctx, packNamespace, "file/"+source)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read what %s held: %w", source, err)
	}
	return string(rec.Value), nil
}

// maxApplyRaces bounds how many times Apply reads again after another writer won the race:
// each loss means another version was applied in between, so it ends long before on any
// real deployment.
const maxApplyRaces = 100

// Apply makes text, read from source, the version in force, as the next version, unless it
// already is (then it returns the version in force and false). With origin OriginFile the
// file's digest is remembered too, in the same transaction. The version in force is written
// only if it is still the one read (a compare-and-swap): of two applies racing, one takes the
// next number, and the other reads again and takes the one after, so no two versions share a
// number and none is lost. The replicas are notified on the bus after the write.
func (r *Registry) Apply(ctx context.Context, text []byte, source, origin string) (Version, bool, error) {
	digest := Digest(text)
	for range maxApplyRaces {
		cur, raw, err := r.current(ctx)
		if err != nil {
			return cur, false, err
		}
		var ops []store.RecordOp
		if origin == OriginFile {
			ops = append(ops, store.RecordOp{Key: "file/" + source, Value: []byte(digest)})
		}
		if raw != nil && cur.Digest == digest {
			if len(ops) > 0 {
				if err := r.st.BatchRecords(ctx, packNamespace, ops); err != nil {
					return cur, false, fmt.Errorf("record pack %s: %w", source, err)
				}
			}
			return cur, false, nil
		}
		v := Version{Version: cur.Version + 1, Digest: digest, Source: source, Origin: origin, AppliedAt: r.now().UTC()}
		withText := v
		withText.Text = text
		full, _ := json.Marshal(withText) // plain fields: cannot fail
		head, _ := json.Marshal(v)
		cond := &store.RecordCondition{Absent: raw == nil, Value: raw}
		ops = append(ops, store.RecordOp{Key: "v/" + digest, Value: full}, store.RecordOp{Key: currentKey, Value: head, If: cond})
		err = r.st.BatchRecords(ctx, packNamespace, ops)
		if errors.Is(err, store.ErrConflict) {
			continue // another version was applied since cur was read
		}
		if err != nil {
			return cur, false, fmt.Errorf("record pack %s: %w", source, err)
		}
		if r.bus != nil {
			// Best effort: replicas also look every few seconds.
			_ = r.bus.Publish(ctx, store.Notification{Topic: Topic, Payload: strconv.FormatInt(v.Version, 10)})
		}
		return v, true, nil
	}
	return Version{}, false, fmt.Errorf("record pack %s: lost the race for the next version %d times in a row", source, maxApplyRaces)
}

// Report records what a replica runs.
func (r *Registry) Report(ctx context.Context, rep Report) error {
	raw, _ := json.Marshal(rep) // plain fields: cannot fail
	if err := r.st.PutRecord(ctx, store.Record{Namespace: replicaNamespace, Key: rep.Replica, Value: raw}); err != nil {
		return fmt.Errorf("record the pack replica %s runs: %w", rep.Replica, err)
	}
	return nil
}

// Forget removes a replica's report (a clean stop).
func (r *Registry) Forget(ctx context.Context, replica string) error {
	if err := r.st.DeleteRecord(ctx, replicaNamespace, replica); err != nil {
		return fmt.Errorf("forget replica %s: %w", replica, err)
	}
	return nil
}

// Replicas returns what every replica said it runs, seen since since.
func (r *Registry) Replicas(ctx context.Context, since time.Time) ([]Report, error) {
	recs, err := r.st.QueryRecords(ctx, replicaNamespace)
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	out := make([]Report, 0, len(recs))
	for _, rec := range recs {
		var rep Report
		if json.Unmarshal(rec.Value, &rep) == nil && !rep.Seen.Before(since) {
			out = append(out, rep)
		}
	}
	return out, nil
}

// Prune deletes the reports of replicas not seen since before (they were killed: a clean stop
// forgets its own).
func (r *Registry) Prune(ctx context.Context, before time.Time) error {
	recs, err := r.st.QueryRecords(ctx, replicaNamespace)
	if err != nil {
		return fmt.Errorf("list replicas: %w", err)
	}
	for _, rec := range recs {
		var rep Report
		if json.Unmarshal(rec.Value, &rep) == nil && !rep.Seen.Before(before) {
			continue
		}
		if err := r.Forget(ctx, rec.Key); err != nil {
			return err
		}
	}
	return nil
}

// ErrRefused: a replica refused the version awaited (its report says why).
var ErrRefused = errors.New("a replica refused the pack")

// awaitPoll is how often Await reads the reports.
const awaitPoll = 200 * time.Millisecond

// Await waits until every replica seen in the last [Live] runs v, and returns their reports.
// When one refused v (or a later version) it returns them with [ErrRefused]; when ctx ends
// first, with ctx's error. With no live replica it waits.
func (r *Registry) Await(ctx context.Context, v Version) ([]Report, error) {
	poll := time.NewTicker(awaitPoll)
	defer poll.Stop()
	for {
		rs, err := r.Replicas(ctx, r.now().Add(-Live))
		if err != nil {
			return nil, err
		}
		done := len(rs) > 0
		for _, rep := range rs {
			switch {
			case rep.RefusedAtLeast(v):
				return rs, ErrRefused
			case !rep.Runs(v):
				done = false
			}
		}
		if done {
			return rs, nil
		}
		select {
		case <-ctx.Done():
			return rs, ctx.Err()
		case <-poll.C:
		}
	}
}

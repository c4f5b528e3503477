package main

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

// The applied packs and what each replica runs are records of the store (Records), so that
// every replica on one database, and the pack commands, see them:
//
//	packbot/packs    current        the pack in force (appliedPack, without its text)
//	packbot/packs    v/<digest>     a pack's text, with the version it was last applied as
//	packbot/packs    file/<source>  the digest a pack file had when serve last read it
//	packbot/replicas <replica>      what a replica runs (replicaStatus)
const (
	packNamespace    = "packbot/packs"
	replicaNamespace = "packbot/replicas"
	currentPackKey   = "current"
	// topicPack is the bus topic that tells every replica a pack was applied (Payload: its
	// version); replicas also look every PACKBOT_PACK_WATCH, for a notification lost or a
	// store without a bus.
	topicPack = "pack"
)

// appliedPack is one applied version of a pack.
type appliedPack struct {
	Version   int64     `json:"version"`
	Digest    string    `json:"digest"`
	Source    string    `json:"source"` // the file (or embedded:…) it came from
	Origin    string    `json:"origin"` // originFile or originApply
	AppliedAt time.Time `json:"appliedAt"`
	// Text is the pack as written (${NAME} placeholders unexpanded: each replica expands them
	// from its own environment). Only in the v/<digest> record.
	Text []byte `json:"text,omitempty"`
}

// How a pack version came to be applied.
const (
	originFile  = "file"  // serve read it from its pack file (at start, on a change, on SIGHUP)
	originApply = "apply" // packbot pack apply
)

// label is how the commands and logs name v: "v3 (sha 1a2b3c4d)".
func (v appliedPack) label() string {
	if v.Version == 0 {
		return "unversioned"
	}
	return "v" + strconv.FormatInt(v.Version, 10) + " (sha " + v.Digest[:min(8, len(v.Digest))] + ")"
}

// replicaStatus is what a replica runs, as it last said.
type replicaStatus struct {
	Replica string `json:"replica"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Version int64  `json:"version"`
	Digest  string `json:"digest"`
	// Refused is the newest version this replica refused (0: none since what it runs), and
	// Problem why.
	Refused int64     `json:"refused,omitempty"`
	Problem string    `json:"problem,omitempty"`
	Seen    time.Time `json:"seen"`
}

func packDigest(text []byte) string {
	h := sha256.Sum256(text)
	return hex.EncodeToString(h[:])
}

// currentPack returns the pack in force; ok is false when none was ever recorded.
func currentPack(ctx context.Context, st store.Records) (v appliedPack, ok bool, err error) {
	r, err := st.GetRecord(ctx, packNamespace, currentPackKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return v, false, nil
	case err != nil:
		return v, false, fmt.Errorf("read the applied pack: %w", err)
	}
	if err := json.Unmarshal(r.Value, &v); err != nil {
		return v, false, fmt.Errorf("read the applied pack: record %s/%s: %w", packNamespace, currentPackKey, err)
	}
	return v, true, nil
}

// packText returns the text of the applied pack v.
func packText(ctx context.Context, st store.Records, v appliedPack) ([]byte, error) {
	r, err := st.GetRecord(ctx, packNamespace, "v/"+v.Digest)
	if err != nil {
		return nil, fmt.Errorf("read pack %s: %w", v.label(), err)
	}
	var full appliedPack
	if err := json.Unmarshal(r.Value, &full); err != nil {
		return nil, fmt.Errorf("read pack %s: %w", v.label(), err)
	}
	return full.Text, nil
}

// fileSeen is the digest source had when serve last read it ("" when never).
func fileSeen(ctx context.Context, st store.Records, source string) (string, error) {
	r, err := st.GetRecord(ctx, packNamespace, "file/"+source)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read what %s held: %w", source, err)
	}
	return string(r.Value), nil
}

// recordPack makes text the pack in force, as the next version, unless it already is (then it
// returns the current version and false). A pack file's digest is remembered too (origin
// originFile). Both records are written in one transaction; replicas are notified after it.
// Two packs applied at the same instant may get one version number: the later write wins,
// and every replica follows it.
func recordPack(ctx context.Context, st store.Store, text []byte, source, origin string, now time.Time) (appliedPack, bool, error) {
	cur, _, err := currentPack(ctx, st)
	if err != nil {
		return cur, false, err
	}
	v := appliedPack{Version: cur.Version + 1, Digest: packDigest(text), Source: source, Origin: origin, AppliedAt: now.UTC()}
	var ops []store.RecordOp
	if origin == originFile {
		ops = append(ops, store.RecordOp{Key: "file/" + source, Value: []byte(v.Digest)})
	}
	if cur.Digest == v.Digest {
		if len(ops) > 0 {
			if err := st.BatchRecords(ctx, packNamespace, ops); err != nil {
				return cur, false, fmt.Errorf("record pack %s: %w", source, err)
			}
		}
		return cur, false, nil
	}
	withText := v
	withText.Text = text
	full, _ := json.Marshal(withText) // plain fields: cannot fail
	head, _ := json.Marshal(v)
	ops = append(ops, store.RecordOp{Key: "v/" + v.Digest, Value: full}, store.RecordOp{Key: currentPackKey, Value: head})
	if err := st.BatchRecords(ctx, packNamespace, ops); err != nil {
		return cur, false, fmt.Errorf("record pack %s: %w", source, err)
	}
	if bp, ok := st.(store.BusProvider); ok {
		if bus, ok := bp.Bus(); ok {
			// Best effort: replicas also look every PACKBOT_PACK_WATCH.
			_ = bus.Publish(ctx, store.Notification{Topic: topicPack, Payload: strconv.FormatInt(v.Version, 10)})
		}
	}
	return v, true, nil
}

// putReplica records what a replica runs.
func putReplica(ctx context.Context, st store.Records, r replicaStatus) error {
	raw, _ := json.Marshal(r) // plain fields: cannot fail
	if err := st.PutRecord(ctx, store.Record{Namespace: replicaNamespace, Key: r.Replica, Value: raw}); err != nil {
		return fmt.Errorf("record the pack replica %s runs: %w", r.Replica, err)
	}
	return nil
}

// replicas returns what every replica said it runs, seen since since.
func replicas(ctx context.Context, st store.Records, since time.Time) ([]replicaStatus, error) {
	rs, err := st.QueryRecords(ctx, replicaNamespace)
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	out := make([]replicaStatus, 0, len(rs))
	for _, r := range rs {
		var s replicaStatus
		if json.Unmarshal(r.Value, &s) == nil && !s.Seen.Before(since) {
			out = append(out, s)
		}
	}
	return out, nil
}

// pruneReplicas deletes the records of replicas not seen since before (they were killed: a
// clean stop deletes its own).
func pruneReplicas(ctx context.Context, st store.Records, before time.Time) error {
	rs, err := st.QueryRecords(ctx, replicaNamespace)
	if err != nil {
		return fmt.Errorf("list replicas: %w", err)
	}
	for _, r := range rs {
		var s replicaStatus
		if json.Unmarshal(r.Value, &s) == nil && !s.Seen.Before(before) {
			continue
		}
		if err := st.DeleteRecord(ctx, replicaNamespace, r.Key); err != nil {
			return fmt.Errorf("forget replica %s: %w", r.Key, err)
		}
	}
	return nil
}

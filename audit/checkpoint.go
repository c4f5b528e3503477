package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/packbot/packbot/store"
)

// Store is what this package reads (and the checkpointer writes): the audit, and the approvals
// whose story the records tell. store.Store implements it.
type Store interface {
	store.Audit
	GetApproval(ctx context.Context, id string) (store.Approval, error)
}

// checkpointVersion is the version of a checkpoint's body.
const checkpointVersion = 1

// checkpointBody is what a checkpoint signs: its number, when, the hash of the checkpoint
// before it (SHA-256 of its body, hex; "" for the first), who signs, and every lane's head.
type checkpointBody struct {
	V      int         `json:"v"`
	Seq    int64       `json:"seq"`
	At     int64       `json:"at"` // unix milliseconds
	Prev   string      `json:"prev"`
	Signer string      `json:"signer"`
	Lanes  []laneState `json:"lanes"`
}

// laneState is one lane's head in a checkpoint.
type laneState struct {
	Lane int64  `json:"lane"`
	Seq  int64  `json:"seq"`
	ID   int64  `json:"id"`
	Hash string `json:"hash"`
}

// bodyHash is the hash a checkpoint's successor names it by.
func bodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// parseCheckpoint decodes c's body and checks that it is c's, signed by its signer, and that it
// names prev (the checkpoint before it; nil when c is the first or the one before is not read).
func parseCheckpoint(c store.AuditCheckpoint, prev *store.AuditCheckpoint) (checkpointBody, error) {
	var b checkpointBody
	if err := json.Unmarshal(c.Body, &b); err != nil {
		return b, fmt.Errorf("its body is not a checkpoint: %w", err)
	}
	pub, err := PublicKey(c.Signer)
	switch {
	case err != nil:
		return b, fmt.Errorf("its signer: %w", err)
	case !ed25519.Verify(pub, c.Body, c.Signature):
		return b, errors.New("its signature does not verify")
	case b.V != checkpointVersion || b.Seq != c.Seq || b.Signer != c.Signer:
		return b, fmt.Errorf("its body (version %d, number %d, signer %s) is not the row's", b.V, b.Seq, b.Signer)
	case prev != nil && b.Prev != bodyHash(prev.Body):
		return b, fmt.Errorf("it does not name checkpoint %d as the one before it", prev.Seq)
	case prev == nil && c.Seq == 1 && b.Prev != "":
		return b, errors.New("the first checkpoint names one before it")
	}
	return b, nil
}

// CheckpointOptions configure a [Checkpointer]; nil means defaults.
type CheckpointOptions struct {
	// Every is how often a checkpoint is made when the audit grew (default 1 minute).
	Every  time.Duration
	Logger *slog.Logger
	Now    func() time.Time
}

// Checkpointer signs checkpoints of the audit's lanes with the bot's key. Any number of
// replicas may run one: a number is taken once, and a replica that loses the race skips it.
type Checkpointer struct {
	st    Store
	key   *Key
	every time.Duration
	log   *slog.Logger
	now   func() time.Time
}

// NewCheckpointer returns a checkpointer of st signing with key.
func NewCheckpointer(st Store, key *Key, opts *CheckpointOptions) *Checkpointer {
	if st == nil || key == nil {
		panic("audit: NewCheckpointer needs a store and a key")
	}
	c := &Checkpointer{st: st, key: key, every: time.Minute, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now}
	if opts != nil {
		if opts.Every > 0 {
			c.every = opts.Every
		}
		if opts.Logger != nil {
			c.log = opts.Logger
		}
		if opts.Now != nil {
			c.now = opts.Now
		}
	}
	return c
}

// Run makes a checkpoint every c.every while the audit grows, until ctx ends; then a last one
// (within 5 s), so that a replica that stops leaves its rows covered.
func (c *Checkpointer) Run(ctx context.Context) error {
	return periodically(ctx, c.every, c.checkpoint)
}

// periodically calls do every period until ctx ends, then once more within 5 s (a replica that
// stops leaves its work done), and returns nil.
func periodically(ctx context.Context, every time.Duration, do func(context.Context)) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			do(last)
			return nil
		case <-tick.C:
			do(ctx)
		}
	}
}

func (c *Checkpointer) checkpoint(ctx context.Context) {
	cp, made, err := c.Checkpoint(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		c.log.WarnContext(ctx, "audit checkpoint not made", slog.Any("err", err))
	case made:
		c.log.InfoContext(ctx, "audit checkpoint", slog.Int64("seq", cp.Seq), slog.String("hash", bodyHash(cp.Body)), slog.String("signer", cp.Signer))
	}
}

// Checkpoint seals the records not sealed yet ([store.Audit.SealAudit]), then signs and stores
// a checkpoint of every lane's head, unless nothing was appended
// since the last one (made is false then, and the last one is returned) or another replica
// stored one with the same number meanwhile (made false).
func (c *Checkpointer) Checkpoint(ctx context.Context) (cp store.AuditCheckpoint, made bool, err error) {
	if _, _, err := c.st.SealAudit(ctx); err != nil { // what was written before the checkpoint, covered by it
		return cp, false, fmt.Errorf("audit checkpoint: %w", err)
	}
	last, err := c.st.AuditCheckpoints(ctx, -1, 1)
	if err != nil {
		return cp, false, fmt.Errorf("audit checkpoint: %w", err)
	}
	lanes, err := c.st.AuditLanes(ctx)
	if err != nil {
		return cp, false, fmt.Errorf("audit checkpoint: %w", err)
	}
	b := checkpointBody{V: checkpointVersion, Seq: 1, At: c.now().UnixMilli(), Signer: c.key.DID(), Lanes: []laneState{}}
	for _, l := range lanes {
		if l.Seq > 0 {
			b.Lanes = append(b.Lanes, laneState{Lane: l.Lane, Seq: l.Seq, ID: l.ID, Hash: l.Hash})
		}
	}
	if len(last) > 0 {
		var prev checkpointBody
		if err := json.Unmarshal(last[0].Body, &prev); err == nil && slices.Equal(prev.Lanes, b.Lanes) {
			return last[0], false, nil
		}
		b.Seq, b.Prev = last[0].Seq+1, bodyHash(last[0].Body)
	} else if len(b.Lanes) == 0 {
		return cp, false, nil // an empty audit
	}
	body, err := json.Marshal(b)
	if err != nil {
		return cp, false, fmt.Errorf("audit checkpoint: %w", err)
	}
	cp = store.AuditCheckpoint{Seq: b.Seq, At: time.UnixMilli(b.At).UTC(), Signer: b.Signer, Body: body, Signature: c.key.Sign(body)}
	switch err := c.st.AddAuditCheckpoint(ctx, cp); {
	case errors.Is(err, store.ErrConflict):
		return cp, false, nil // another replica made this one
	case err != nil:
		return cp, false, fmt.Errorf("audit checkpoint %d: %w", cp.Seq, err)
	}
	return cp, true, nil
}

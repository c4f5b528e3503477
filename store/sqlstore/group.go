package sqlstore

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// group commits the inbox's hot writes of many connections together on PostgreSQL (group
// commit): a part (the statements of one accept or one completion) that arrives while a batch
// of its kind is in flight waits, and goes out with every part that arrived meanwhile as one
// pgx batch — one round trip, one transaction, one WAL flush. With one connection busy nothing
// waits: a part goes out at once, alone. Under load the parts of a batch share what a
// transaction costs PostgreSQL beyond its statements, which is most of what the inbox costs.
//
// The parts of a batch go in the order of their keys (connection ids; parts of one key in
// arrival order), so that the lease rows a batch locks are locked in the order every other
// multi-row write of the inbox locks them (see qRenewLeasesPostgres): two transactions never
// wait for each other in a cycle, which PostgreSQL would break only after deadlock_timeout (1 s)
// with every part of the batch waiting.
//
// A batch is all or nothing: when it fails (a fence, a lost connection), each of its parts is
// run again alone, so that each gets its own result. No goroutine is started: the caller whose
// part finds no batch in flight leads — it runs batches until its own part is done, then hands
// the lead to the first part still waiting.
type group struct {
	max int // parts per batch

	mu      sync.Mutex
	waiting []*groupPart
	busy    bool // a leader is running batches
}

// groupPart is one caller's statements.
type groupPart struct {
	key string // the connection id
	// queue adds the part's statements to b; their result callbacks set the part's outputs,
	// and must first clear what an earlier run of the part set (a batch that failed).
	queue func(b *pgx.Batch)
	err   error
	// wake is signalled once: the part is done (err set), or lead is set and the part's caller
	// must lead.
	wake chan struct{}
	lead bool
}

// groupMax is the most parts in one batch.
const groupMax = 64

// groupBatchTimeout bounds one batch: the parts of other callers ride on it, so it does not
// end with the leader's context.
const groupBatchTimeout = 30 * time.Second

// run runs the statements queue adds as part of a batch, and returns the part's error (the
// batch's when it ran alone).
func (db *DB) groupRun(ctx context.Context, g *group, key string, queue func(b *pgx.Batch)) error {
	p := &groupPart{key: key, queue: queue, wake: make(chan struct{}, 1)}
	g.mu.Lock()
	g.waiting = append(g.waiting, p)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	if !lead {
		<-p.wake // bounded: the leader's batches end within groupBatchTimeout
		if !p.lead {
			return p.err
		}
	}
	// Leading: run batches of the waiting parts (this one among them in the first) until this
	// part is done; then the first waiting part, if any, leads.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupBatchTimeout)
	defer cancel()
	for done := false; !done; {
		g.mu.Lock()
		n := min(len(g.waiting), g.max)
		batch := slices.Clone(g.waiting[:n])
		g.waiting = g.waiting[n:]
		g.mu.Unlock()
		slices.SortStableFunc(batch, func(a, b *groupPart) int { return strings.Compare(a.key, b.key) })
		db.runGroupBatch(bctx, batch)
		for _, q := range batch {
			if q == p {
				done = true
				continue
			}
			q.wake <- struct{}{}
		}
	}
	g.mu.Lock()
	if len(g.waiting) > 0 {
		next := g.waiting[0]
		next.lead = true
		next.wake <- struct{}{}
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	return p.err
}

// runGroupBatch runs parts as one batch, and each alone when that fails.
func (db *DB) runGroupBatch(ctx context.Context, parts []*groupPart) {
	err := db.pgBatch(ctx, func(b *pgx.Batch) {
		for _, p := range parts {
			p.queue(b)
		}
	})
	if err == nil || len(parts) == 1 {
		for _, p := range parts {
			p.err = err
		}
		return
	}
	for _, p := range parts {
		p.err = db.pgBatch(ctx, p.queue)
	}
}

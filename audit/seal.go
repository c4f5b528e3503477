package audit

import (
	"context"
	"log/slog"
	"time"
)

// Sealer links into the chain the records a store wrote to be sealed after their commit (a
// store with an audit key on PostgreSQL: see [store.AuditRecord.MAC]), every period. Any number
// of replicas may run one: the store seals each record once.
type Sealer struct {
	st    Store
	every time.Duration
	log   *slog.Logger
}

// SealerOptions configure a [Sealer]; the zero value is usable.
type SealerOptions struct {
	// Every is the period between seals (default 100 ms): a record stays unsealed, vouched
	// for by its MAC alone, for about that long.
	Every  time.Duration
	Logger *slog.Logger // nil: discard
}

// NewSealer returns a sealer of st.
func NewSealer(st Store, opts *SealerOptions) *Sealer {
	if st == nil {
		panic("audit: NewSealer needs a store")
	}
	s := &Sealer{st: st, every: 100 * time.Millisecond, log: slog.New(slog.DiscardHandler)}
	if opts != nil && opts.Every > 0 {
		s.every = opts.Every
	}
	if opts != nil && opts.Logger != nil {
		s.log = opts.Logger
	}
	return s
}

// Run seals every period until ctx ends, then once more (within 5 s), so that a replica that
// stops leaves its records sealed.
func (s *Sealer) Run(ctx context.Context) error {
	return periodically(ctx, s.every, s.seal)
}

func (s *Sealer) seal(ctx context.Context) {
	sealed, refused, err := s.st.SealAudit(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.WarnContext(ctx, "audit not sealed", slog.Any("err", err))
	case refused > 0:
		s.log.WarnContext(ctx, "audit records set aside: their MACs are wrong ('packbot audit verify' names them)",
			slog.Int("sealed", sealed), slog.Int("set_aside", refused))
	case sealed > 0:
		s.log.DebugContext(ctx, "audit sealed", slog.Int("records", sealed))
	}
}

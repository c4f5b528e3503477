package rollout

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
)

// A replica runs one applied version of the pack at a time. At start it reads its pack file:
// when the file changed since serve last read it (or no pack was ever applied) the file's
// pack is applied, as the next version; otherwise the version in force runs (a `packbot pack
// apply` made after the file was last read wins). While it runs, it looks at the file (every
// ReplicaConfig.Every and when asked to reread) and at the version in force (the same, and at
// once on a bus notification): a new valid pack is switched in for the next event of every
// conversation; an invalid one is refused and the previous one keeps running.

// File is the pack file a replica was started with, as last read.
type File struct {
	Path   string // as given (or "": the default places, the embedded demo)
	Source string // the file found (embedded:… for the embedded demo)
	Digest string
}

// Watched reports whether the pack comes from a file (the embedded demo does not change).
func (f File) Watched() bool { return !strings.HasPrefix(f.Source, "embedded:") }

// ReplicaConfig configures a [Replica]. Read and Parse are required.
type ReplicaConfig struct {
	// File is the pack file as read at start.
	File File
	// Read reads the pack file at path: the file found and its text.
	Read func(path string) (source string, text []byte, err error)
	// Parse parses a pack's text, from source, as this process runs it (its environment, its
	// channel): the pack, or nil and a problem saying why it cannot run here.
	Parse func(source string, text []byte) (*packs.Pack, string)
	// Every is how often the file and the version in force are looked at (default 2 s).
	Every time.Duration
	// Host and PID name the process in its reports.
	Host   string
	PID    int
	Logger *slog.Logger
	Now    func() time.Time
}

// Replica is this process in the rollout: what it runs, what it refused, its reports in the
// registry, and the watch that moves it to the version in force. Running, Detail and Notified
// are safe for concurrent use; Adopt is called once, before Run.
type Replica struct {
	reg   *Registry
	cfg   ReplicaConfig
	file  File // Run's after Adopt
	state atomic.Pointer[replicaState]
	poke  chan struct{}
}

// replicaState is what the replica runs, and the newest version it refused (Version 0: a
// pack file) and why.
type replicaState struct {
	running Version
	refused Version
	problem string
}

// NewReplica returns the replica of this process on reg.
func NewReplica(reg *Registry, cfg ReplicaConfig) *Replica {
	if cfg.Read == nil || cfg.Parse == nil {
		panic("rollout: NewReplica without Read or Parse")
	}
	if cfg.Every <= 0 {
		cfg.Every = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Replica{reg: reg, cfg: cfg, file: cfg.File, poke: make(chan struct{}, 1)}
	r.state.Store(&replicaState{})
	return r
}

// Adopt decides which pack the replica starts with, text being its pack file's: the file's,
// recorded as the next version when it changed since serve last read it (or when no pack was
// ever applied), else the version in force. It returns the pack to run instead of the file's,
// or nil when that is the file's: the version in force is the file's content, or cannot run
// here (then the file's runs, unversioned, and the refusal is said).
func (r *Replica) Adopt(ctx context.Context, text []byte) (*packs.Pack, error) {
	log := r.cfg.Logger
	seen, err := r.reg.FileSeen(ctx, r.file.Source)
	if err != nil {
		return nil, err
	}
	cur, ok, err := r.reg.Current(ctx)
	if err != nil {
		return nil, err
	}
	if !ok || seen != r.file.Digest {
		v, _, err := r.reg.Apply(ctx, text, r.file.Source, OriginFile)
		if err != nil {
			return nil, err
		}
		r.state.Store(&replicaState{running: v})
		return nil, nil
	}
	if cur.Digest == r.file.Digest {
		r.state.Store(&replicaState{running: cur})
		return nil, nil
	}
	applied, err := r.reg.Text(ctx, cur)
	if err != nil {
		return nil, err
	}
	p, problem := r.cfg.Parse(cur.Source, applied)
	if p == nil {
		log.ErrorContext(ctx, "the applied pack cannot run here; serving the pack file's instead", slog.String("pack", cur.Label()),
			slog.String("problem", problem), slog.String("file", r.file.Source))
		r.state.Store(&replicaState{refused: cur, problem: problem})
		return nil, nil
	}
	log.InfoContext(ctx, "running the applied pack (applied after the pack file was last read)", slog.String("pack", cur.Label()),
		slog.String("source", cur.Source), slog.String("file", r.file.Source))
	r.state.Store(&replicaState{running: cur})
	return p, nil
}

// Running is the version the replica runs (Version 0: unversioned).
func (r *Replica) Running() Version { return r.state.Load().running }

// Detail is the readiness check's line about the pack.
func (r *Replica) Detail() string {
	st := r.state.Load()
	d := "pack: " + st.running.Label()
	if st.problem != "" {
		d += "; refused " + st.problem
	}
	return d
}

// Notified handles a bus notification: a pack applied wakes the watch. It never blocks.
func (r *Replica) Notified(n store.Notification) {
	if n.Topic != Topic {
		return
	}
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// Run watches the pack file and the version in force until ctx is done, switching to new
// packs through sw; name is the replica's in its reports, and a value on reread makes it read
// the pack file again at once (SIGHUP). It reports what it runs every [ReportEvery], forgets
// its report when it stops, and prunes the reports of replicas gone for a day.
func (r *Replica) Run(ctx context.Context, name string, sw *Switcher, reread <-chan os.Signal) error {
	tick := time.NewTicker(r.cfg.Every)
	defer tick.Stop()
	seen := time.NewTicker(ReportEvery)
	defer seen.Stop()
	r.report(ctx, name)
	defer r.forget(ctx, name)
	if err := r.reg.Prune(ctx, r.cfg.Now().Add(-24*time.Hour)); err != nil && ctx.Err() == nil {
		r.cfg.Logger.WarnContext(ctx, "pack watcher", slog.Any("err", err))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-reread:
			r.cfg.Logger.InfoContext(ctx, "SIGHUP: reading the pack file again", slog.String("file", r.file.Source))
			r.checkFile(ctx, name, sw)
			r.checkApplied(ctx, name, sw)
		case <-tick.C:
			r.checkFile(ctx, name, sw)
			r.checkApplied(ctx, name, sw)
		case <-r.poke:
			r.checkApplied(ctx, name, sw)
		case <-seen.C:
			r.report(ctx, name)
		}
	}
}

// checkFile applies the pack file when it changed since it was last read; an invalid file is
// refused once per content.
func (r *Replica) checkFile(ctx context.Context, name string, sw *Switcher) {
	log := r.cfg.Logger
	if !r.file.Watched() {
		return
	}
	source, text, err := r.cfg.Read(r.file.Path)
	if err != nil {
		log.WarnContext(ctx, "pack file not readable; the running pack stays", slog.String("file", r.file.Source), slog.Any("err", err))
		return
	}
	digest := Digest(text)
	if digest == r.file.Digest {
		return
	}
	r.file.Digest, r.file.Source = digest, source
	if p, problem := r.cfg.Parse(source, text); p == nil {
		r.refuse(ctx, name, sw, Version{Digest: digest}, source, problem)
		return
	}
	v, created, err := r.reg.Apply(ctx, text, source, OriginFile)
	if err != nil {
		log.ErrorContext(ctx, "pack file changed but could not be applied; the running pack stays", slog.String("file", source), slog.Any("err", err))
		r.file.Digest = "" // tried again at the next look
		return
	}
	if created {
		log.InfoContext(ctx, "pack file changed: applied", slog.String("pack", v.Label()), slog.String("file", source))
	}
}

// checkApplied switches to the version in force when the replica runs another one (another
// number, or another content under the same number) and has not refused it.
func (r *Replica) checkApplied(ctx context.Context, name string, sw *Switcher) {
	log := r.cfg.Logger
	cur, ok, err := r.reg.Current(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.WarnContext(ctx, "pack watcher", slog.Any("err", err))
		}
		return
	}
	st := r.state.Load()
	if !ok || cur.Is(st.running) || cur.Is(st.refused) {
		return
	}
	text, err := r.reg.Text(ctx, cur)
	if err != nil {
		log.WarnContext(ctx, "pack watcher", slog.Any("err", err))
		return
	}
	p, problem := r.cfg.Parse(cur.Source, text)
	if p == nil {
		r.refuse(ctx, name, sw, cur, cur.Label(), problem)
		return
	}
	if err := sw.Switch(ctx, p, cur); err != nil {
		r.refuse(ctx, name, sw, cur, cur.Label(), err.Error())
		return
	}
	r.state.Store(&replicaState{running: cur})
	r.report(ctx, name)
}

// refuse records that a pack offered was refused: log, metric, readiness detail, report.
func (r *Replica) refuse(ctx context.Context, name string, sw *Switcher, v Version, what, problem string) {
	st := *r.state.Load()
	r.cfg.Logger.ErrorContext(ctx, "pack refused; the running pack stays", slog.String("pack", what), slog.String("problem", problem),
		slog.String("running", st.running.Label()))
	sw.refused()
	st.refused, st.problem = v, what+": "+problem
	r.state.Store(&st)
	r.report(ctx, name)
}

// report records what the replica runs.
func (r *Replica) report(ctx context.Context, name string) {
	st := r.state.Load()
	rep := Report{Replica: name, Host: r.cfg.Host, PID: r.cfg.PID, Version: st.running.Version, Digest: st.running.Digest,
		Refused: st.refused.Version, Problem: st.problem, Seen: r.cfg.Now().UTC()}
	if st.refused.Version != 0 {
		rep.RefusedDigest = st.refused.Digest
	}
	if err := r.reg.Report(ctx, rep); err != nil && ctx.Err() == nil {
		r.cfg.Logger.WarnContext(ctx, "pack watcher", slog.Any("err", err))
	}
}

// forget removes the replica's report on a clean stop (a stale one only shows as not seen
// lately).
func (r *Replica) forget(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = r.reg.Forget(ctx, name)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
)

// Live pack swap (README, "Swapping the pack live"). serve runs one applied version of the pack
// at a time. At start it reads its pack file: when the file changed since serve last read it
// (or no pack was ever applied) the file's pack is applied, as the next version; otherwise the
// version in force runs (a `packbot pack apply` made after the file was last read wins). While
// it runs, the pack watcher looks at the file (every PACKBOT_PACK_WATCH and on SIGHUP) and at
// the version in force (the same, and at once on a bus notification): a new valid pack is
// swapped in for the next event of every conversation; an invalid one is refused and the
// previous one keeps running.

// envPackWatch is how often the pack file and the applied version are looked at.
const envPackWatch = "PACKBOT_PACK_WATCH"

// replicaSeenEvery is how often a replica says what it runs, for `packbot pack status`.
const replicaSeenEvery = 15 * time.Second

// packFile is the pack serve was started with, as last read.
type packFile struct {
	path   string // --pack (or "": AGENT_PACK_PATH, ./agent-packs, the embedded demo)
	source string
	digest string
}

// watched reports whether the pack comes from a file (the embedded demo does not change).
func (f packFile) watched() bool { return !strings.HasPrefix(f.source, "embedded:") }

// packState is what the readiness check and the replica record say about the pack.
type packState struct {
	running appliedPack
	refused int64
	problem string
}

// readPack locates and parses the pack at path, as serve and the pack commands do; the
// problems of an invalid pack are printed to w and the error is exitError{1}.
func (a *app) readPack(path string, w io.Writer) (packFile, []byte, *packs.Pack, error) {
	source, data, err := packs.Locate(path, a.env)
	if err != nil {
		return packFile{}, nil, nil, err
	}
	p, err := packs.Parse(source, data, a.env)
	var inv *packs.InvalidError
	if errors.As(err, &inv) {
		printInvalid(w, inv)
		return packFile{}, nil, nil, exitError{code: 1}
	}
	return packFile{path: path, source: source, digest: packDigest(data)}, data, p, err
}

// parseApplied parses the text of an applied version with this process's environment and
// checks it against the channel; the problem says why it cannot run.
func parseApplied(a *app, v appliedPack, text []byte, kind string) (*packs.Pack, string) {
	p, err := packs.Parse(v.Source, text, a.env)
	if err != nil {
		var inv *packs.InvalidError
		if errors.As(err, &inv) {
			lines := make([]string, 0, len(inv.Problems))
			for _, pr := range inv.Problems {
				lines = append(lines, pr.String())
			}
			return nil, strings.Join(lines, "; ")
		}
		return nil, err.Error()
	}
	if problem := channelProblem(p, kind); problem != "" {
		return nil, problem
	}
	return p, ""
}

// adoptPack decides, once the store is open, which pack serve starts with (see above), and
// records the file's pack when it is applied.
func (s *services) adoptPack(ctx context.Context, data []byte) error {
	a := s.app
	seen, err := fileSeen(ctx, s.st, s.file.source)
	if err != nil {
		return err
	}
	cur, ok, err := currentPack(ctx, s.st)
	if err != nil {
		return err
	}
	if !ok || seen != s.file.digest {
		v, _, err := recordPack(ctx, s.st, data, s.file.source, originFile, time.Now())
		if err != nil {
			return err
		}
		s.packs.Store(&packState{running: v})
		return nil
	}
	if cur.Digest == s.file.digest {
		s.packs.Store(&packState{running: cur})
		return nil
	}
	text, err := packText(ctx, s.st, cur)
	if err != nil {
		return err
	}
	p, problem := parseApplied(a, cur, text, s.kind)
	if problem != "" {
		// The file's pack runs, unversioned, until a valid one is applied.
		a.logger.ErrorContext(ctx, "the applied pack cannot run here; serving the pack file's instead", slog.String("pack", cur.label()),
			slog.String("problem", problem), slog.String("file", s.file.source))
		s.packs.Store(&packState{refused: cur.Version, problem: problem})
		return nil
	}
	a.logger.InfoContext(ctx, "running the applied pack (applied after the pack file was last read)", slog.String("pack", cur.label()),
		slog.String("source", cur.Source), slog.String("file", s.file.source))
	s.pack = p
	s.packs.Store(&packState{running: cur})
	return nil
}

// watchPack is the pack watcher: it runs until ctx is done.
func (s *services) watchPack(ctx context.Context) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(s.packWatch)
	defer tick.Stop()
	seen := time.NewTicker(replicaSeenEvery)
	defer seen.Stop()
	s.report(ctx)
	defer s.forgetReplica()
	if err := pruneReplicas(ctx, s.st, time.Now().Add(-24*time.Hour)); err != nil && ctx.Err() == nil {
		s.app.logger.WarnContext(ctx, "pack watcher", slog.Any("err", err))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			s.app.logger.InfoContext(ctx, "SIGHUP: reading the pack file again", slog.String("file", s.file.source))
			s.checkFile(ctx)
			s.checkApplied(ctx)
		case <-tick.C:
			s.checkFile(ctx)
			s.checkApplied(ctx)
		case <-s.packPoke:
			s.checkApplied(ctx)
		case <-seen.C:
			s.report(ctx)
		}
	}
}

// packNotified is the bot's handler of the bus notifications it does not handle itself.
func (s *services) packNotified(n store.Notification) {
	if n.Topic != topicPack {
		return
	}
	select {
	case s.packPoke <- struct{}{}:
	default:
	}
}

// checkFile applies the pack file when it changed since it was last read; an invalid file is
// refused once per content.
func (s *services) checkFile(ctx context.Context) {
	a := s.app
	if !s.file.watched() {
		return
	}
	source, data, err := packs.Locate(s.file.path, a.env)
	if err != nil {
		a.logger.WarnContext(ctx, "pack file not readable; the running pack stays", slog.String("file", s.file.source), slog.Any("err", err))
		return
	}
	digest := packDigest(data)
	if digest == s.file.digest {
		return
	}
	s.file.digest, s.file.source = digest, source
	p, problem := parseApplied(a, appliedPack{Source: source}, data, s.kind)
	if p == nil {
		s.refuse(ctx, 0, source, problem)
		return
	}
	v, created, err := recordPack(ctx, s.st, data, source, originFile, time.Now())
	if err != nil {
		a.logger.ErrorContext(ctx, "pack file changed but could not be applied; the running pack stays", slog.String("file", source), slog.Any("err", err))
		s.file.digest = "" // tried again at the next look
		return
	}
	if created {
		a.logger.InfoContext(ctx, "pack file changed: applied", slog.String("pack", v.label()), slog.String("file", source))
	}
}

// checkApplied swaps in the version in force when this replica runs another one.
func (s *services) checkApplied(ctx context.Context) {
	a := s.app
	cur, ok, err := currentPack(ctx, s.st)
	if err != nil {
		if ctx.Err() == nil {
			a.logger.WarnContext(ctx, "pack watcher", slog.Any("err", err))
		}
		return
	}
	st := s.state()
	if !ok || cur.Version == st.running.Version || cur.Version == st.refused {
		return
	}
	text, err := packText(ctx, s.st, cur)
	if err != nil {
		a.logger.WarnContext(ctx, "pack watcher", slog.Any("err", err))
		return
	}
	p, problem := parseApplied(a, cur, text, s.kind)
	if p == nil {
		s.refuse(ctx, cur.Version, cur.label(), problem)
		return
	}
	if err := s.swap(ctx, p, cur); err != nil {
		s.refuse(ctx, cur.Version, cur.label(), err.Error())
	}
}

// refuse records that a pack offered was refused: log, metric, readiness detail, replica record.
func (s *services) refuse(ctx context.Context, version int64, what, problem string) {
	s.app.logger.ErrorContext(ctx, "pack refused; the running pack stays", slog.String("pack", what), slog.String("problem", problem),
		slog.String("running", s.state().running.label()))
	s.app.tel.PackOffered(false)
	st := *s.state()
	st.refused, st.problem = version, what+": "+problem
	s.packs.Store(&st)
	s.report(ctx)
}

// swap switches every part that depends on the pack to p, version v: the parts that can fail
// are built first (the language model, the flows engine, the machine client), then the MCP
// servers are diffed (the pool validates them and changes nothing when they are invalid), and
// only then is the rest switched: approvals, the bot's engine (the next event of every
// conversation), the channel's invitation label, the metrics.
func (s *services) swap(ctx context.Context, p *packs.Pack, v appliedPack) error {
	a := s.app
	model, err := newModel(ctx, a, p)
	if err != nil {
		return fmt.Errorf("language model: %w", err)
	}
	engine, err := newEngine(a, p, s.st, s.kr, s.pool, s.oauth, s.bot, model, s.approvals)
	if err != nil {
		return err
	}
	var machine mcp.MachineAuthorizer
	if anyServer(p, (*packs.Server).ClientCredentials) {
		m, err := oauth.NewMachine(oauth.MachineConfig{Servers: p.MCP.Servers, Logger: a.logger})
		if err != nil {
			return fmt.Errorf("%w (fix the server's authentication)", err)
		}
		machine = m
	}
	switch {
	case s.oauth != nil:
		if err := s.oauth.SetServers(p.MCP.Servers); err != nil {
			return fmt.Errorf("OAuth servers: %w", err)
		}
	case anyServer(p, (*packs.Server).OAuth):
		return errors.New("the pack signs users in to MCP servers with OAuth, which this serve started without " +
			"(no OAuth server in its first pack, or no MCP_CONFIG_ENCRYPTION_KEY or https PACKBOT_PUBLIC_URL): restart serve with it")
	}
	rep, err := s.pool.Update(ctx, p.MCP.Servers, machine)
	if err != nil {
		if s.oauth != nil {
			_ = s.oauth.SetServers(s.pack.MCP.Servers) // the running pack's: valid
		}
		return err
	}
	s.sampler.set(model)
	s.approvals.SetPack(p)
	s.pack, s.model = p, model
	s.packs.Store(&packState{running: v})
	if r, ok := s.ch.(channel.Relabeler); ok {
		r.SetLabel(botLabel(p))
	}
	a.tel.SetPack(p.Metadata.ID, p.Source, v.label())
	a.tel.PackOffered(true)
	s.report(ctx)
	asked := s.bot.SwitchPack(ctx, engine, v.Version)
	for _, w := range p.Warnings {
		a.logger.WarnContext(ctx, "agent pack", slog.String("problem", w.String()))
	}
	a.logger.InfoContext(ctx, "pack swapped in", slog.String("pack", v.label()), slog.String("id", p.Metadata.ID), slog.String("source", v.Source),
		slog.Any("mcp_kept", rep.Kept), slog.Any("mcp_added", rep.Added), slog.Any("mcp_removed", rep.Removed),
		slog.Any("mcp_reconnected", rep.Reconnected), slog.Int("connections_told", asked))
	return nil
}

// state is what the replica runs now.
func (s *services) state() *packState {
	if st := s.packs.Load(); st != nil {
		return st
	}
	return &packState{}
}

// packDetail is the readiness check's line about the pack.
func (s *services) packDetail() string {
	st := s.state()
	d := "pack: " + st.running.label()
	if st.problem != "" {
		d += "; refused " + st.problem
	}
	return d
}

// report records what this replica runs, for `packbot pack status`.
func (s *services) report(ctx context.Context) {
	st := s.state()
	host, _ := os.Hostname()
	r := replicaStatus{Replica: s.bot.Holder(), Host: host, PID: os.Getpid(), Version: st.running.Version, Digest: st.running.Digest,
		Refused: st.refused, Problem: st.problem, Seen: time.Now().UTC()}
	if err := putReplica(ctx, s.st, r); err != nil && ctx.Err() == nil {
		s.app.logger.WarnContext(ctx, "pack watcher", slog.Any("err", err))
	}
}

// forgetReplica removes this replica's record on a clean stop.
func (s *services) forgetReplica() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.st.DeleteRecord(ctx, replicaNamespace, s.bot.Holder()) // a stale record only shows as not seen lately
}

// samplerSwitch is the MCP pool's sampler: the language model of the pack in force.
type samplerSwitch struct {
	cur atomic.Pointer[mcp.Sampler]
}

func (sw *samplerSwitch) set(model *agent.Model) {
	if model == nil {
		sw.cur.Store(nil)
		return
	}
	smp := flows.NewSampler(model)
	sw.cur.Store(&smp)
}

// errNoModel: a server asked for sampling and the pack has no language model.
var errNoModel = errors.New("sampling: no language model is configured")

// Sample implements mcp.Sampler.
func (sw *samplerSwitch) Sample(ctx context.Context, r mcp.SampleRequest) (mcp.SampleResult, error) {
	m := sw.cur.Load()
	if m == nil {
		return mcp.SampleResult{}, errNoModel
	}
	return (*m).Sample(ctx, r)
}

package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// Builder builds what a pack needs that may fail to build, before anything is switched.
type Builder interface {
	// Build builds p's parts: its language model's client (as a sampler), its flows engine, the
	// machine client of its client_credentials servers. It switches nothing, so an error
	// leaves the running pack untouched.
	Build(ctx context.Context, p *packs.Pack) (Build, error)
}

// Build is what a [Builder] built for a pack.
type Build struct {
	Engine  *flows.Engine
	Sampler mcp.Sampler           // nil: the pack has no language model
	Machine mcp.MachineAuthorizer // nil: the pack has no client_credentials server
}

// MCPPool is the MCP client pool. Update moves it to a pack's servers (kept ones stay
// connected), or changes nothing and fails when they are invalid.
type MCPPool interface {
	Update(ctx context.Context, servers []packs.Server, machine mcp.MachineAuthorizer) (mcp.UpdateReport, error)
}

// OAuthServers is the OAuth sign-in to MCP servers. SetServers switches it to a pack's servers,
// or changes nothing and fails.
type OAuthServers interface {
	SetServers(servers []packs.Server) error
}

// Sampling is where the MCP servers' sampling requests go: the language model of the pack in
// force ([SamplerSwitch]).
type Sampling interface {
	SetSampler(s mcp.Sampler)
}

// ApprovalRules are the approval policies of the tools: approvals follow the pack in force.
type ApprovalRules interface {
	SetPack(p *packs.Pack)
}

// Labeler is a channel whose name for the bot can change while it runs (invitations made
// after SetLabel carry the new one).
type Labeler interface {
	SetLabel(label string)
}

// Metrics observe the swaps.
type Metrics interface {
	// SetPack says which pack runs (version is its label).
	SetPack(id, source, version string)
	// PackOffered counts a pack offered to the replica, applied or refused.
	PackOffered(applied bool)
}

// Conversations switch to a new flows engine: the next event of every conversation runs it,
// and the connections active lately are asked to re-check their login and menu. It returns
// how many were asked.
type Conversations interface {
	SwitchPack(ctx context.Context, e *flows.Engine, version int64) int
}

// Parts are what a swap switches, one interface each. OAuth and Label may be nil (serve runs
// without OAuth sign-in; the channel has no invitation); the others are required.
type Parts struct {
	Build         Builder
	OAuth         OAuthServers
	MCP           MCPPool
	Sampling      Sampling
	Approvals     ApprovalRules
	Label         Labeler
	Metrics       Metrics
	Conversations Conversations
}

// Switcher switches a running bot from one pack to the next. Its methods are called by one
// goroutine at a time (the [Replica]'s).
type Switcher struct {
	parts   Parts
	running *packs.Pack
	log     *slog.Logger
}

// NewSwitcher returns the switcher of a bot running pack running. A required part missing is
// a programming error: it panics.
func NewSwitcher(running *packs.Pack, parts Parts, log *slog.Logger) *Switcher {
	if running == nil || parts.Build == nil || parts.MCP == nil || parts.Sampling == nil || parts.Approvals == nil ||
		parts.Metrics == nil || parts.Conversations == nil {
		panic("rollout: NewSwitcher without the running pack or a required part")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Switcher{parts: parts, running: running, log: log}
}

// Label is the bot's name in invitations: the pack's display name, else its id.
func Label(p *packs.Pack) string { return cmp.Or(p.Metadata.DisplayName, p.Metadata.ID, "packbot") }

// Switch switches every part to p, version v. The parts that can refuse p go first, in an
// order that lets a refusal change nothing: the builder builds what p needs, then the OAuth
// servers and the MCP pool take its servers (when the pool refuses them, the OAuth servers go
// back to the running pack's). An error says why p was refused; the running pack runs on.
// Once p is accepted the rest switches, and cannot fail: the sampler, approvals, the channel's
// label, the metrics, and last the conversations. When Switch returns nil, every part runs p.
func (s *Switcher) Switch(ctx context.Context, p *packs.Pack, v Version) error {
	b, err := s.parts.Build.Build(ctx, p)
	if err != nil {
		return err
	}
	if s.parts.OAuth != nil {
		if err := s.parts.OAuth.SetServers(p.MCP.Servers); err != nil {
			return fmt.Errorf("OAuth servers: %w", err)
		}
	} else if signsInWithOAuth(p) {
		return errors.New("the pack signs users in to MCP servers with OAuth, which this serve started without " +
			"(no OAuth server in its first pack, or no MCP_CONFIG_ENCRYPTION_KEY or https PACKBOT_PUBLIC_URL): restart serve with it")
	}
	rep, err := s.parts.MCP.Update(ctx, p.MCP.Servers, b.Machine)
	if err != nil {
		if s.parts.OAuth != nil {
			_ = s.parts.OAuth.SetServers(s.running.MCP.Servers) // the running pack's: valid
		}
		return err
	}
	s.running = p
	s.parts.Sampling.SetSampler(b.Sampler)
	s.parts.Approvals.SetPack(p)
	if s.parts.Label != nil {
		s.parts.Label.SetLabel(Label(p))
	}
	s.parts.Metrics.SetPack(p.Metadata.ID, p.Source, v.Label())
	s.parts.Metrics.PackOffered(true)
	told := s.parts.Conversations.SwitchPack(ctx, b.Engine, v.Version)
	for _, w := range p.Warnings {
		s.log.WarnContext(ctx, "agent pack", slog.String("problem", w.String()))
	}
	s.log.InfoContext(ctx, "pack swapped in", slog.String("pack", v.Label()), slog.String("id", p.Metadata.ID), slog.String("source", v.Source),
		slog.Any("mcp_kept", rep.Kept), slog.Any("mcp_added", rep.Added), slog.Any("mcp_removed", rep.Removed),
		slog.Any("mcp_reconnected", rep.Reconnected), slog.Int("connections_told", told))
	return nil
}

// refused counts a pack refused.
func (s *Switcher) refused() { s.parts.Metrics.PackOffered(false) }

// signsInWithOAuth reports whether an enabled server of p signs users in with OAuth.
func signsInWithOAuth(p *packs.Pack) bool {
	for i := range p.MCP.Servers {
		if p.MCP.Servers[i].Enabled && p.MCP.Servers[i].OAuth() {
			return true
		}
	}
	return false
}

// SamplerSwitch is the MCP pool's sampler: the language model of the pack in force. It is
// safe for concurrent use.
type SamplerSwitch struct {
	cur atomic.Pointer[mcp.Sampler]
}

// SetSampler makes s the sampler (nil: the pack has no language model).
func (sw *SamplerSwitch) SetSampler(s mcp.Sampler) {
	if s == nil {
		sw.cur.Store(nil)
		return
	}
	sw.cur.Store(&s)
}

// ErrNoModel: a server asked for sampling and the pack in force has no language model.
var ErrNoModel = errors.New("sampling: no language model is configured")

// Sample implements mcp.Sampler.
func (sw *SamplerSwitch) Sample(ctx context.Context, r mcp.SampleRequest) (mcp.SampleResult, error) {
	s := sw.cur.Load()
	if s == nil {
		return mcp.SampleResult{}, ErrNoModel
	}
	return (*s).Sample(ctx, r)
}

// Interface guards.
var (
	_ mcp.Sampler = (*SamplerSwitch)(nil)
	_ Sampling    = (*SamplerSwitch)(nil)
)

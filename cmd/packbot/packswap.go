package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rollout"
)

// Live pack swap (README, "Swapping the pack live"): package rollout decides which pack runs
// and switches to it; this file wires serve's parts into it.

// envPackWatch is how often the pack file and the applied version are looked at.
const envPackWatch = "PACKBOT_PACK_WATCH"

// readPack locates and parses the pack at path, as serve and the pack commands do; the
// problems of an invalid pack are printed to w and the error is exitError{1}.
func (a *app) readPack(path string, w io.Writer) (rollout.File, []byte, *packs.Pack, error) {
	source, data, err := packs.Locate(path, a.env)
	if err != nil {
		return rollout.File{}, nil, nil, err
	}
	p, err := packs.Parse(source, data, a.env)
	var inv *packs.InvalidError
	if errors.As(err, &inv) {
		printInvalid(w, inv)
		return rollout.File{}, nil, nil, exitError{code: 1}
	}
	return rollout.File{Path: path, Source: source, Digest: rollout.Digest(data)}, data, p, err
}

// locate reads the pack file at path (rollout.ReplicaConfig.Read).
func (a *app) locate(path string) (string, []byte, error) { return packs.Locate(path, a.env) }

// packParser parses a pack's text with this process's environment and checks it against the
// channel kind; the problem says why it cannot run (rollout.ReplicaConfig.Parse).
func (a *app) packParser(kind string) func(source string, text []byte) (*packs.Pack, string) {
	return func(source string, text []byte) (*packs.Pack, string) {
		p, err := packs.Parse(source, text, a.env)
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
}

// newReplica is this serve in the rollout, on the store just opened.
func (s *services) newReplica() *rollout.Replica {
	host, _ := os.Hostname()
	return rollout.NewReplica(rollout.NewRegistry(s.st, nil), rollout.ReplicaConfig{File: s.file, Read: s.app.locate,
		Parse: s.app.packParser(s.kind), Every: s.packWatch, Host: host, PID: os.Getpid(), Logger: s.app.logger})
}

// watchPack is the pack watcher: it runs until ctx is done; SIGHUP makes it read the pack file.
func (s *services) watchPack(ctx context.Context) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	parts := rollout.Parts{Build: packBuilder{s}, MCP: s.pool, Sampling: s.sampler, Approvals: s.approvals, Metrics: s.app.tel,
		Conversations: s.bot}
	if s.oauth != nil {
		parts.OAuth = s.oauth
	}
	if l, ok := s.ch.(rollout.Labeler); ok {
		parts.Label = l
	}
	return s.replica.Run(ctx, s.bot.Holder(), rollout.NewSwitcher(s.pack, parts, s.app.logger), hup)
}

// packBuilder builds, for a swap, the parts of a pack that may fail to build: the language
// model, the flows engine over serve's pool, approvals and bot, the machine client.
type packBuilder struct{ s *services }

func (b packBuilder) Build(ctx context.Context, p *packs.Pack) (rollout.Build, error) {
	s := b.s
	model, err := newModel(ctx, s.app, p)
	if err != nil {
		return rollout.Build{}, fmt.Errorf("language model: %w", err)
	}
	engine, err := newEngine(s.app, p, s.st, s.kr, s.pool, s.oauth, s.bot, model, s.approvals)
	if err != nil {
		return rollout.Build{}, err
	}
	out := rollout.Build{Engine: engine, Sampler: samplerOf(model)}
	if anyServer(p, (*packs.Server).ClientCredentials) {
		m, err := oauth.NewMachine(oauth.MachineConfig{Servers: p.MCP.Servers, Logger: s.app.logger})
		if err != nil {
			return rollout.Build{}, fmt.Errorf("%w (fix the server's authentication)", err)
		}
		out.Machine = m
	}
	return out, nil
}

// samplerOf is the sampler of model (nil: none).
func samplerOf(model *agent.Model) mcp.Sampler {
	if model == nil {
		return nil
	}
	return flows.NewSampler(model)
}

var _ rollout.Builder = packBuilder{}

package approvals

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/internal/retry"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/toolcall"
)

// Errors of decisions, besides store.ErrAlreadyResolved and store.ErrAlreadyVoted.
var (
	// ErrNotApprover: the caller holds none of the request's approver roles now.
	ErrNotApprover = errors.New("not an approver of this request")
	// ErrOwnRequest: the caller asked for the call and self-approval is off.
	ErrOwnRequest = errors.New("cannot decide one's own request")
	// ErrToolGone: the request's tool is no longer available (a pack swapped in without it);
	// deciding it withdrew it.
	ErrToolGone = errors.New("the requested tool is no longer available")
)

// Store is what the service keeps its state in.
type Store interface {
	store.Approvals
	store.Directory
	store.Outbox
	store.Audit // receipts quote an execution's sealed record
}

// Config configures a [Service].
type Config struct {
	Store Store
	Pack  *packs.Pack
	MCP   *mcp.Pool
	// Kick asks for identity's outbox to be delivered now (the bot's deliverer).
	Kick   func(identity string)
	Logger *slog.Logger
	Now    func() time.Time
	// SweepEvery is how often expired requests and interrupted executions are looked for
	// (default 15 s).
	SweepEvery time.Duration
	// Observer, when set, is told of each step (submit, decide, cancel): metrics, traces.
	Observer Observer
	// Receipts, when set, signs the receipt an approved execution gives its requester
	// (receipt.go); nil: no receipts.
	Receipts ReceiptSigner
}

// Service runs approvals for one pack. Its methods are safe for concurrent use.
type Service struct {
	st    Store
	cur   atomic.Pointer[packRules] // swapped by SetPack
	pool  *mcp.Pool
	kick  func(string)
	log   *slog.Logger
	now   func() time.Time
	every time.Duration
	obs   Observer
	// receipts signs receipts (nil: none).
	receipts ReceiptSigner
}

// New checks cfg and returns a service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Pack == nil || cfg.MCP == nil {
		return nil, errors.New("approvals: Store, Pack and MCP are required")
	}
	s := &Service{st: cfg.Store, pool: cfg.MCP, kick: cfg.Kick, log: cfg.Logger, now: cfg.Now, every: cfg.SweepEvery,
		obs: cfg.Observer, receipts: cfg.Receipts}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.SetPack(cfg.Pack)
	if s.now == nil {
		s.now = time.Now
	}
	if s.every <= 0 {
		s.every = 15 * time.Second
	}
	if s.kick == nil {
		s.kick = func(string) {}
	}
	return s, nil
}

// packRules are what the service takes from its pack.
type packRules struct {
	pack  *packs.Pack
	calls *toolcall.Runner
}

// SetPack makes p the pack of the next step (a pack swapped in): approved calls run under its
// rules, and a request for a tool p no longer has is withdrawn when decided.
func (s *Service) SetPack(p *packs.Pack) {
	s.cur.Store(&packRules{pack: p, calls: toolcall.New(p, s.pool, &toolcall.Options{RBAC: rbac.New(p)})})
}

// Request is a call whose decision is APPROVAL, to submit.
type Request struct {
	// ID, when set, is the request's id (otherwise a random one is made). The caller derives it
	// from what caused the request (the inbound event being handled), so that handling that
	// event again after a crash finds the request instead of creating a second one.
	ID        string
	Caller    rbac.Caller
	Conn      string
	Lang      string
	Server    string
	Tool      string
	Arguments json.RawMessage
	Policy    *packs.ApprovalPolicy
}

// Fingerprint is the SHA-256 (hex) of (server, tool, canonical arguments, requester, policy);
// the audit table's fingerprint of a call has no policy (nil).
func Fingerprint(server, tool string, canonicalArgs []byte, requester string, p *packs.ApprovalPolicy) string {
	h := sha256.New()
	policy, _ := json.Marshal(p) // plain fields: cannot fail
	for _, part := range [][]byte{[]byte(server), []byte(tool), canonicalArgs, []byte(requester), policy} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Result is a request after a step, and the identities whose badge counts the step changed:
// the caller refreshes their menus once its own work is committed (package flows returns them
// as effects of the event that made the step). Badges are set also when a step is refused as
// done already: it may be the step made again after a crash cut the first off before the
// refresh.
type Result struct {
	store.Approval
	Badges []string
	// Execution is the audit record of the call this step ran (Decide reaching the quorum), as
	// stored: its ID and chain Hash are what a receipt quotes. Nil when the step ran nothing,
	// or its outcome could not be recorded.
	Execution *store.AuditRecord
}

// submit is Submit, unobserved.
func (s *Service) submit(ctx context.Context, r Request) (Result, error) {
	if r.Policy == nil {
		return Result{}, errors.New("submit approval: no policy")
	}
	now := s.now()
	timeout := time.Duration(r.Policy.TimeoutMinutes * float64(time.Minute))
	if timeout <= 0 {
		timeout = time.Hour
	}
	tool, _ := s.lookup(r.Server, r.Tool)
	a := store.Approval{
		ID: r.ID, Server: r.Server, Tool: r.Tool, Arguments: []byte(r.Arguments), // exactly as asked
		Fingerprint: Fingerprint(r.Server, r.Tool, CanonicalJSON(r.Arguments), r.Caller.Identity, r.Policy),
		Description: tool.Description, Requester: r.Caller.Identity, RequesterName: r.Caller.DisplayName,
		RequesterConn: r.Conn, RequesterLang: r.Lang, ApproverRoles: slices.Clone(r.Policy.Approvers),
		Quorum: max(r.Policy.Quorum, 1), AllowSelf: r.Policy.AllowSelfApproval,
		CreatedAt: now, ExpiresAt: now.Add(timeout),
	}
	if a.ID == "" {
		a.ID = newID()
	}
	if len(a.Arguments) == 0 {
		a.Arguments = []byte("{}")
	}
	approvers, err := s.findApprovers(ctx, a)
	if err != nil {
		return Result{}, fmt.Errorf("submit approval: %w", err)
	}
	notices := []store.OutboxMessage{notice(a.Requester, i18n.Message{Key: "APPROVAL_SUBMITTED", Args: []string{"tool", a.Tool, "id", short(a.ID)}})}
	for _, id := range approvers {
		notices = append(notices, notice(id, i18n.Message{Key: "APPROVAL_NEW", Args: []string{"requester", name(a), "tool", a.Tool, "server", a.Server, "summary", s.Summary(a)}}))
	}
	err = s.st.CreateApproval(ctx, a, notices...)
	if errors.Is(err, store.ErrConflict) {
		// A replay: the request and its notices were committed by the first Submit.
		prev, gerr := s.st.GetApproval(ctx, a.ID)
		switch {
		case gerr != nil:
			return Result{}, fmt.Errorf("submit approval %s again: %w", a.ID, gerr)
		case prev.Requester != a.Requester:
			return Result{}, fmt.Errorf("submit approval: %w", err) // someone else's id
		}
		// The first Submit may have been cut off (a crash) before the badges were refreshed.
		return Result{Approval: prev, Badges: badges(a.Requester, approvers)}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("submit approval: %w", err)
	}
	s.log.InfoContext(ctx, "approval requested", slog.String("id", a.ID), slog.String("requester", a.Requester),
		slog.String("server", a.Server), slog.String("tool", a.Tool), slog.String("fingerprint", a.Fingerprint))
	s.kickAll(notices)
	return Result{Approval: a, Badges: badges(a.Requester, approvers)}, nil
}

// Summary is the argument summary of a, built from its arguments and the tool's schema.
func (s *Service) Summary(a store.Approval) string {
	tool, _ := s.lookup(a.Server, a.Tool)
	return Summary(a.Arguments, tool.InputSchema)
}

func (s *Service) lookup(server, tool string) (mcp.Tool, bool) {
	cat, _ := s.pool.Catalog()
	return cat.Lookup(server, tool)
}

// approvers are the identities that may decide a (as the directory knows them), but the
// requester unless self-approval is allowed.
func (s *Service) approvers(ctx context.Context, a store.Approval) []string {
	ids, _ := s.findApprovers(ctx, a)
	return ids
}

// findApprovers is approvers, failing when the store is unavailable: a step whose notices go to
// the approvers must then be taken again (the event is retried), not committed without them.
func (s *Service) findApprovers(ctx context.Context, a store.Approval) ([]string, error) {
	ids, err := s.st.IdentitiesWithRoles(ctx, a.ApproverRoles)
	if err != nil {
		if errors.Is(err, store.ErrUnavailable) {
			return nil, fmt.Errorf("approvers of %s: %w", a.ID, err)
		}
		s.log.WarnContext(ctx, "approvers not found", slog.String("id", a.ID), slog.Any("err", err))
		return nil, nil
	}
	out := ids[:0]
	for _, id := range ids {
		if id != a.Requester || a.AllowSelf {
			out = append(out, id)
		}
	}
	return out, nil
}

// decide is Decide, unobserved; proof is the digest of the presentation an approval was proved
// with ("" for none: then an approval that needs one is refused).
func (s *Service) decide(ctx context.Context, approver rbac.Caller, id string, approve bool, proof string) (Result, error) {
	a, err := s.st.GetApproval(ctx, id)
	if err != nil {
		return Result{}, fmt.Errorf("decide approval %s: %w", id, err)
	}
	if !approver.Authenticated || !rbac.HoldsAny(approver.Roles, a.ApproverRoles) {
		return Result{Approval: a}, ErrNotApprover
	}
	if approver.Identity == a.Requester && !a.AllowSelf {
		return Result{Approval: a}, ErrOwnRequest
	}
	if a.Status == store.ApprovalPending && s.gone(a) {
		return s.withdraw(ctx, a, approver)
	}
	if _, fresh := s.policy(a).FreshProof(); approve && fresh && proof == "" {
		return Result{Approval: a}, ErrProofRequired
	}
	v := store.Vote{Approver: approver.Identity, Decision: store.VoteReject, At: s.now(), Proof: proof,
		Call: &store.Call{Server: a.Server, Tool: a.Tool, Fingerprint: a.Fingerprint}}
	if approve {
		v.Decision = store.VoteApprove
	}
	// The approvers are looked up before the vote's transaction; the notices closure only
	// reads what it captured (it may run more than once).
	approvers, err := s.findApprovers(ctx, a)
	if err != nil {
		return Result{Approval: a}, fmt.Errorf("decide approval %s: %w", id, err)
	}
	notices := func(a store.Approval) []store.OutboxMessage {
		var ms []store.OutboxMessage
		switch a.Status {
		case store.ApprovalRejected:
			ms = append(ms, notice(a.Requester, i18n.Message{Key: "APPROVAL_REJECTED", Args: []string{"tool", a.Tool, "approver", approverName(approver)}}))
		case store.ApprovalApproved:
			for _, other := range approvers {
				if other != approver.Identity {
					ms = append(ms, notice(other, i18n.Message{Key: "APPROVAL_APPROVED_OTHERS", Args: []string{"requester", name(a), "tool", a.Tool, "approver", approverName(approver)}}))
				}
			}
		}
		return ms
	}
	changed := badges(a.Requester, append([]string{approver.Identity}, approvers...))
	a, err = s.st.VoteApproval(ctx, id, v, s.lease(a), notices)
	if err != nil {
		r := Result{Approval: a}
		if errors.Is(err, store.ErrAlreadyResolved) || errors.Is(err, store.ErrAlreadyVoted) {
			// This may be the approver's choice handled again after a crash that cut the first
			// handling off after its vote committed, before the badges were refreshed.
			r.Badges = changed
		}
		return r, fmt.Errorf("decide approval %s: %w", id, err)
	}
	s.log.InfoContext(ctx, "approval vote", slog.String("id", id), slog.String("approver", approver.Identity),
		slog.String("decision", v.Decision), slog.String("status", a.Status))
	s.kickAll(notices(a))
	r := Result{Approval: a, Badges: changed}
	if a.Status == store.ApprovalApproved && a.Exec == store.ExecClaimed {
		r.Approval, r.Execution = s.execute(ctx, a, approverName(approver))
	}
	return r, nil
}

// gone reports whether a's tool is no longer available under the current pack: its server was
// removed or disabled, or the server's tools, once known, no longer include it.
func (s *Service) gone(a store.Approval) bool {
	if srv := s.cur.Load().pack.Server(a.Server); srv == nil || !srv.Enabled {
		return true
	}
	cat, _ := s.pool.Catalog()
	if len(cat.Server(a.Server)) == 0 {
		return false // not listed yet: it cannot be told
	}
	_, ok := cat.Lookup(a.Server, a.Tool)
	return !ok
}

// withdraw closes a request whose tool is gone, when an approver decides it: the requester is
// told, and the approver gets ErrToolGone.
func (s *Service) withdraw(ctx context.Context, a store.Approval, approver rbac.Caller) (Result, error) {
	approvers, err := s.findApprovers(ctx, a)
	if err != nil {
		return Result{Approval: a}, fmt.Errorf("withdraw approval %s: %w", a.ID, err)
	}
	notices := func(a store.Approval) []store.OutboxMessage {
		return []store.OutboxMessage{notice(a.Requester, i18n.Message{Key: "APPROVAL_WITHDRAWN", Args: []string{"tool", a.Tool}})}
	}
	done, err := s.st.CancelApproval(ctx, a.ID, a.Requester, s.now(), notices)
	if err != nil {
		return Result{Approval: done}, fmt.Errorf("withdraw approval %s: %w", a.ID, err)
	}
	s.log.InfoContext(ctx, "approval request withdrawn: its tool is gone", slog.String("id", a.ID),
		slog.String("server", a.Server), slog.String("tool", a.Tool), slog.String("approver", approver.Identity))
	s.kickAll(notices(done))
	return Result{Approval: done, Badges: badges(a.Requester, append([]string{approver.Identity}, approvers...))},
		fmt.Errorf("decide approval %s: %w", a.ID, ErrToolGone)
}

// lease is how long an execution claim lasts: the server's call timeout (after which the call
// has given up) and half as much again, at least a second, for recording the outcome.
func (s *Service) lease(a store.Approval) time.Duration {
	timeout := time.Duration(packs.DefaultTimeoutMs) * time.Millisecond
	if srv := s.cur.Load().pack.Server(a.Server); srv != nil && srv.TimeoutMs > 0 {
		timeout = time.Duration(srv.TimeoutMs) * time.Millisecond
	}
	return timeout + max(timeout/2, time.Second)
}

// execute runs an approved call whose execution this process claimed: the requester's access
// is decided again from their latest session, then the tool runs and the outcome is recorded,
// with the call's audit row and the requester's notice, in one transaction. It returns the
// request and the audit row as stored (nil when the outcome was not recorded).
func (s *Service) execute(ctx context.Context, a store.Approval, approver string) (store.Approval, *store.AuditRecord) {
	caller, ok, err := s.requester(ctx, a.Requester)
	if err != nil {
		// Not run: the claim runs out and the sweeper reports the execution interrupted.
		s.log.ErrorContext(ctx, "approved call not run: the requester's roles cannot be read", slog.String("id", a.ID), slog.Any("err", err))
		return a, nil
	}
	var row store.AuditRecord
	c := toolcall.Call{Caller: caller, Server: a.Server, Tool: a.Tool, Arguments: a.Arguments, Fingerprint: a.Fingerprint,
		ApprovalID: a.ID, Audit: func(_ context.Context, r store.AuditRecord) { row = r }}
	if !ok {
		c.Caller, c.Refused = rbac.Caller{Identity: a.Requester, Authenticated: true}, "the requester's roles are unknown"
	}
	out, _ := s.cur.Load().calls.Run(ctx, c) // no Begin: the execution's claim was taken in the store
	e := store.Execution{State: store.ExecDone, Result: []byte(out.Result.Text), Audit: &row}
	m := i18n.Message{Key: "APPROVAL_APPROVED_RESULT", Args: []string{"tool", a.Tool, "approver", approver, "result", out.Result.Text}}
	switch {
	case out.Denied():
		e.State, e.Result, e.Error = store.ExecFailed, nil, out.Row.Error
		m = i18n.Message{Key: "APPROVAL_REVOKED", Args: []string{"tool", a.Tool}}
	case out.Err != nil:
		// The requester and the stored request get the kind of failure; the log has the detail.
		s.log.WarnContext(ctx, "approved call failed", slog.String("id", a.ID), slog.Any("err", out.Err))
		e.State, e.Result, e.Error = store.ExecFailed, nil, out.Row.Error
	case out.Result.IsError:
		e.State, e.Error = store.ExecFailed, out.Result.Text
	}
	if e.State != store.ExecDone && !out.Denied() {
		m = i18n.Message{Key: "APPROVAL_APPROVED_FAILED", Args: []string{"tool", a.Tool, "approver", approver, "error", e.Error}}
	}
	e.Notices = []store.OutboxMessage{notice(a.Requester, m)}
	done, stored, err := s.finish(ctx, a, e)
	if err != nil {
		s.log.ErrorContext(ctx, "approval outcome not recorded", slog.String("id", a.ID), slog.Any("err", err))
		return a, nil
	}
	s.kick(a.Requester)
	s.offerReceipt(ctx, done, stored)
	return done, &stored
}

// finish records the outcome of a's execution, retrying while the store is unavailable (a
// database restart) as long as the execution's claim lasts: after it, the sweeper reports the
// execution interrupted instead.
func (s *Service) finish(ctx context.Context, a store.Approval, e store.Execution) (store.Approval, store.AuditRecord, error) {
	var done store.Approval
	var row store.AuditRecord
	p := retry.Policy{First: 50 * time.Millisecond, Max: time.Second, Within: a.ExecUntil.Sub(s.now()), Retryable: unavailable,
		OnRetry: func(_ error, wait time.Duration) {
			s.log.WarnContext(ctx, "approval outcome: store unavailable; retrying", slog.String("id", a.ID), slog.Duration("in", wait))
		}}
	err := p.Do(ctx, func(ctx context.Context) error {
		var err error
		done, row, err = s.st.FinishExecution(ctx, a.ID, e)
		return err
	})
	return done, row, err
}

// unavailable: the store is restarting (worth waiting for).
func unavailable(err error) bool { return errors.Is(err, store.ErrUnavailable) }

// requester is the requester with the roles of their latest login.
//
// A store that is restarting is waited for (about 6 s at most): an unreadable directory is not a
// revoked access. The store's error (store.ErrUnavailable) is returned when it stays down.
func (s *Service) requester(ctx context.Context, identity string) (rbac.Caller, bool, error) {
	var id store.Identity
	p := retry.Policy{First: 50 * time.Millisecond, Within: 6500 * time.Millisecond, Retryable: unavailable}
	err := p.Do(ctx, func(ctx context.Context) error {
		var err error
		id, err = s.st.GetIdentity(ctx, identity)
		return err
	})
	if ctx.Err() != nil {
		return rbac.Caller{}, false, ctx.Err()
	}
	if errors.Is(err, store.ErrUnavailable) {
		return rbac.Caller{}, false, err
	}
	if err != nil {
		s.log.WarnContext(ctx, "requester's roles", slog.String("identity", identity), slog.Any("err", err))
		return rbac.Caller{}, false, nil
	}
	return rbac.Caller{Identity: identity, DisplayName: id.DisplayName, Roles: id.Roles, Authenticated: true}, true, nil
}

// cancel is Cancel, unobserved.
func (s *Service) cancel(ctx context.Context, requester, id string) (Result, error) {
	a, err := s.st.GetApproval(ctx, id)
	if err != nil {
		return Result{Approval: a}, fmt.Errorf("cancel approval %s: %w", id, err)
	}
	approvers, err := s.findApprovers(ctx, a)
	if err != nil {
		return Result{Approval: a}, fmt.Errorf("cancel approval %s: %w", id, err)
	}
	notices := func(a store.Approval) []store.OutboxMessage {
		ms := make([]store.OutboxMessage, 0, len(approvers))
		for _, other := range approvers {
			ms = append(ms, notice(other, i18n.Message{Key: "APPROVAL_CANCELLED", Args: []string{"requester", name(a), "tool", a.Tool}}))
		}
		return ms
	}
	a, err = s.st.CancelApproval(ctx, id, requester, s.now(), notices)
	if err != nil {
		return Result{Approval: a}, fmt.Errorf("cancel approval %s: %w", id, err)
	}
	s.kickAll(notices(a))
	return Result{Approval: a, Badges: badges(a.Requester, approvers)}, nil
}

// Mine lists requester's pending requests.
func (s *Service) Mine(ctx context.Context, requester string) ([]store.Approval, error) {
	return s.st.ListApprovals(ctx, store.ApprovalQuery{Requester: requester, Status: store.ApprovalPending})
}

// Decidable lists the pending requests c may decide.
func (s *Service) Decidable(ctx context.Context, c rbac.Caller) ([]store.Approval, error) {
	if !c.Authenticated || len(c.Roles) == 0 {
		return nil, nil
	}
	return s.st.ListApprovals(ctx, store.ApprovalQuery{DecidableBy: c.Identity, Roles: c.Roles})
}

// Counts are c's badge counts: their own pending requests, and those they may decide.
func (s *Service) Counts(ctx context.Context, c rbac.Caller) (mine, decidable int, err error) {
	if !c.Authenticated {
		return 0, 0, nil
	}
	if mine, err = s.st.CountApprovals(ctx, store.ApprovalQuery{Requester: c.Identity, Status: store.ApprovalPending}); err != nil {
		return 0, 0, err
	}
	if len(c.Roles) > 0 {
		decidable, err = s.st.CountApprovals(ctx, store.ApprovalQuery{DecidableBy: c.Identity, Roles: c.Roles})
	}
	return mine, decidable, err
}

// Run sweeps until ctx ends: pending requests past their expiry become EXPIRED (the requester
// is told), and executions whose claim ran out without an outcome become interrupted (the
// requester is told; they never run again). After each sweep's commit, refresh is given the
// identities whose badge counts it changed (when there are any); a refresh that fails is
// logged (the badges are right again at the identities' next event). Any number of processes
// may run it.
func (s *Service) Run(ctx context.Context, refresh func(ctx context.Context, identities []string) error) error {
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		if ids := s.Sweep(ctx); len(ids) > 0 && refresh != nil {
			if err := refresh(ctx, ids); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "refresh badges after a sweep", slog.Int("identities", len(ids)), slog.Any("err", err))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Sweep does one round of Run's work and returns the identities whose badge counts it changed
// (the requesters and approvers of the expired requests). Each sweep's notices commit with its
// transitions.
func (s *Service) Sweep(ctx context.Context) (badgesChanged []string) {
	now := s.now()
	expiredNotice := func(a store.Approval) []store.OutboxMessage {
		return []store.OutboxMessage{notice(a.Requester, i18n.Message{Key: "APPROVAL_EXPIRED", Args: []string{"tool", a.Tool}})}
	}
	expired, err := s.st.ExpireApprovals(ctx, now, 100, expiredNotice)
	if err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "expire approvals", slog.Any("err", err))
	}
	for _, a := range expired {
		s.log.InfoContext(ctx, "approval expired", slog.String("id", a.ID))
		s.kickAll(expiredNotice(a))
		badgesChanged = append(badgesChanged, badges(a.Requester, s.approvers(ctx, a))...)
	}
	interruptedNotice := func(a store.Approval) []store.OutboxMessage {
		return []store.OutboxMessage{notice(a.Requester, i18n.Message{Key: "APPROVAL_INTERRUPTED", Args: []string{"tool", a.Tool}})}
	}
	interrupted, err := s.st.InterruptExecutions(ctx, now, 100, interruptedNotice)
	if err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "interrupt executions", slog.Any("err", err))
	}
	for _, a := range interrupted {
		s.log.WarnContext(ctx, "approved execution interrupted; it will not run again", slog.String("id", a.ID))
		s.kickAll(interruptedNotice(a))
	}
	return slices.Compact(slices.Sorted(slices.Values(badgesChanged)))
}

// badges are the identities whose badges a step on requester's request changed: the requester
// and others, each once.
func badges(requester string, others []string) []string {
	ids := append([]string{requester}, others...)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// notice is the outbox message carrying m to identity.
func notice(identity string, m i18n.Message) store.OutboxMessage {
	n, _ := store.NewOutboxMessage(identity, "", i18n.MessageKind, m) // strings only: cannot fail
	return n
}

// kickAll asks for the delivery of committed notices.
func (s *Service) kickAll(ms []store.OutboxMessage) {
	for _, m := range ms {
		s.kick(m.Identity)
	}
}

func name(a store.Approval) string {
	if a.RequesterName != "" {
		return a.RequesterName
	}
	return a.Requester
}

func approverName(c rbac.Caller) string {
	if c.DisplayName != "" {
		return c.DisplayName
	}
	return c.Identity
}

// short is the first 8 characters of an id, for texts.
func short(id string) string { return id[:min(8, len(id))] }

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// Get returns one request.
func (s *Service) Get(ctx context.Context, id string) (store.Approval, error) {
	a, err := s.st.GetApproval(ctx, id)
	if err != nil {
		return a, fmt.Errorf("get approval %s: %w", id, err)
	}
	return a, nil
}

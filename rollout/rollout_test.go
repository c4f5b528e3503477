package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/flows"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/sqlstore"
	"github.com/packbot/packbot/store/storetest"
)

// backend opens handles on one fresh database: each call of open is another handle, as
// another process would have (on PostgreSQL, another pool; on SQLite, another connection to
// the same file).
type backend struct {
	name string
	open func(t *testing.T) func(t *testing.T) store.Store
}

var backends = []backend{
	{"SQLite", func(t *testing.T) func(t *testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "packbot.db")
		return handles(func(ctx context.Context) (store.Store, error) { return sqlstore.OpenSQLite(ctx, path, nil) })
	}},
	{"Postgres", func(t *testing.T) func(t *testing.T) store.Store {
		dsn := storetest.PostgresDSN(t)
		return handles(func(ctx context.Context) (store.Store, error) { return sqlstore.OpenPostgres(ctx, dsn, nil) })
	}},
}

// handles opens a handle with open for each call, closed when the test ends.
func handles(open func(ctx context.Context) (store.Store, error)) func(t *testing.T) store.Store {
	return func(t *testing.T) store.Store {
		st, err := open(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
}

// eachBackend runs test on SQLite and on PostgreSQL.
func eachBackend(t *testing.T, test func(t *testing.T, open func(t *testing.T) store.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.open(t)) })
	}
}

func fatal(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// packText is a valid pack named name.
func packText(name string) []byte {
	return []byte("metadata: {id: " + name + ", displayName: " + name + "}\nlanguages: {en: {greetingMessage: \"Hello from " + name + "\"}}\n")
}

// TestApplyVersions: each new content is the next version (applying an earlier content again
// is a new version too: a rollback), the same content twice is one version, a file's digest is
// remembered only when it came from the file, and replicas not seen for long are forgotten.
func TestApplyVersions(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		ctx := t.Context()
		reg := NewRegistry(open(t), nil)
		if _, ok, err := reg.Current(ctx); ok || err != nil {
			t.Fatalf("empty store: ok %v, %v", ok, err)
		}
		steps := []struct {
			text, origin string
			version      int64
			created      bool
		}{
			{"a", OriginFile, 1, true}, {"a", OriginFile, 1, false}, {"b", OriginApply, 2, true},
			{"a", OriginApply, 3, true}, {"a", OriginApply, 3, false},
		}
		for i, s := range steps {
			v, created, err := reg.Apply(ctx, []byte(s.text), "pack.yaml", s.origin)
			if err != nil || v.Version != s.version || created != s.created || v.Digest != Digest([]byte(s.text)) {
				t.Fatalf("step %d (%s by %s): %s created %v, %v; want v%d created %v", i, s.text, s.origin, v.Label(), created, err, s.version, s.created)
			}
		}
		cur, ok, err := reg.Current(ctx)
		if err != nil || !ok || cur.Version != 3 || cur.Digest != Digest([]byte("a")) || cur.Origin != OriginApply || len(cur.Text) != 0 {
			t.Fatalf("current %+v, %v, %v", cur, ok, err)
		}
		if text, err := reg.Text(ctx, cur); err != nil || string(text) != "a" {
			t.Fatalf("text %q, %v", text, err)
		}
		if seen, err := reg.FileSeen(ctx, "pack.yaml"); err != nil || seen != Digest([]byte("a")) {
			t.Fatalf("file seen %q, %v", seen, err)
		}
		if seen, err := reg.FileSeen(ctx, "other.yaml"); err != nil || seen != "" {
			t.Fatalf("file never seen: %q, %v", seen, err)
		}

		now := time.Now()
		fatal(t, reg.Report(ctx, Report{Replica: "old", Version: 1, Seen: now.Add(-25 * time.Hour)}))
		fatal(t, reg.Report(ctx, Report{Replica: "live", Version: 3, Seen: now}))
		fatal(t, reg.Prune(ctx, now.Add(-24*time.Hour)))
		rs, err := reg.Replicas(ctx, time.Time{})
		if err != nil || len(rs) != 1 || rs[0].Replica != "live" {
			t.Fatalf("replicas after pruning: %+v, %v", rs, err)
		}
	})
}

// TestConcurrentApply: applies racing from several handles (several `pack apply` runs, or
// replicas reading a changed file) get distinct versions, 1 to n, and none is lost: each
// version's text is the one applied under it, and the version in force is the last.
func TestConcurrentApply(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		const n = 8
		regs := make([]*Registry, n)
		for i := range regs {
			regs[i] = NewRegistry(open(t), nil)
		}
		got := make([]Version, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				v, created, err := regs[i].Apply(t.Context(), packText(fmt.Sprint("pack-", i)), fmt.Sprint("apply-", i), OriginApply)
				if err != nil || !created {
					t.Errorf("apply %d: %s created %v, %v", i, v.Label(), created, err)
				}
				got[i] = v
			})
		}
		close(start)
		wg.Wait()
		var numbers []int64
		for i, v := range got {
			numbers = append(numbers, v.Version)
			if v.Digest != Digest(packText(fmt.Sprint("pack-", i))) {
				t.Errorf("apply %d got %s, with another digest", i, v.Label())
			}
		}
		slices.Sort(numbers)
		if want := []int64{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(numbers, want) {
			t.Fatalf("versions %v, want %v: two applies shared a number or one was lost", numbers, want)
		}
		cur, _, err := regs[0].Current(t.Context())
		fatal(t, err)
		for i, v := range got {
			if v.Version == n && !v.Is(cur) {
				t.Fatalf("in force %s, but the last applied was %s (apply %d)", cur.Label(), v.Label(), i)
			}
			text, err := regs[0].Text(t.Context(), v)
			if err != nil || string(text) != string(packText(fmt.Sprint("pack-", i))) {
				t.Fatalf("text of %s: %q, %v", v.Label(), text, err)
			}
		}
		t.Logf("%d concurrent applies: versions %v, in force %s", n, numbers, cur.Label())
	})
}

// fakeBot is a bot's parts in memory, recording what they were switched to. The builder
// refuses a pack whose id is "refuse-build", the MCP pool one whose first server is named
// "refused".
type fakeBot struct {
	mu       sync.Mutex
	versions []int64  // the conversations' engine switches
	oauth    []string // the first server of each list the OAuth servers were set to
	servers  int      // how many servers the MCP pool has
	approved string   // the pack approvals follow
	label    string
	metric   string // the version label of the metrics
	offered  map[bool]int
}

func newFakeBot() *fakeBot { return &fakeBot{offered: map[bool]int{}} }

type (
	fakeBuilder   struct{ *fakeBot }
	fakeOAuth     struct{ *fakeBot }
	fakePool      struct{ *fakeBot }
	fakeApprovals struct{ *fakeBot }
	fakeLabel     struct{ *fakeBot }
	fakeMetrics   struct{ *fakeBot }
	fakeConvs     struct{ *fakeBot }
)

func (b *fakeBot) parts() Parts {
	return Parts{Build: fakeBuilder{b}, OAuth: fakeOAuth{b}, MCP: fakePool{b}, Sampling: &SamplerSwitch{}, Approvals: fakeApprovals{b},
		Label: fakeLabel{b}, Metrics: fakeMetrics{b}, Conversations: fakeConvs{b}}
}

func (b fakeBuilder) Build(_ context.Context, p *packs.Pack) (Build, error) {
	if p.Metadata.ID == "refuse-build" {
		return Build{}, errors.New("language model: no such provider")
	}
	return Build{}, nil
}

func (b fakeOAuth) SetServers(servers []packs.Server) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	first := ""
	if len(servers) > 0 {
		first = servers[0].Name
	}
	b.oauth = append(b.oauth, first)
	return nil
}

func (b fakePool) Update(_ context.Context, servers []packs.Server, _ mcp.MachineAuthorizer) (mcp.UpdateReport, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(servers) > 0 && servers[0].Name == "refused" {
		return mcp.UpdateReport{}, errors.New("mcp.servers[0] (refused): not reachable")
	}
	b.servers = len(servers)
	return mcp.UpdateReport{}, nil
}

func (b fakeApprovals) SetPack(p *packs.Pack) { b.mu.Lock(); b.approved = p.Metadata.ID; b.mu.Unlock() }
func (b fakeLabel) SetLabel(l string)         { b.mu.Lock(); b.label = l; b.mu.Unlock() }
func (b fakeMetrics) SetPack(_, _, version string) {
	b.mu.Lock()
	b.metric = version
	b.mu.Unlock()
}
func (b fakeMetrics) PackOffered(applied bool) { b.mu.Lock(); b.offered[applied]++; b.mu.Unlock() }
func (b fakeConvs) SwitchPack(_ context.Context, _ *flows.Engine, version int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.versions = append(b.versions, version)
	return 0
}

// withServer is pack text named name whose one MCP server is named server.
func withServer(name, server string) []byte {
	return append(packText(name), []byte(`mcp:
  servers:
    - name: `+server+`
      transport: streamable-http
      url: http://127.0.0.1:9/mcp
      toolAccess: {default: none}
`)...)
}

// parse parses a pack as a replica does (an empty environment).
func parse(source string, text []byte) (*packs.Pack, string) {
	p, err := packs.Parse(source, text, packs.MapEnv(nil))
	if err != nil {
		return nil, err.Error()
	}
	return p, ""
}

// replicaUnderTest is a Replica running, on its own store handle, with a fake bot.
type replicaUnderTest struct {
	*Replica
	name string
	bot  *fakeBot
	reg  *Registry
}

// startReplica starts a replica named name whose pack file holds text, as serve does: it
// adopts its pack, then runs (looking every 10 ms, and woken by the bus where there is one)
// until the test ends.
func startReplica(t *testing.T, st store.Store, name string, text []byte) *replicaUnderTest {
	t.Helper()
	file := filepath.Join(t.TempDir(), "agent-pack.yaml")
	fatal(t, os.WriteFile(file, text, 0o600))
	reg := NewRegistry(st, nil)
	r := NewReplica(reg, ReplicaConfig{File: File{Path: file, Source: file, Digest: Digest(text)},
		Read: func(path string) (string, []byte, error) {
			b, err := os.ReadFile(path)
			return path, b, err
		},
		Parse: parse, Every: 10 * time.Millisecond, Host: "test", PID: 1, Logger: testLogger(t)})
	running, err := r.Adopt(t.Context(), text)
	fatal(t, err)
	if running == nil {
		var problem string
		if running, problem = parse(file, text); running == nil {
			t.Fatalf("pack file of %s: %s", name, problem)
		}
	}
	u := &replicaUnderTest{Replica: r, name: name, bot: newFakeBot(), reg: reg}
	sw := NewSwitcher(running, u.bot.parts(), testLogger(t))
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	var wg sync.WaitGroup
	if bp, ok := st.(store.BusProvider); ok {
		if bus, ok := bp.Bus(); ok {
			ready := make(chan struct{})
			wg.Go(func() { _ = bus.Listen(ctx, name, ready, r.Notified) })
			select {
			case <-ready:
			case <-t.Context().Done():
			}
		}
	}
	wg.Go(func() {
		if err := r.Run(ctx, name, sw, nil); err != nil {
			t.Errorf("replica %s: %v", name, err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return u
}

// testLogger logs to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// waitUntil waits until ok holds, failing the test after a generous bound.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s", what)
		case <-tick.C:
		}
	}
}

// TestReplicasConverge: three replicas run while applies race from four handles; every
// replica ends on the version in force (its number and its content), having only ever moved
// forward, and says so in its report; Await sees them all run it.
func TestReplicasConverge(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		var rs []*replicaUnderTest
		for i := range 3 {
			rs = append(rs, startReplica(t, open(t), fmt.Sprint("replica-", i), packText("start")))
		}
		const appliers, rounds = 4, 3
		var wg sync.WaitGroup
		for a := range appliers {
			reg := NewRegistry(open(t), nil)
			wg.Go(func() {
				for r := range rounds {
					if _, _, err := reg.Apply(t.Context(), packText(fmt.Sprintf("p%d-%d", a, r)), "apply", OriginApply); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		cur, _, err := rs[0].reg.Current(t.Context())
		fatal(t, err)
		if cur.Version != 1+appliers*rounds {
			t.Fatalf("in force %s after %d applies on v1: a version was lost or shared", cur.Label(), appliers*rounds)
		}
		for _, r := range rs {
			waitUntil(t, r.name+" runs "+cur.Label(), func() bool { return r.Running().Is(cur) })
			r.bot.mu.Lock()
			versions, approved := slices.Clone(r.bot.versions), r.bot.approved
			r.bot.mu.Unlock()
			increasing := len(versions) > 0
			for i := 1; i < len(versions); i++ {
				increasing = increasing && versions[i] > versions[i-1]
			}
			if !increasing || versions[len(versions)-1] != cur.Version {
				t.Errorf("%s switched through %v, want increasing versions ending on %d", r.name, versions, cur.Version)
			}
			text, err := r.reg.Text(t.Context(), cur)
			fatal(t, err)
			if p, _ := parse("", text); approved != p.Metadata.ID {
				t.Errorf("%s: approvals follow %q, want %q", r.name, approved, p.Metadata.ID)
			}
			t.Logf("%s switched through versions %v", r.name, versions)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		reports, err := rs[0].reg.Await(ctx, cur)
		if err != nil || len(reports) != len(rs) {
			t.Fatalf("await %s: %d reports %+v, %v", cur.Label(), len(reports), reports, err)
		}
	})
}

// TestSameNumberMoves: a replica running a version whose number a record written before
// versions were unique gave to another content (two applies that both read v4) moves to
// that content; the next apply takes the next number.
func TestSameNumberMoves(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		st := open(t)
		first, second := packText("first-v5"), packText("second-v5")
		// What the read-modify-write of earlier versions left: the first v5, then the second.
		writeV5 := func(text []byte) {
			v := Version{Version: 5, Digest: Digest(text), Source: "apply", Origin: OriginApply, AppliedAt: time.Now().UTC()}
			head, _ := json.Marshal(v)
			v.Text = text
			full, _ := json.Marshal(v)
			fatal(t, st.BatchRecords(t.Context(), packNamespace, []store.RecordOp{{Key: "v/" + v.Digest, Value: full}, {Key: currentKey, Value: head}}))
		}
		writeV5(first)
		r := startReplica(t, st, "replica", first) // never seen: applied, unchanged: runs the first v5
		if v := r.Running(); v.Version != 5 || v.Digest != Digest(first) {
			t.Fatalf("replica runs %s, want the first v5", v.Label())
		}
		writeV5(second)
		waitUntil(t, "the replica runs the second v5", func() bool { return r.Running().Digest == Digest(second) })
		r.bot.mu.Lock()
		if r.bot.approved != "second-v5" || !slices.Equal(r.bot.versions, []int64{5}) {
			t.Errorf("after the second v5: approvals follow %q, engine switches %v", r.bot.approved, r.bot.versions)
		}
		r.bot.mu.Unlock()
		v, created, err := r.reg.Apply(t.Context(), packText("third"), "apply", OriginApply)
		if err != nil || !created || v.Version != 6 {
			t.Fatalf("next apply: %s created %v, %v; want v6", v.Label(), created, err)
		}
		waitUntil(t, "the replica runs v6", func() bool { return r.Running().Is(v) })
	})
}

// TestRefusals: a pack the replica cannot run — its MCP servers refused by the pool (the OAuth
// servers go back to the running pack's), its model not built, its text invalid here — is
// refused with the reason (readiness detail, report, metric) and changes nothing; Await says
// so; the next valid pack switches every part and clears the refusal.
func TestRefusals(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store.Store) {
		st := open(t)
		r := startReplica(t, st, "replica", withServer("start", "bank"))
		ctx := t.Context()
		refused := func(text []byte, problem string) {
			t.Helper()
			v, _, err := r.reg.Apply(ctx, text, "apply", OriginApply)
			fatal(t, err)
			waitUntil(t, "the refusal of "+v.Label(), func() bool { return strings.Contains(r.Detail(), "refused "+v.Label()+": ") })
			if d := r.Detail(); !strings.HasPrefix(d, "pack: v1 ") || !strings.Contains(d, problem) {
				t.Errorf("readiness detail %q, want v1 running and %q", d, problem)
			}
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			reports, err := r.reg.Await(actx, v)
			if !errors.Is(err, ErrRefused) || len(reports) != 1 || reports[0].Refused != v.Version || reports[0].RefusedDigest != v.Digest ||
				!strings.Contains(reports[0].Problem, problem) {
				t.Errorf("await %s: %+v, %v", v.Label(), reports, err)
			}
		}
		refused(withServer("bad-mcp", "refused"), "not reachable")
		refused(withServer("refuse-build", "bank"), "no such provider")
		refused([]byte("metadata: {id: broken}\nlanguages: [\n"), "line 2")

		r.bot.mu.Lock()
		if !slices.Equal(r.bot.oauth, []string{"refused", "bank"}) || r.bot.approved != "" || len(r.bot.versions) != 0 ||
			r.bot.offered[false] != 3 || r.bot.offered[true] != 0 {
			t.Errorf("parts after the refusals: OAuth set to %v, approvals %q, engines %v, offered %v", r.bot.oauth, r.bot.approved,
				r.bot.versions, r.bot.offered)
		}
		r.bot.mu.Unlock()

		v, _, err := r.reg.Apply(ctx, withServer("good", "rates"), "apply", OriginApply)
		fatal(t, err)
		waitUntil(t, "the replica runs "+v.Label(), func() bool { return r.Running().Is(v) })
		if d := r.Detail(); d != "pack: "+v.Label() {
			t.Errorf("readiness detail %q", d)
		}
		r.bot.mu.Lock()
		defer r.bot.mu.Unlock()
		if r.bot.approved != "good" || r.bot.label != "good" || r.bot.metric != v.Label() || r.bot.servers != 1 ||
			!slices.Equal(r.bot.versions, []int64{v.Version}) || r.bot.offered[true] != 1 {
			t.Errorf("parts after the swap: %+v", r.bot)
		}
	})
}

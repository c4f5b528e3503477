package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// trace records what a lifecycle did to its parts, in order.
type trace struct {
	mu    sync.Mutex
	steps []string
}

func (tr *trace) add(s string) {
	tr.mu.Lock()
	tr.steps = append(tr.steps, s)
	tr.mu.Unlock()
}

func (tr *trace) get() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.steps)
}

// part is a component that records its steps; failProvision and failRun make it fail.
func (tr *trace) part(name string, failProvision bool, runFails <-chan error) component {
	return component{
		name: name,
		provision: func(context.Context) error {
			tr.add("provision " + name)
			if failProvision {
				return errors.New("no " + name)
			}
			return nil
		},
		run: func(ctx context.Context) error {
			tr.add("run " + name)
			select {
			case <-ctx.Done():
				tr.add("end " + name)
				return nil
			case err := <-runFails:
				return err
			}
		},
		stop: func(context.Context) error { tr.add("stop " + name); return nil },
	}
}

// TestLifecycle: parts are provisioned, then run, in order; when ctx ends they stop in reverse
// order, each run ending before its own stop and before the previous part stops; a provision
// that fails stops the parts provisioned before it, in reverse, and none runs; a part that
// fails while running stops the others in reverse and is the error returned.
func TestLifecycle(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Run("order", func(t *testing.T) {
		tr := &trace{}
		lc := &lifecycle{log: log}
		for _, n := range []string{"a", "b", "c"} {
			lc.parts = append(lc.parts, tr.part(n, false, nil))
		}
		ctx, cancel := context.WithCancel(t.Context())
		started := make(chan struct{})
		errc := make(chan error, 1)
		go func() { errc <- lc.run(ctx, func(context.Context) { close(started) }) }()
		<-started
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("run: %v", err)
		}
		steps := tr.get()
		// Runs start in order but in goroutines of their own: their "run" lines may interleave.
		var sorted []string
		for _, s := range steps {
			if !strings.HasPrefix(s, "run ") {
				sorted = append(sorted, s)
			}
		}
		want := []string{"provision a", "provision b", "provision c", "end c", "stop c", "end b", "stop b", "end a", "stop a"}
		if !slices.Equal(sorted, want) {
			t.Errorf("steps %q, want %q (besides the runs)", steps, want)
		}
	})
	t.Run("provision fails", func(t *testing.T) {
		tr := &trace{}
		lc := &lifecycle{log: log, parts: []component{tr.part("a", false, nil), tr.part("b", false, nil), tr.part("c", true, nil),
			tr.part("d", false, nil)}}
		err := lc.run(t.Context(), func(context.Context) { t.Error("started called after a failed provision") })
		if err == nil || !strings.Contains(err.Error(), "start c: no c") {
			t.Fatalf("run: %v, want start c: no c", err)
		}
		want := []string{"provision a", "provision b", "provision c", "stop b", "stop a"}
		if got := tr.get(); !slices.Equal(got, want) {
			t.Errorf("steps %q, want %q", got, want)
		}
	})
	t.Run("run fails", func(t *testing.T) {
		tr := &trace{}
		fail := make(chan error, 1)
		lc := &lifecycle{log: log, parts: []component{tr.part("a", false, nil), tr.part("b", false, fail), tr.part("c", false, nil)}}
		errc := make(chan error, 1)
		go func() {
			errc <- lc.run(t.Context(), func(context.Context) { fail <- errors.New("b broke") })
		}()
		var err error
		select {
		case err = <-errc:
		case <-time.After(10 * time.Second):
			t.Fatal("run did not return after a part failed")
		}
		if err == nil || !strings.Contains(err.Error(), "b stopped: b broke") {
			t.Fatalf("run: %v, want b stopped: b broke", err)
		}
		// The runs' own lines may come late (a's can follow b's stop): leave them out.
		steps := tr.get()
		ends := slices.DeleteFunc(slices.Clone(steps), func(s string) bool { return strings.HasPrefix(s, "run ") })
		i := slices.Index(ends, "stop c")
		if i < 1 || !slices.Equal(ends[i-1:], []string{"end c", "stop c", "stop b", "end a", "stop a"}) {
			t.Errorf("steps %q, want the end (besides the runs) …end c, stop c, stop b, end a, stop a", steps)
		}
	})
}

package bot_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/packbot/packbot/agent/agenttest"
)

// TestMessagesOfOneConnectionInOrder: two messages sent together are answered one after the
// other in order — the second waits for the first's LLM turn, and sees it in memory.
func TestMessagesOfOneConnectionInOrder(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{})
	release := make(chan struct{})
	h.llm.Script(func(r agenttest.Request) agenttest.Response {
		if r.LastUser() == "one" {
			<-release // the first turn waits until the second message is queued
		}
		return agenttest.Echo(r)
	})
	u := h.connect(ctx, map[string]string{"email": "o@acme.corp"}, "en")
	u.text(ctx)
	for _, m := range []string{"one", "two"} {
		if err := u.w.SendText(ctx, m, ""); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if a, b := u.text(ctx), u.text(ctx); a != "you said: one" || b != "you said: two" {
		t.Fatalf("answers %q, %q", a, b)
	}
	reqs := h.llm.Requests()
	second := reqs[len(reqs)-1]
	if second.LastUser() != "two" || len(second.Messages) != 4 || second.Messages[1].Content != "one" {
		t.Fatalf("the second turn did not see the first: %+v", second.Messages)
	}
}

// TestFiftyUsersAtOnce: 50 connections chatting at the same time all get their own answers.
func TestFiftyUsersAtOnce(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, harnessOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := h.ch.Connect(ctx, map[string]string{"email": fmt.Sprintf("u%d@acme.corp", i)})
			if err != nil {
				errs <- err
				return
			}
			msg := fmt.Sprintf("hello from %d", i)
			if err := w.SendText(ctx, msg, ""); err != nil {
				errs <- err
				return
			}
			for {
				r, err := w.Next(ctx)
				if err != nil {
					errs <- fmt.Errorf("user %d: %w", i, err)
					return
				}
				if r.Text == nil {
					continue
				}
				if r.Text.Content != "you said: "+msg {
					errs <- fmt.Errorf("user %d got %q", i, r.Text.Content)
				}
				return
			}
		}()
	}
	wg.Wait()
	close(errs)
	var failed []string
	for err := range errs {
		failed = append(failed, err.Error())
	}
	if len(failed) > 0 {
		t.Fatalf("%d users failed:\n%s", len(failed), strings.Join(failed, "\n"))
	}
}

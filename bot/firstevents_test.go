package bot_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/packbot/packbot/channel/channeltest"
)

// TestConcurrentFirstEvents: the first two events of connections without a worker arrive at
// once (a DIDComm wallet's connection and profile do). Only one of them may take the lease:
// when both did, the second took a new epoch, the worker the first had started lost it, and the
// connection waited for the lease to run out (15 s) before anything was answered.
func TestConcurrentFirstEvents(t *testing.T) {
	ctx := testCtx(t)
	const n = 20
	restore := map[string]map[string]string{}
	for i := range n {
		restore[fmt.Sprintf("first-%d", i)] = map[string]string{"name": "U"}
	}
	h := newHarness(t, harnessOptions{noLLM: true, restore: restore})
	var wg sync.WaitGroup
	for _, w := range h.restored {
		for _, text := range []string{"/whoami", "/help"} {
			wg.Go(func() {
				if err := w.SendText(ctx, text, ""); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	for conn, w := range h.restored {
		for range 2 {
			if _, err := channeltest.ExpectReceivedErr(ctx, w); err != nil {
				t.Fatalf("%s: %v", conn, err)
			}
		}
	}
	if logs := h.logs.String(); strings.Contains(logs, "lease lost") {
		t.Fatalf("a worker lost its own replica's lease:\n%s", logs)
	}
}

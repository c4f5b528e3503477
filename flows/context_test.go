package flows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/agent"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store"
)

// TestAttachmentsOutliveTheWindow: however long the conversation, the attachments entry stays
// among the entries a turn loads (re-appended only when it would fall out), and the history
// keeps the window's turns.
func TestAttachmentsOutliveTheWindow(t *testing.T) {
	for _, window := range []int{0, 1, 2, 4} {
		st := newFakeStore()
		e := &Engine{pack: &packs.Pack{Memory: packs.Memory{Window: window}}, now: time.Now}
		newTurn := func() *turn {
			return &turn{e: e, conn: "c1", s: &store.Session{}, fx: &Effects{}, memory: st}
		}
		apply := func(t *turn) {
			for _, a := range t.fx.Memory {
				m := append(st.memory[a.Key], a.Entries...)
				if a.Keep > 0 && len(m) > a.Keep {
					m = m[len(m)-a.Keep:]
				}
				st.memory[a.Key] = m
			}
		}
		tu := newTurn()
		tu.saveAttachments([]attachment{{Server: "s", URI: "u://a", Title: "A", Kind: agent.ContextResource}})
		apply(tu)
		saved := 0
		for turn := range 12 {
			tu = newTurn()
			conv, err := tu.loadConversation(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(conv.attached) != 1 || conv.attached[0].URI != "u://a" {
				t.Fatalf("window %d, turn %d: attachments %+v (memory %+v)", window, turn, conv.attached, st.memory["conn:c1"])
			}
			if want := min(2*turn, 2*window); len(conv.history) != want {
				t.Fatalf("window %d, turn %d: %d history entries, want %d", window, turn, len(conv.history), want)
			}
			tu.remember(conv, conv.attached, false, chatInput{text: "q"}, "a")
			for _, a := range tu.fx.Memory {
				if a.Entries[0].Role == memoryRoleContext {
					saved++
				}
			}
			apply(tu)
		}
		// Re-appended about once per window, never on every turn (but with a window of 0 or 1).
		if window >= 2 && saved > 12/window+1 {
			t.Errorf("window %d: the attachments entry was appended %d times in 12 turns", window, saved)
		}
	}
}

func TestContentsText(t *testing.T) {
	tu := &turn{}
	text, size, cut := tu.contentsText([]mcp.ResourceContents{{URI: "u", Text: "héllo wörld", Size: 13}}, 6)
	if text != "héllo" || size != 13 || !cut {
		t.Errorf("cut on a character: %q %d %v", text, size, cut)
	}
	text, _, cut = tu.contentsText([]mcp.ResourceContents{{URI: "u", Binary: true, MIMEType: "image/png", Size: 2048}}, 100)
	if !strings.Contains(text, "[binary content, image/png, 2.0 KiB: not shown]") || cut {
		t.Errorf("binary: %q %v", text, cut)
	}
	text, _, _ = tu.contentsText([]mcp.ResourceContents{{URI: "u/1", Text: "a", Size: 1}, {URI: "u/2", Text: "b", Size: 1}}, 100)
	if text != "[u/1]\na\n\n[u/2]\nb" {
		t.Errorf("several contents: %q", text)
	}
}

func TestUniqueOptions(t *testing.T) {
	got := uniqueOptions([]option{{Text: "a"}, {Text: "b"}, {Text: "a"}, {Text: "a"}})
	if got[0].Text != "a" || got[2].Text != "a #2" || got[3].Text != "a #3" {
		t.Errorf("%+v", got)
	}
}

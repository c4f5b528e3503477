package bot

import (
	"strings"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// TestInboxTraceContext: the trace context of an accepted event is kept beside its payload
// (sealed or not) and comes back with it, so that the handling joins the acceptance's trace on
// any replica; events stored without one (tracing off, rows of older versions) decode as
// before.
func TestInboxTraceContext(t *testing.T) {
	key, err := secret.ParseKey("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secret.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	e := channel.TextReceived{Conn: "c1", Content: "my secret message"}
	for _, b := range []*Bot{{}, {kr: kr}} {
		for _, want := range []string{tp, ""} {
			kind, raw, err := channel.EncodeEvent(e)
			if err != nil {
				t.Fatal(err)
			}
			payload, err := b.encode("c1", raw, want)
			if err != nil {
				t.Fatal(err)
			}
			if want == "" && b.kr == nil && string(payload) != string(raw) {
				t.Errorf("without a trace the payload is the event's JSON as before: %s", payload)
			}
			if b.kr != nil && strings.Contains(string(payload), "my secret message") {
				t.Errorf("sealed payload holds the text: %s", payload)
			}
			got, gotTP, err := b.decode(store.InboxEvent{ConnectionID: "c1", Kind: kind, Payload: payload})
			if err != nil {
				t.Fatal(err)
			}
			if got.(channel.TextReceived).Content != e.Content || gotTP != want {
				t.Errorf("sealed %v, trace %q: decoded %+v, trace %q", b.kr != nil, want, got, gotTP)
			}
		}
	}
}

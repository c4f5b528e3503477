package flows

import (
	"reflect"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/store"
)

// TestEffectsThen: Then keeps every field of both sides, so a field added to Effects cannot be
// forgotten by the bot's merge of an announcement's effects with its event's (a field Then
// does not know is left zero here, and fails the test).
func TestEffectsThen(t *testing.T) {
	full := Effects{Out: []channel.Outbound{{Text: &channel.Text{Content: "x"}}}, Memory: []store.MemoryAppend{{Key: "k"}},
		ClearMemory: []string{"k"}, Audit: []store.AuditRecord{{Tool: "t"}}, Badges: []string{"ana"}, DeleteSession: true}
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test's Effects leaves %s zero: give it a value", v.Type().Field(i).Name)
		}
	}
	for name, got := range map[string]Effects{"full then none": full.Then(Effects{}), "none then full": (Effects{}).Then(full)} {
		g := reflect.ValueOf(got)
		for i := range g.NumField() {
			if g.Field(i).IsZero() {
				t.Errorf("%s: %s lost", name, g.Type().Field(i).Name)
			}
		}
	}
	if two := full.Then(full); len(two.Out) != 2 || len(two.Badges) != 2 {
		t.Errorf("full then full: %d messages, %d badges, want 2 and 2", len(two.Out), len(two.Badges))
	}
}

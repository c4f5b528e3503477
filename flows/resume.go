package flows

import (
	"context"

	"github.com/packbot/packbot/store"
)

// interrupted answers an event whose earlier handling began external steps and was cut off (a
// crash, a lost lease): the event is not handled again — a tool call could run twice, a typed
// credential could be taken for the next field — and the user is told, for each step, what may
// or may not have happened. A credential test ends the configuration dialog (nothing was saved;
// the draft is dropped), so that no later message is taken for a field's value. Tool calls
// get an audit row saying they were interrupted.
func (t *turn) interrupted(ctx context.Context, steps []Step) error {
	for _, st := range steps {
		switch st.Kind {
		case StepCredentialTest:
			t.dropDraft(ctx, st.Server)
			if t.s.State == store.StateMCPConfig {
				t.endDialog()
			}
			if err := t.sayKey(ctx, "MCP_CONFIG_INTERRUPTED", "server", st.Server); err != nil {
				return err
			}
		case StepToolCall:
			c := t.toolCall(toolRef{Server: st.Server, Tool: st.Tool}, nil)
			c.Fingerprint = st.Fingerprint
			t.e.calls.Interrupted(ctx, c)
			if err := t.sayKey(ctx, "TOOL_INTERRUPTED", "tool", st.Tool, "server", st.Server); err != nil {
				return err
			}
		}
	}
	return nil
}

package vsagenttest

import (
	"encoding/json"
	"fmt"
)

// Webhook routes, as the VS Agent posts them to EVENTS_BASE_URL.
const (
	RouteMessageReceived = "message-received"
	RouteConnectionState = "connection-state-updated"
)

// Completed is the connection-state-updated webhook of conn's completion.
func Completed(conn string) []byte {
	return fmt.Appendf(nil, `{"type":%q,"timestamp":%q,"connectionId":%q,"invitationId":%q,"state":"completed"}`,
		RouteConnectionState, Now(), conn, NewID())
}

// Received is the message-received webhook of a message of type typ from conn with fields (its
// own members besides type, id, connectionId and timestamp, which are added; an "id" among
// fields is kept), and the message's id.
func Received(conn, typ string, fields map[string]any) (id string, body []byte) {
	m := map[string]any{}
	for k, v := range fields {
		m[k] = v
	}
	if s, ok := m["id"].(string); ok && s != "" {
		id = s
	} else {
		id = NewID()
	}
	m["type"], m["id"], m["connectionId"], m["timestamp"] = typ, id, conn, Now()
	body, _ = json.Marshal(map[string]any{"type": RouteMessageReceived, "timestamp": Now(), "message": m}) // plain values: cannot fail
	return id, body
}

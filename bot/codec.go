package bot

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/store"
)

// kindRefreshMenu is the bot's own inbox event, no wallet's: it asks a connection's worker to
// re-send the menu if it changed (a badge count moved). Its payload is a [menuRefresh], and it
// decodes to no [channel.Event].
const kindRefreshMenu = "bot.refresh-menu"

// menuRefresh is the payload of a kindRefreshMenu event.
type menuRefresh struct {
	Conn string `json:"conn"`
	// Pack, when not 0, is the version of a pack swapped in: the refresh re-checks the login
	// too, and waits until this replica runs that version.
	Pack int64 `json:"pack,omitempty"`
}

// packOf is the pack version a kindRefreshMenu event was made for (0: a badge refresh, or not
// a refresh).
func packOf(ev store.InboxEvent) int64 {
	var r menuRefresh
	if ev.Kind != kindRefreshMenu || json.Unmarshal(ev.Payload, &r) != nil {
		return 0
	}
	return r.Pack
}

// sealedEvent is the inbox payload of an event sealed with the keyring.
type sealedEvent struct {
	Sealed store.Sealed `json:"sealed"`
}

// tracedEvent is the inbox payload of an event accepted in a trace: the trace context (a W3C
// traceparent: ids only, never content) beside the event's payload (sealed or not), so that the
// handling joins the acceptance's trace on whichever replica handles it, however much later.
type tracedEvent struct {
	Traceparent string          `json:"traceparent"`
	Event       json.RawMessage `json:"event"`
}

// eventAAD binds a sealed event to its connection.
func eventAAD(conn string) store.CredentialKey {
	return store.CredentialKey{Identity: conn, Kind: "inbox-event"}
}

// encode is the inbox form of an event's payload (channel.EncodeEvent): sealed when the bot has
// a keyring, with the trace context tp when it is not "".
func (b *Bot) encode(conn string, payload []byte, tp string) ([]byte, error) {
	if b.kr != nil {
		s, err := b.kr.SealJSON(eventAAD(conn), json.RawMessage(payload))
		if err != nil {
			return nil, fmt.Errorf("seal event: %w", err)
		}
		if payload, err = json.Marshal(sealedEvent{Sealed: s}); err != nil {
			return nil, fmt.Errorf("seal event: %w", err)
		}
	}
	if tp == "" {
		return payload, nil
	}
	traced, err := json.Marshal(tracedEvent{Traceparent: tp, Event: payload})
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return traced, nil
}

// decode is the inverse of encode: the event and its trace context; a kindRefreshMenu event
// decodes to nil.
func (b *Bot) decode(ev store.InboxEvent) (channel.Event, string, error) {
	if ev.Kind == kindRefreshMenu {
		return nil, "", nil
	}
	payload, tp := ev.Payload, ""
	var t tracedEvent
	if json.Unmarshal(payload, &t) == nil && t.Traceparent != "" && len(t.Event) > 0 {
		payload, tp = t.Event, t.Traceparent
	}
	e, err := b.decodePayload(ev, payload)
	return e, tp, err
}

func (b *Bot) decodePayload(ev store.InboxEvent, payload []byte) (channel.Event, error) {
	var s sealedEvent
	if json.Unmarshal(payload, &s) == nil && len(s.Sealed.Ciphertext) > 0 {
		if b.kr == nil {
			return nil, errors.New("sealed event and no MCP_CONFIG_ENCRYPTION_KEY to open it")
		}
		var plain json.RawMessage
		if err := b.kr.OpenJSON(eventAAD(ev.ConnectionID), s.Sealed, &plain); err != nil {
			return nil, err
		}
		payload = plain
	}
	e, err := channel.DecodeEvent(ev.Kind, payload)
	if err != nil {
		return nil, err
	}
	if e.Connection() != ev.ConnectionID {
		return nil, fmt.Errorf("event of connection %q stored under %q", e.Connection(), ev.ConnectionID)
	}
	return e, nil
}

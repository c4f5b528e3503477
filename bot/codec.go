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
}

// sealedEvent is the inbox payload of an event sealed with the keyring.
type sealedEvent struct {
	Sealed store.Sealed `json:"sealed"`
}

// eventAAD binds a sealed event to its connection.
func eventAAD(conn string) store.CredentialKey {
	return store.CredentialKey{Identity: conn, Kind: "inbox-event"}
}

// encode is e's inbox form: its kind and JSON, sealed when the bot has a keyring.
func (b *Bot) encode(conn string, e channel.Event) (string, []byte, error) {
	kind, payload, err := channel.EncodeEvent(e)
	if err != nil {
		return "", nil, err
	}
	if b.kr == nil {
		return kind, payload, nil
	}
	s, err := b.kr.Seal(eventAAD(conn), payload)
	if err != nil {
		return "", nil, fmt.Errorf("seal event: %w", err)
	}
	sealed, err := json.Marshal(sealedEvent{Sealed: s})
	if err != nil {
		return "", nil, fmt.Errorf("seal event: %w", err)
	}
	return kind, sealed, nil
}

// decode is the inverse of encode; a kindRefreshMenu event decodes to nil.
func (b *Bot) decode(ev store.InboxEvent) (channel.Event, error) {
	if ev.Kind == kindRefreshMenu {
		return nil, nil
	}
	payload := ev.Payload
	var s sealedEvent
	if json.Unmarshal(payload, &s) == nil && len(s.Sealed.Ciphertext) > 0 {
		if b.kr == nil {
			return nil, errors.New("sealed event and no MCP_CONFIG_ENCRYPTION_KEY to open it")
		}
		plain, err := b.kr.Open(eventAAD(ev.ConnectionID), s.Sealed)
		if err != nil {
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

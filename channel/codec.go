package channel

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrUnknownEvent: DecodeEvent was given a kind it does not know.
var ErrUnknownEvent = errors.New("unknown event kind")

// Event kinds, as EncodeEvent names them (they are stored in the bot's inbox: never rename one).
const (
	KindConnectionReady    = "connection-ready"
	KindConnectionClosed   = "connection-closed"
	KindTextReceived       = "text"
	KindMenuRequested      = "menu-requested"
	KindMenuSelected       = "menu-selected"
	KindQuestionAnswered   = "question-answered"
	KindProfileReceived    = "profile"
	KindPresentationResult = "presentation"
)

// EncodeEvent returns e's kind and its JSON form, for a durable inbox.
func EncodeEvent(e Event) (kind string, payload []byte, err error) {
	switch e.(type) {
	case ConnectionReady:
		kind = KindConnectionReady
	case ConnectionClosed:
		kind = KindConnectionClosed
	case TextReceived:
		kind = KindTextReceived
	case MenuRequested:
		kind = KindMenuRequested
	case MenuSelected:
		kind = KindMenuSelected
	case QuestionAnswered:
		kind = KindQuestionAnswered
	case ProfileReceived:
		kind = KindProfileReceived
	case PresentationResult:
		kind = KindPresentationResult
	default:
		return "", nil, fmt.Errorf("encode event %T: %w", e, ErrUnknownEvent)
	}
	payload, err = json.Marshal(e)
	if err != nil {
		return "", nil, fmt.Errorf("encode event %s: %w", kind, err)
	}
	return kind, payload, nil
}

// DecodeEvent is the inverse of EncodeEvent.
func DecodeEvent(kind string, payload []byte) (Event, error) {
	switch kind {
	case KindConnectionReady:
		return decode[ConnectionReady](kind, payload)
	case KindConnectionClosed:
		return decode[ConnectionClosed](kind, payload)
	case KindTextReceived:
		return decode[TextReceived](kind, payload)
	case KindMenuRequested:
		return decode[MenuRequested](kind, payload)
	case KindMenuSelected:
		return decode[MenuSelected](kind, payload)
	case KindQuestionAnswered:
		return decode[QuestionAnswered](kind, payload)
	case KindProfileReceived:
		return decode[ProfileReceived](kind, payload)
	case KindPresentationResult:
		return decode[PresentationResult](kind, payload)
	}
	return nil, fmt.Errorf("decode event %q: %w", kind, ErrUnknownEvent)
}

func decode[E Event](kind string, payload []byte) (Event, error) {
	var e E
	if err := json.Unmarshal(payload, &e); err != nil {
		return nil, fmt.Errorf("decode event %s: %w", kind, err)
	}
	if e.Connection() == "" {
		return nil, fmt.Errorf("decode event %s: no connection", kind)
	}
	return e, nil
}

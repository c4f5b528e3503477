package vsagent

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
)

const qid = "3fa85f64-5717-4562-b3fc-2c963f66afa6" // a question id made by AskQuestion

// msg wraps a message in the message-received envelope, as the VS Agent posts it.
func msg(m string) string {
	return `{"type":"message-received","timestamp":"2026-03-01T10:20:30.123Z","message":` + m + `}`
}

type webhookCase struct {
	name  string
	route string
	body  string
	want  channel.Event // nil: valid, nothing for the bot
	note  string        // substring of the note when want is nil
}

// inboundCases: every webhook in the documented JSON and the event it must become.
var inboundCases = []webhookCase{
	{"connection completed", routeConnectionState,
		`{"type":"connection-state-updated","timestamp":"2026-03-01T10:20:30.123Z","connectionId":"c1","invitationId":"i1","state":"completed"}`,
		channel.ConnectionReady{Conn: "c1"}, ""},
	{"connection completed with metadata", routeConnectionState,
		`{"type":"connection-state-updated","connectionId":"c1","invitationId":"i1","state":"completed","metadata":{}}`,
		channel.ConnectionReady{Conn: "c1"}, ""},
	{"connection terminated", routeConnectionState,
		`{"type":"connection-state-updated","connectionId":"c1","state":"terminated"}`,
		channel.ConnectionClosed{Conn: "c1", Reason: "terminated"}, ""},
	{"connection updated", routeConnectionState,
		`{"type":"connection-state-updated","connectionId":"c1","state":"updated","metadata":{"x":"{}"}}`,
		nil, "state updated"},
	{"connection request received", routeConnectionState,
		`{"connectionId":"c1","state":"request-received"}`,
		nil, "state request-received"},
	{"text", routeMessageReceived,
		msg(`{"type":"text","id":"m1","connectionId":"c1","timestamp":"2026-03-01T10:20:30.123Z","content":"hola 👋"}`),
		channel.TextReceived{Conn: "c1", MessageID: "m1", Content: "hola 👋", SentAt: time.Date(2026, 3, 1, 10, 20, 30, 123e6, time.UTC)}, ""},
	{"text reply", routeMessageReceived,
		msg(`{"type":"text","id":"m2","connectionId":"c1","threadId":"out-1","content":"yes"}`),
		channel.TextReceived{Conn: "c1", MessageID: "m2", ReplyTo: "out-1", Content: "yes"}, ""},
	{"text empty", routeMessageReceived,
		msg(`{"type":"text","id":"m3","connectionId":"c1","content":""}`),
		channel.TextReceived{Conn: "c1", MessageID: "m3"}, ""},
	{"text numeric timestamp", routeMessageReceived,
		msg(`{"type":"text","id":"m4","connectionId":"c1","timestamp":1772360430123,"content":"x"}`),
		channel.TextReceived{Conn: "c1", MessageID: "m4", Content: "x", SentAt: time.UnixMilli(1772360430123).UTC()}, ""},
	{"text unreadable timestamp", routeMessageReceived,
		msg(`{"type":"text","id":"m5","connectionId":"c1","timestamp":"yesterday","content":"x"}`),
		channel.TextReceived{Conn: "c1", MessageID: "m5", Content: "x"}, ""},
	{"text from refdriver", routeMessageReceived,
		`{"type":"message-received","timestamp":"2026-03-01T10:20:30.123Z","message":{"type":"text","id":"6d1f7d0c-8b1e-4f4e-9f59-2b1b8c1d2e3f","connectionId":"c1","timestamp":"2026-03-01T10:20:30.123Z","content":"Hello, can you tell me something about your services?"}}`,
		channel.TextReceived{Conn: "c1", MessageID: "6d1f7d0c-8b1e-4f4e-9f59-2b1b8c1d2e3f", Content: "Hello, can you tell me something about your services?",
			SentAt: time.Date(2026, 3, 1, 10, 20, 30, 123e6, time.UTC)}, ""},
	{"menu request", routeMessageReceived,
		msg(`{"type":"contextual-menu-request","id":"c1","connectionId":"c1"}`),
		channel.MenuRequested{Conn: "c1"}, ""},
	{"menu select", routeMessageReceived,
		msg(`{"type":"contextual-menu-select","id":"m6","connectionId":"c1","selectionId":"authenticate"}`),
		channel.MenuSelected{Conn: "c1", MessageID: "m6", OptionID: "authenticate"}, ""},
	{"answer, VS Agent v1.x (DIDComm threadId, our item id)", routeMessageReceived,
		msg(`{"type":"menu-select","id":"m7","connectionId":"c1","threadId":"didcomm-thread","menuItems":[{"id":"` + qid + `:Yes"}]}`),
		channel.QuestionAnswered{Conn: "c1", MessageID: "m7", QuestionID: qid, Response: "Yes"}, ""},
	{"answer with a colon in the option", routeMessageReceived,
		msg(`{"type":"menu-select","id":"m8","connectionId":"c1","threadId":"` + qid + `","menuItems":[{"id":"` + qid + `:Later: tomorrow"}]}`),
		channel.QuestionAnswered{Conn: "c1", MessageID: "m8", QuestionID: qid, Response: "Later: tomorrow"}, ""},
	{"answer, foreign item id and content (spec)", routeMessageReceived,
		msg(`{"type":"menu-select","id":"m9","connectionId":"c1","threadId":"q-1","menuItems":[{"id":"github"}],"content":"⚠️ github"}`),
		channel.QuestionAnswered{Conn: "c1", MessageID: "m9", QuestionID: "q-1", Response: "⚠️ github"}, ""},
	{"answer, bare text as item id (VS Agent lost its table)", routeMessageReceived,
		msg(`{"type":"menu-select","id":"m10","connectionId":"c1","threadId":"q-1","menuItems":[{"id":"No"}]}`),
		channel.QuestionAnswered{Conn: "c1", MessageID: "m10", QuestionID: "q-1", Response: "No"}, ""},
	{"profile", routeMessageReceived,
		msg(`{"type":"profile","id":"m11","connectionId":"c1","displayName":"Ana","description":"hi","preferredLanguage":"es","displayImageUrl":"data:image/png;base64,AAAA"}`),
		channel.ProfileReceived{Conn: "c1", DisplayName: "Ana", Description: "hi", PreferredLanguage: "es"}, ""},
	{"profile from refdriver", routeMessageReceived,
		`{"type":"message-received","timestamp":"2026-03-01T10:20:30.123Z","message":{"type":"profile","id":"6d1f7d0c-8b1e-4f4e-9f59-2b1b8c1d2e3f","connectionId":"c1","timestamp":"2026-03-01T10:20:30.123Z","displayName":"bench-user","preferredLanguage":"en"}}`,
		channel.ProfileReceived{Conn: "c1", DisplayName: "bench-user", PreferredLanguage: "en"}, ""},
	{"profile with nulls", routeMessageReceived,
		msg(`{"type":"profile","connectionId":"c1","displayName":null,"preferredLanguage":null}`),
		channel.ProfileReceived{Conn: "c1"}, ""},
	{"proof verified", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","id":"m12","connectionId":"c1","threadId":"r1","submittedProofItems":[{"id":"t","type":"verifiable-credential","proofExchangeId":"p","verified":true,"claims":[{"name":"name","value":"alice"},{"name":"email","value":"alice@example.org"}]}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.Verified, Claims: map[string]any{"name": "alice", "email": "alice@example.org"}}, ""},
	{"proof verified, no claims", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":true}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.Verified, Claims: map[string]any{}}, ""},
	{"proof verified, numeric claim", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":true,"claims":[{"name":"age","value":12345678901234567890}]}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.Verified, Claims: map[string]any{"age": json.Number("12345678901234567890")}}, ""},
	{"proof, two verified items", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":true,"claims":[{"name":"a","value":"1"}]},{"verified":true,"claims":[{"name":"b","value":"2"},{"name":"a","value":"1"}]}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.Verified, Claims: map[string]any{"a": "1", "b": "2"}}, ""},
	{"proof, no compatible credential", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"id":"t","proofExchangeId":"p","errorCode":"e.req.no-compatible-credentials"}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.NoCredential, Reason: "no compatible credential"}, ""},
	{"proof declined", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"id":"t","proofExchangeId":"p","errorCode":"Request declined"}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.Declined, Reason: "declined by the user"}, ""},
	{"proof, other error code", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"errorCode":"e.msg.timeout"}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: `error code "e.msg.timeout"`}, ""},
	{"proof not verified", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":false,"claims":[{"name":"name","value":"mallory"}]}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "not verified by the VS Agent"}, ""},
	{"proof, verified missing", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"type":"verifiable-credential","claims":[{"name":"name","value":"mallory"}]}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "no verified flag"}, ""},
	{"proof, verified null", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":null}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "no verified flag"}, ""},
	{"proof, verified as a string", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":"true"}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "verified flag is not a boolean"}, ""},
	{"proof, verified in another case", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"Verified":true}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "no verified flag"}, ""},
	{"proof, verified with an error code", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":true,"errorCode":"e.x.revoked","claims":[{"name":"name","value":"alice"}]}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: `error code "e.x.revoked"`}, ""},
	{"proof, verified with an empty error code", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":true,"errorCode":""}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "empty errorCode"}, ""},
	{"proof, verified with a numeric error code", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":true,"errorCode":7}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "malformed errorCode"}, ""},
	{"proof, verified and declined", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":true,"errorCode":"Request declined"}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.Declined, Reason: "declined by the user"}, ""},
	{"proof, one item of two not verified", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":true,"claims":[{"name":"a","value":"1"}]},{"verified":false}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "item 2: not verified by the VS Agent"}, ""},
	{"proof, conflicting claims", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":true,"claims":[{"name":"roles","value":"guest"},{"name":"roles","value":"admin"}]}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: `conflicting values for claim "roles"`}, ""},
	{"proof, malformed claims", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":true,"claims":{"name":"alice"}}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "malformed claims"}, ""},
	{"proof, nameless claim", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[{"verified":true,"claims":[{"value":"alice"}]}]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "claim without name"}, ""},
	{"proof, no items", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":[]}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "no submitted proof items"}, ""},
	{"proof, items missing", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1"}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "malformed submittedProofItems"}, ""},
	{"proof, items not a list", routeMessageReceived,
		msg(`{"type":"identity-proof-submit","connectionId":"c1","threadId":"r1","submittedProofItems":{"verified":true}}`),
		channel.PresentationResult{Conn: "c1", Outcome: channel.VerificationFailed, Reason: "malformed submittedProofItems"}, ""},
	{"receipts", routeMessageReceived,
		msg(`{"type":"receipts","connectionId":"c1","receipts":[{"messageId":"o1","state":"viewed","timestamp":"2026-03-01T10:20:30.123Z"}]}`),
		nil, "1 receipts"},
	{"message state", routeMessageState,
		`{"type":"message-state-updated","messageId":"o1","connectionId":"c1","state":"viewed","timestamp":"2026-03-01T10:20:30.123Z"}`,
		nil, "message o1 viewed"},
	{"unsupported type", routeMessageReceived,
		msg(`{"type":"media","connectionId":"c1","items":[{"uri":"https://x"}]}`),
		nil, "unsupported message type"},
}

func TestDecodeWebhook(t *testing.T) {
	for _, tc := range inboundCases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := decodeWebhook(tc.route, []byte(tc.body))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(withoutDigest(t, d.Event), tc.want) {
				t.Fatalf("event\n got %#v\nwant %#v", d.Event, tc.want)
			}
			if d.Conn != "c1" {
				t.Errorf("conn %q", d.Conn)
			}
			if tc.want == nil && !strings.Contains(d.Note, tc.note) {
				t.Errorf("note %q, want it to contain %q", d.Note, tc.note)
			}
		})
	}
}

type badCase struct {
	name, route, body, reason string
}

// badCases: bad input and the reason it is refused with.
var badCases = []badCase{
	{"empty body", routeMessageReceived, ``, "malformed JSON at byte 0"},
	{"not JSON", routeConnectionState, `hello`, "malformed JSON at byte 1"},
	{"truncated", routeMessageReceived, `{"type":"message-received","message":{"type":"text"`, "malformed JSON"},
	{"trailing garbage", routeConnectionState, `{"connectionId":"c1","state":"completed"} {}`, "malformed JSON"},
	{"array", routeMessageState, `[]`, "body: want object, got array"},
	{"no message", routeMessageReceived, `{"type":"message-received"}`, "no message"},
	{"null message", routeMessageReceived, `{"type":"message-received","message":null}`, "no message"},
	{"message not an object", routeMessageReceived, `{"message":"text"}`, "want"},
	{"wrong envelope type", routeMessageReceived, `{"type":"connection-state-updated","message":{"type":"text","connectionId":"c1","content":"x"}}`, "webhook type is not message-received"},
	{"message without type", routeMessageReceived, msg(`{"connectionId":"c1","content":"x"}`), "message has no type"},
	{"message without connection", routeMessageReceived, msg(`{"type":"text","content":"s3cret"}`), "no connectionId"},
	{"unknown type without connection", routeMessageReceived, msg(`{"type":"media"}`), "no connectionId"},
	{"numeric connection", routeMessageReceived, msg(`{"type":"text","connectionId":42,"content":"x"}`), "connectionId: want string, got number"},
	{"connection with control characters", routeConnectionState, `{"connectionId":"c1\n","state":"completed"}`, "control characters"},
	{"connection too long", routeConnectionState, `{"connectionId":"` + strings.Repeat("c", 300) + `","state":"completed"}`, "longer than"},
	{"text without content", routeMessageReceived, msg(`{"type":"text","connectionId":"c1"}`), "text message has no content"},
	{"text with numeric content", routeMessageReceived, msg(`{"type":"text","connectionId":"c1","content":7}`), "content: want string, got number"},
	{"menu select without selection", routeMessageReceived, msg(`{"type":"contextual-menu-select","connectionId":"c1"}`), "no selectionId"},
	{"answer without question", routeMessageReceived, msg(`{"type":"menu-select","connectionId":"c1","menuItems":[{"id":"Yes"}]}`), "names no question"},
	{"answer without answer", routeMessageReceived, msg(`{"type":"menu-select","connectionId":"c1","threadId":"q"}`), "no answer"},
	{"proof without request id", routeMessageReceived, msg(`{"type":"identity-proof-submit","connectionId":"c1","submittedProofItems":[{"verified":true}]}`), "no threadId"},
	{"connection state without connection", routeConnectionState, `{"type":"connection-state-updated","state":"completed"}`, "no connectionId"},
	{"connection state without state", routeConnectionState, `{"type":"connection-state-updated","connectionId":"c1"}`, "no state"},
	{"connection state of another type", routeConnectionState, `{"type":"message-received","connectionId":"c1","state":"completed"}`, "webhook type is not"},
	{"message state without connection", routeMessageState, `{"type":"message-state-updated","messageId":"o1","state":"viewed"}`, "no connectionId"},
	{"unknown route", "other", `{}`, "unknown route"},
}

func TestDecodeWebhookBadInput(t *testing.T) {
	for _, tc := range badCases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := decodeWebhook(tc.route, []byte(tc.body))
			var b *badInput
			if !errors.As(err, &b) {
				t.Fatalf("got %+v, %v; want a bad input error", d, err)
			}
			if !strings.Contains(b.reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", b.reason, tc.reason)
			}
			if strings.Contains(b.reason, "s3cret") {
				t.Errorf("reason %q quotes the body", b.reason)
			}
			if !reflect.DeepEqual(d, decoded{}) {
				t.Errorf("decoded %+v with an error", d)
			}
		})
	}
}

func TestOptionID(t *testing.T) {
	for _, text := range []string{"Yes", "No: never", "⚠️ github", " "} {
		q, got, ok := parseOptionID(optionID(qid, text))
		if !ok || q != qid || got != text {
			t.Errorf("round trip of %q: %q %q %v", text, q, got, ok)
		}
	}
	for _, id := range []string{"", "Yes", qid, qid + ":", "not-a-uuid:Yes", strings.ToUpper(qid)[:35] + ":x"} {
		if q, text, ok := parseOptionID(id); ok {
			t.Errorf("parseOptionID(%q) = %q %q, want not ours", id, q, text)
		}
	}
}

var fuzzRoutes = []string{routeMessageReceived, routeConnectionState, routeMessageState}

// FuzzWebhook: the decoder never panics and returns either a valid webhook or a bad input
// error; a Verified result always comes from a body that says "verified": true.
func FuzzWebhook(f *testing.F) {
	for _, tc := range inboundCases {
		f.Add(uint8(routeIndex(tc.route)), []byte(tc.body))
	}
	for _, tc := range badCases {
		f.Add(uint8(routeIndex(tc.route)), []byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, r uint8, body []byte) {
		route := fuzzRoutes[int(r)%len(fuzzRoutes)]
		d, err := decodeWebhook(route, body)
		if err != nil {
			var b *badInput
			if !errors.As(err, &b) || b.reason == "" {
				t.Fatalf("error %v is not a bad input with a reason", err)
			}
			if !reflect.DeepEqual(d, decoded{}) {
				t.Fatalf("decoded %+v with an error", d)
			}
			return
		}
		if checkConn(d.Conn) != nil {
			t.Fatalf("accepted connection id %q", d.Conn)
		}
		if d.Event == nil {
			if d.Note == "" {
				t.Fatal("no event and no note")
			}
			return
		}
		if d.Event.Connection() != d.Conn {
			t.Fatalf("event of %q, webhook of %q", d.Event.Connection(), d.Conn)
		}
		if p, ok := d.Event.(channel.PresentationResult); ok {
			switch p.Outcome {
			case channel.Verified:
				if !strings.Contains(string(body), `"verified"`) || p.Reason != "" {
					t.Fatalf("verified %+v from %q", p, body)
				}
			case channel.NoCredential, channel.Declined, channel.VerificationFailed:
				if len(p.Claims) != 0 || p.Reason == "" {
					t.Fatalf("failed result %+v", p)
				}
			default:
				t.Fatalf("outcome %q", p.Outcome)
			}
		}
	})
}

func routeIndex(route string) int {
	for i, r := range fuzzRoutes {
		if r == route {
			return i
		}
	}
	return 0
}

package didcomm

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/btcsuite/btcutil/base58"
)

// TestRoutingKeyShapes: every way a wallet may write a routing key becomes the same did:key.
func TestRoutingKeyShapes(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := didKey(pub)
	multi := strings.TrimPrefix(want, "did:key:")
	// A mediator's did:peer:2 holding the key as its first V key.
	svc := base64.RawURLEncoding.EncodeToString([]byte(`{"t":"dm","s":"ws://m.example","a":["didcomm/aip2;env=rfc19"]}`))
	mediator := "did:peer:2.V" + multi + ".S" + svc
	const self = "did:peer:4zQmSelf"
	keys := map[string][]byte{"#key-2": pub}
	for _, rk := range []string{want, want + "#" + multi, base58.Encode(pub), "#key-2", self + "#key-2", mediator + "#key-1"} {
		got, err := routingKeyDIDKey(rk, self, keys)
		if err != nil || got != want {
			t.Errorf("%s: %s, %v; want %s", rk, got, err, want)
		}
	}
	for _, rk := range []string{"", "#key-9", "did:web:mediator.example#key-1", mediator, "did:key:z6LSbysY2xFMRpGMhb7tFTLMpeuPRaqaWM1yECx2AtzE3KCc", "not base58 0OIl"} {
		if got, err := routingKeyDIDKey(rk, self, keys); err == nil {
			t.Errorf("%q gave %s", rk, got)
		}
	}
}

// TestServiceSelection: Credo's abbreviated "dm" service with an object endpoint, references
// and a routing key becomes one did-communication service; a DIDComm v2-only service and a
// queue endpoint are left out; none usable is an error naming each reason.
func TestServiceSelection(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]byte{"#key-1": pub}
	const did = "did:peer:2.x"
	svcs := []peerService{
		{ID: "#queue", Type: "did-communication", ServiceEndpoint: "didcomm:transport/queue", RecipientKeys: []string{"#key-1"}},
		{ID: "#v2", Type: "DIDCommMessaging", ServiceEndpoint: map[string]any{"uri": "https://v2.example", "accept": []any{"didcomm/v2"}}},
		{ID: "#dm", Type: "DIDCommMessaging", Priority: 1, RecipientKeys: []string{"#key-1"},
			ServiceEndpoint: map[string]any{"uri": "wss://mediator.example/ws", "routingKeys": []any{didKey(pub) + "#x"}}},
	}
	got, err := usableServices(did, svcs, keys)
	if err != nil || len(got) != 1 {
		t.Fatalf("services %+v, %v", got, err)
	}
	s := got[0]
	if s.Type != "did-communication" || s.ServiceEndpoint != "wss://mediator.example/ws" || s.RecipientKeys[0] != didKey(pub) || s.RoutingKeys[0] != didKey(pub) {
		t.Fatalf("service %+v", s)
	}
	if _, err := usableServices(did, svcs[:2], keys); err == nil || !strings.Contains(err.Error(), "transport/queue") {
		t.Fatalf("no usable service: %v", err)
	}
}

// TestForwardTo: the "to" of afgo's forward is rewritten as a base58 key; the wrapped envelope
// and any other message are left alone.
func TestForwardTo(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	in := `{"@type":"` + typeForward + `","@id":"1","to":"` + didKey(pub) + `","msg":{"protected":"p","iv":"i","ciphertext":"c","tag":"t"}}`
	out, err := forwardTo([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		To  string         `json:"to"`
		Msg map[string]any `json:"msg"`
	}
	if err := json.Unmarshal(out, &m); err != nil || m.To != base58.Encode(pub) || m.Msg["ciphertext"] != "c" {
		t.Fatalf("forward %s (%v)", out, err)
	}
	other := []byte(`{"@type":"https://didcomm.org/basicmessage/1.0/message","content":"to: did:key:z6Mk"}`)
	if out, err := forwardTo(other); err != nil || string(out) != string(other) {
		t.Fatalf("basic message changed: %s %v", out, err)
	}
}

// FuzzRoutingKey: routing keys come from peers; no input panics, and what is accepted is an
// Ed25519 did:key.
func FuzzRoutingKey(f *testing.F) {
	for _, s := range []string{"did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp#z6Mk", "#key-1",
		"did:peer:2.Vz6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp#key-1", "8HH5gYEeNc3z7PYXmd54d4x6qAfCNrqQqEB3nS7Zfu7K", "did:web:x#k"} {
		f.Add(s)
	}
	keys := map[string][]byte{"#key-1": make([]byte, 32)}
	f.Fuzz(func(t *testing.T, rk string) {
		got, err := routingKeyDIDKey(rk, "did:peer:4zQmSelf", keys)
		if err != nil {
			return
		}
		if _, err := didKeyPublic(got); err != nil {
			t.Fatalf("%q gave %q, not an Ed25519 did:key", rk, got)
		}
	})
}

// FuzzForwardUnwrap: the forward rewrite and the undelivered-report parser take any bytes.
func FuzzForwardUnwrap(f *testing.F) {
	f.Add([]byte(`{"@type":"https://didcomm.org/routing/1.0/forward","to":"did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp","msg":{}}`))
	f.Add([]byte("x [undelivered reason=refused endpoint=ws://h] y"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if out, err := forwardTo(b); err == nil && out == nil {
			t.Fatal("nil output without an error")
		}
		if reason, _, ok := parseUndelivered(string(b)); ok && reason == "" {
			t.Fatal("ok without a reason")
		}
	})
}

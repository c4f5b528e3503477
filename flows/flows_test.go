package flows_test

import (
	"encoding/json"
	"testing"

	"github.com/packbot/packbot/flows"
)

func TestFingerprintIgnoresKeyOrderAndSpace(t *testing.T) {
	a := flows.Fingerprint("bank", "send_money", json.RawMessage(`{"amount": 5, "recipient":"rcp-globex"}`), "ana@acme.corp")
	b := flows.Fingerprint("bank", "send_money", json.RawMessage(`{"recipient":"rcp-globex","amount":5}`), "ana@acme.corp")
	if a != b || len(a) != 64 {
		t.Fatalf("fingerprints %s %s", a, b)
	}
	for _, other := range []string{
		flows.Fingerprint("bank", "send_money", json.RawMessage(`{"recipient":"rcp-globex","amount":6}`), "ana@acme.corp"),
		flows.Fingerprint("bank", "send_money", json.RawMessage(`{"recipient":"rcp-globex","amount":5}`), "bob@acme.corp"),
		flows.Fingerprint("bank2", "send_money", json.RawMessage(`{"recipient":"rcp-globex","amount":5}`), "ana@acme.corp"),
	} {
		if other == a {
			t.Fatal("different calls share a fingerprint")
		}
	}
	if flows.Fingerprint("s", "t", nil, "") != flows.Fingerprint("s", "t", json.RawMessage(` {} `), "") {
		t.Fatal("no arguments and {} differ")
	}
}

func TestDisplayName(t *testing.T) {
	for _, c := range []struct {
		claims map[string]any
		want   string
	}{
		{map[string]any{"name": " Ana "}, "Ana"},
		{map[string]any{"firstName": "Ana", "lastName": "Ruiz"}, "Ana Ruiz"},
		{map[string]any{"givenName": "Bo", "familyName": ""}, "Bo"},
		{map[string]any{"first_name": "Cy", "last_name": "Do"}, "Cy Do"},
		{map[string]any{"email": "x@y"}, ""},
	} {
		if got := flows.DisplayName(c.claims); got != c.want {
			t.Errorf("%v: %q, want %q", c.claims, got, c.want)
		}
	}
}

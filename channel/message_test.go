package channel_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/packbot/packbot/channel"
)

// TestProofRequestJSON: a proof request keeps its W3C and AnonCreds parts apart, round-trips
// through JSON, and outbox rows written before the split (one flat object mixing both
// families) still decode, each family into its own part.
func TestProofRequestJSON(t *testing.T) {
	both := channel.ProofRequest{ID: "p1", Purpose: "log in",
		W3C:       &channel.W3CRequest{CredentialType: "EmployeeCredential", Issuers: []string{"did:key:z6Mk"}, Formats: []string{"jwt"}},
		AnonCreds: &channel.AnonCredsRequest{CredentialDefinitionID: "cd-1", Attributes: []string{"email", "name"}}}
	for name, tc := range map[string]struct {
		stored string
		want   channel.ProofRequest
	}{
		"old flat, both families": {
			`{"id":"p1","purpose":"log in","credentialType":"EmployeeCredential","issuers":["did:key:z6Mk"],"formats":["jwt"],` +
				`"credentialDefinitionId":"cd-1","attributes":["email","name"]}`, both},
		"old flat, W3C with the attributes every request carried": {
			`{"id":"p2","credentialType":"EmployeeCredential","attributes":["email","name"]}`,
			channel.ProofRequest{ID: "p2", W3C: &channel.W3CRequest{CredentialType: "EmployeeCredential"}}},
		"old flat, AnonCreds": {
			`{"credentialDefinitionId":"cd-1","attributes":["email"]}`,
			channel.ProofRequest{AnonCreds: &channel.AnonCredsRequest{CredentialDefinitionID: "cd-1", Attributes: []string{"email"}}}},
		"new": {mustJSON(t, both), both},
	} {
		t.Run(name, func(t *testing.T) {
			var got channel.ProofRequest
			if err := json.Unmarshal([]byte(tc.stored), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decoded %s\n got %+v (w3c %+v, anoncreds %+v)\nwant %+v", tc.stored, got, got.W3C, got.AnonCreds, tc.want)
			}
		})
	}
	// An old outbox row holds the request inside an Outbound.
	var o channel.Outbound
	if err := json.Unmarshal([]byte(`{"proofRequest":{"id":"p3","credentialType":"EmployeeCredential"}}`), &o); err != nil {
		t.Fatal(err)
	}
	if o.ProofRequest == nil || o.ProofRequest.W3C == nil || o.ProofRequest.W3C.CredentialType != "EmployeeCredential" || o.ID() != "p3" {
		t.Errorf("old outbox row decoded to %+v", o.ProofRequest)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

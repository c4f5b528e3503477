package credential

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/hyperledger/aries-framework-go/pkg/doc/presexch"
)

func TestDefinition(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name    string
		formats []string
		ldpVC   bool
		jwtVC   bool
	}{
		{"both formats by default", nil, true, true},
		{"jsonld only", []string{FormatJSONLD}, true, false},
		{"jwt only", []string{FormatJWT}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := f.policy()
			p.Formats = tt.formats
			def, err := Definition(p, "Log in to the bot")
			if err != nil {
				t.Fatal(err)
			}
			var pd presexch.PresentationDefinition
			if err := json.Unmarshal(def, &pd); err != nil {
				t.Fatal(err)
			}
			if err := pd.ValidateSchema(); err != nil {
				t.Fatalf("definition %s is not a valid DIF definition: %v", def, err)
			}
			d := pd.InputDescriptors[0]
			if pd.Purpose != "Log in to the bot" || pd.Format.LdpVP == nil || d.Name != testType ||
				(d.Format.LdpVC != nil) != tt.ldpVC || (d.Format.JwtVC != nil) != tt.jwtVC {
				t.Errorf("definition %s", def)
			}
			again, err := Definition(p, "Log in to the bot")
			if err != nil || string(again) != string(def) {
				t.Errorf("definition is not deterministic: %s vs %s", again, def)
			}
			back, err := PolicyFromDefinition(def)
			if err != nil {
				t.Fatal(err)
			}
			want := p
			if want.Formats == nil {
				want.Formats = []string{FormatJSONLD, FormatJWT}
			}
			if back.Type != want.Type || !slices.Equal(back.Issuers, want.Issuers) || !slices.Equal(back.Formats, want.Formats) {
				t.Errorf("PolicyFromDefinition = %+v, want %+v", back, want)
			}
		})
	}
	for name, p := range map[string]Policy{
		"no type":        {Issuers: []string{f.issuer.DID()}},
		"no issuer":      {Type: testType},
		"unknown format": {Type: testType, Issuers: []string{f.issuer.DID()}, Formats: []string{"mdoc"}},
	} {
		if _, err := Definition(p, ""); err == nil {
			t.Errorf("Definition(%s) succeeded", name)
		}
	}
	for name, def := range map[string]string{
		"not JSON":       `{`,
		"no descriptors": `{"id":"x","input_descriptors":[]}`,
		"no type":        `{"id":"x","input_descriptors":[{"id":"a","constraints":{"fields":[{"path":["$.name"]}]}}]}`,
	} {
		if _, err := PolicyFromDefinition([]byte(def)); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("PolicyFromDefinition(%s) = %v", name, err)
		}
	}
}

// TestSubmitAndCheck: the holder answers a definition with the credential that meets it, the
// submission checks out, and Verify accepts the presentation.
func TestSubmitAndCheck(t *testing.T) {
	f := newFixture(t)
	library := f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.Types = []string{"LibraryCard"} })
	untrusted := f.issue(t, f.other, FormatJSONLD, nil)
	ld := f.issue(t, f.issuer, FormatJSONLD, nil)
	jwt := f.issue(t, f.issuer, FormatJWT, nil)
	tests := []struct {
		name    string
		formats []string
		creds   [][]byte
		want    string // format of the submitted credential
	}{
		{"jsonld", nil, [][]byte{library, untrusted, ld}, FormatJSONLD},
		{"jwt only", []string{FormatJWT}, [][]byte{library, ld, jwt}, FormatJWT},
		{"jwt JSON-quoted", []string{FormatJWT}, [][]byte{[]byte(`"` + string(jwt) + `"`)}, FormatJWT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := f.policy()
			p.Formats = tt.formats
			def, err := Definition(p, "")
			if err != nil {
				t.Fatal(err)
			}
			vp, err := Submit(f.holder, def, tt.creds, testChallenge, testDomain)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckSubmission(def, vp); err != nil {
				t.Fatalf("CheckSubmission: %v", err)
			}
			got, err := Verify(vp, testChallenge, testDomain, p, t0)
			if err != nil || got.Format != tt.want {
				t.Fatalf("Verify = %+v, %v", got, err)
			}
			var doc struct {
				VC []any `json:"verifiableCredential"`
			}
			if err := json.Unmarshal(vp, &doc); err != nil || len(doc.VC) != 1 {
				t.Errorf("submitted %d credentials, want 1 (%v)", len(doc.VC), err)
			}
		})
	}
	def, err := Definition(f.policy(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Submit(f.holder, def, [][]byte{library, untrusted}, testChallenge, testDomain); Reason(err) != "no-matching-credential" {
		t.Errorf("Submit without a matching credential: %v", err)
	}
}

func TestCheckSubmissionFailures(t *testing.T) {
	f := newFixture(t)
	def, err := Definition(f.policy(), "")
	if err != nil {
		t.Fatal(err)
	}
	var pd presexch.PresentationDefinition
	if err := json.Unmarshal(def, &pd); err != nil {
		t.Fatal(err)
	}
	ld := f.issue(t, f.issuer, FormatJSONLD, nil)
	library := f.issue(t, f.issuer, FormatJSONLD, func(r *IssueRequest) { r.Types = []string{"LibraryCard"} })
	submission := func(defID, descID string) presentOptions {
		return presentOptions{submission: map[string]any{"id": "s1", "definition_id": defID,
			"descriptor_map": []any{map[string]any{"id": descID, "format": "ldp_vc", "path": "$.verifiableCredential[0]"}}}}
	}
	tests := []struct {
		name   string
		vp     []byte
		reason string
	}{
		{"plain presentation", f.present(t, ld), "submission-mismatch"},
		{"another definition", f.presentWith(t, submission("other-definition", descriptorID), ld), "submission-mismatch"},
		{"unknown descriptor", f.presentWith(t, submission(pd.ID, "other-descriptor"), ld), "submission-mismatch"},
		{"path to nothing", mutateJSON(t, f.presentWith(t, submission(pd.ID, descriptorID), ld), func(m map[string]any) {
			m["verifiableCredential"] = []any{}
		}), "submission-mismatch"},
		{"credential of another type", f.presentWith(t, submission(pd.ID, descriptorID), library), "submission-mismatch"},
		{"not JSON", []byte("{"), "malformed"},
		{"SD-JWT credential", mutateJSON(t, f.presentWith(t, submission(pd.ID, descriptorID), ld), func(m map[string]any) {
			m["verifiableCredential"] = []any{"eyJhbGciOiJFZERTQSJ9.eyJ2YyI6e319.c2ln~WyJzYWx0Il0~"}
		}), "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckSubmission(def, tt.vp); Reason(err) != tt.reason {
				t.Fatalf("CheckSubmission = %v (reason %q), want %q", err, Reason(err), tt.reason)
			}
		})
	}
}

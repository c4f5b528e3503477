package channel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/packbot/packbot/channel"
)

const receiptVC = `{"@context":["https://www.w3.org/2018/credentials/v1"],"type":["VerifiableCredential","PackbotReceipt"],` +
	`"issuer":"did:key:z6Mk","credentialSubject":{"tool":"send_money"},"proof":{"type":"Ed25519Signature2018"}}`

// textOnly is a channel that can only send texts; it keeps what it sent.
type textOnly struct{ sent []channel.Text }

func (*textOnly) Name() string                               { return "text-only" }
func (*textOnly) Run(context.Context, channel.Handler) error { return nil }
func (*textOnly) Close() error                               { return nil }
func (c *textOnly) SendText(_ context.Context, _ string, t channel.Text) (string, error) {
	c.sent = append(c.sent, t)
	return t.ID, nil
}

// offerer also offers credentials.
type offerer struct {
	textOnly
	offered []channel.CredentialOffer
}

func (c *offerer) OfferCredential(_ context.Context, _ string, o channel.CredentialOffer) error {
	c.offered = append(c.offered, o)
	return nil
}

// TestOfferFallsBackToText: a channel that offers credentials gets the offer; any other gets a
// text the user can keep (its comment, then the credential), from which the credential is
// found again, byte for byte what was signed but for its spacing.
func TestOfferFallsBackToText(t *testing.T) {
	pretty, err := json.MarshalIndent(json.RawMessage(receiptVC), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	o := channel.Outbound{Credential: &channel.CredentialOffer{ID: "r1", Comment: "Receipt of send_money.\n\nKeep it.", Credential: pretty}}
	if o.ID() != "r1" || o.Type() != "credential-offer" {
		t.Fatalf("ID %q, Type %q", o.ID(), o.Type())
	}
	var co offerer
	if err := channel.Send(t.Context(), &co, "c1", o); err != nil || len(co.offered) != 1 || len(co.sent) != 0 {
		t.Fatalf("offerer: err %v, offered %d, texts %d", err, len(co.offered), len(co.sent))
	}
	if !channel.CapabilitiesOf(&co).Credentials || channel.CapabilitiesOf(&co.textOnly).Credentials {
		t.Fatal("Capabilities.Credentials does not follow CredentialOfferer")
	}
	var to textOnly
	if err := channel.Send(t.Context(), &to, "c1", o); err != nil || len(to.sent) != 1 {
		t.Fatalf("text-only: err %v, texts %d", err, len(to.sent))
	}
	if to.sent[0].ID != "r1" {
		t.Errorf("text id %q, want the offer's", to.sent[0].ID)
	}
	got, ok := channel.CredentialInText(to.sent[0].Content)
	if !ok || string(got) != receiptVC {
		t.Fatalf("credential in %q: %s, %v", to.sent[0].Content, got, ok)
	}
	for _, text := range []string{"", "hello", "Receipt.\n\n{not json}", `{"credentialSubject":{}}`, "x\n\n[1]"} {
		if _, ok := channel.CredentialInText(text); ok {
			t.Errorf("CredentialInText(%q) found a credential", text)
		}
	}
}

// FuzzCredentialInText: any text is read without a panic, and what is found is a JSON object.
func FuzzCredentialInText(f *testing.F) {
	f.Add("Receipt.\n\n" + receiptVC)
	f.Add(receiptVC)
	f.Add("\n\n{")
	f.Fuzz(func(t *testing.T, text string) {
		if got, ok := channel.CredentialInText(text); ok && !json.Valid(got) {
			t.Fatalf("found %q, not JSON", got)
		}
	})
}

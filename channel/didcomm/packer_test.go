package didcomm

import (
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/crypto/curve25519"

	"github.com/hyperledger/aries-framework-go/pkg/didcomm/packer"
	legacyanoncrypt "github.com/hyperledger/aries-framework-go/pkg/didcomm/packer/legacy/anoncrypt"
	legacyauthcrypt "github.com/hyperledger/aries-framework-go/pkg/didcomm/packer/legacy/authcrypt"
	"github.com/hyperledger/aries-framework-go/pkg/kms"
)

// TestEd25519ToX25519 checks the public-key conversion against the X25519 key derived from the
// same secret (SHA-512 of the seed, clamped by X25519).
func TestEd25519ToX25519(t *testing.T) {
	for range 50 {
		pub, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		h := sha512.Sum512(priv.Seed())
		want, err := curve25519.X25519(h[:32], curve25519.Basepoint)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ed25519PublicToX25519(pub)
		if err != nil || string(got) != string(want) {
			t.Fatalf("converted %x, want %x (%v)", got, want, err)
		}
	}
	if _, err := ed25519PublicToX25519(make([]byte, 31)); err == nil {
		t.Fatal("a 31-byte key converted")
	}
}

func TestDecodeBase58RefusesOtherCharacters(t *testing.T) {
	for _, s := range []string{"", "0OIl", "abc\xff", "ÿ"} {
		if _, err := decodeBase58(s); err == nil {
			t.Errorf("%q decoded", s)
		}
	}
	if b, err := decodeBase58("3yZe7d"); err != nil || string(b) != "test" {
		t.Fatalf("%q %v", b, err)
	}
}

// TestEnvelopeShape: what packbot packs is what Credo accepts (unpadded base64url, the
// xchacha20poly1305_ietf label); what afgo's stock legacy packers produce (padded base64,
// chacha20poly1305_ietf) is still opened, for authcrypt and anoncrypt.
func TestEnvelopeShape(t *testing.T) {
	bot := startBot(t, testStores(t)["SQLite"](t), nil, "")
	prov := bot.ch.a.ctx
	newKey := func() []byte {
		_, pub, err := prov.KMS().CreateAndExportPubKeyBytes(kms.ED25519Type)
		if err != nil {
			t.Fatal(err)
		}
		return pub
	}
	sender, recipient := newKey(), newKey()
	payload := []byte(`{"@type":"https://didcomm.org/basicmessage/1.0/message","@id":"x","content":"hé"}`)
	ours := func(auth bool) *rfc0019Packer {
		return &rfc0019Packer{kms: prov.KMS(), authcrypt: auth, fix: &interopFixer{}}
	}

	for _, tt := range []struct {
		name   string
		auth   bool
		legacy packer.Packer
	}{
		{"authcrypt", true, legacyauthcrypt.New(prov)},
		{"anoncrypt", false, legacyanoncrypt.New(prov)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var from []byte
			if tt.auth {
				from = sender
			}
			env, err := ours(tt.auth).Pack("", payload, from, [][]byte{recipient})
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]string
			if err := json.Unmarshal(env, &fields); err != nil {
				t.Fatal(err)
			}
			for k, v := range fields {
				if strings.Contains(v, "=") {
					t.Errorf("%s is padded: %q", k, v)
				}
			}
			hdr, _ := base64.RawURLEncoding.DecodeString(fields["protected"])
			var h protectedHeader
			if err := json.Unmarshal(hdr, &h); err != nil || h.Enc != "xchacha20poly1305_ietf" || h.Typ != "JWM/1.0" {
				t.Fatalf("header %s (%v)", hdr, err)
			}
			out, err := ours(tt.auth).Unpack(env)
			if err != nil || string(out.Message) != string(payload) || string(out.FromKey) != string(from) {
				t.Fatalf("round trip: %+v %v", out, err)
			}

			legacyEnv, err := tt.legacy.Pack("", payload, from, [][]byte{recipient})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(legacyEnv), "=") {
				t.Log("note: this legacy envelope happens to need no padding")
			}
			out, err = ours(tt.auth).Unpack(legacyEnv)
			if err != nil || string(out.Message) != string(payload) {
				t.Fatalf("legacy envelope: %+v %v", out, err)
			}
			if _, err := ours(!tt.auth).Unpack(env); err == nil {
				t.Fatal("the other packer opened it")
			}
		})
	}
}

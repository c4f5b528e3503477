package audit

import (
	"testing"

	"github.com/packbot/packbot/store"
)

// FuzzPublicKey: any string is a did:key's public key or ErrNotEd25519DIDKey, never a panic;
// what it accepts is a key of the right size that names itself.
func FuzzPublicKey(f *testing.F) {
	k, err := KeyFromSeed(make([]byte, 32))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{k.DID(), k.DID() + "#x", "did:key:z", "did:key:z6Mk", "did:web:a", "", "did:key:zzzz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pub, err := PublicKey(s)
		if err == nil && (len(pub) != 32 || DIDKey(pub) == "") {
			t.Fatalf("PublicKey(%q) = %x", s, pub)
		}
	})
}

// FuzzParseCheckpoint: a checkpoint's body and signature, as read from the store, never make
// verification panic, and only the bot's signature of the row's own body passes.
func FuzzParseCheckpoint(f *testing.F) {
	k, err := KeyFromSeed(make([]byte, 32))
	if err != nil {
		f.Fatal(err)
	}
	good := []byte(`{"v":1,"seq":1,"at":1,"prev":"","signer":"` + k.DID() + `","lanes":[{"lane":1,"seq":2,"id":3,"hash":"ab"}]}`)
	f.Add(good, k.Sign(good), int64(1))
	f.Add([]byte(`{"v":1}`), []byte{1, 2}, int64(0))
	f.Add([]byte(`[`), []byte{}, int64(-1))
	f.Fuzz(func(t *testing.T, body, sig []byte, seq int64) {
		c := store.AuditCheckpoint{Seq: seq, Signer: k.DID(), Body: body, Signature: sig}
		b, err := parseCheckpoint(c, nil)
		if err == nil && (b.Seq != seq || b.Signer != k.DID()) {
			t.Fatalf("accepted %s as checkpoint %d", body, seq)
		}
		_, _ = coverage(c, store.AuditLink{Lane: 1, Seq: 1})
	})
}

package credential

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hyperledger/aries-framework-go/pkg/vdr/fingerprint"
)

const (
	// ed25519PrivMultiCodec is the multicodec of an Ed25519 private key (its 32-byte seed),
	// as used by privateKeyMultibase in Multikey documents.
	ed25519PrivMultiCodec = 0x1300
	// ed25519Fingerprint is how every Ed25519 did:key method-specific id starts; its length is fixed.
	ed25519FingerprintPrefix = "z6Mk"
	ed25519FingerprintLen    = 48

	// DemoIssuerSeedPhrase is public. The demo issuer's seed is SHA-256 of this phrase, so anyone
	// can rebuild [DemoIssuer] and mint credentials it signs: trust it in demo packs only.
	DemoIssuerSeedPhrase = "packbot public demo issuer v1: anyone can mint demo credentials, for demos only"
)

// Key is an Ed25519 key pair with its did:key DID. The private half never leaves the value
// except through MarshalJSON (a key file); String, GoString and LogValue show the DID only.
// A Key is immutable and safe for concurrent use.
type Key struct {
	priv ed25519.PrivateKey
	did  string
	vm   string // verification method id: did#fingerprint
}

// GenerateKey returns a new random key.
func GenerateKey() (*Key, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return KeyFromSeed(seed)
}

// KeyFromSeed returns the key derived from a 32-byte Ed25519 seed.
func KeyFromSeed(seed []byte) (*Key, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("key seed has %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	did, vm := fingerprint.CreateDIDKey(priv.Public().(ed25519.PublicKey))
	return &Key{priv: priv, did: did, vm: vm}, nil
}

// DemoIssuer returns the public demo issuer, derived from [DemoIssuerSeedPhrase]. Its DID is
// stable across runs and machines:
//
//	did:key:z6Mkg5JPG6jzTYpXhDRGkPhBUkpauWtoXS2qoYGE5oEqaQY4
//
// Anyone can mint demo credentials with it: for demos only, never in a production pack.
func DemoIssuer() *Key {
	seed := sha256.Sum256([]byte(DemoIssuerSeedPhrase))
	k, err := KeyFromSeed(seed[:])
	if err != nil {
		panic(err) // a 32-byte seed cannot fail
	}
	return k
}

// DID returns the key's did:key DID.
func (k Key) DID() string { return k.did }

// VerificationMethod returns the id of the key's verification method (did:key:z…#z…), as found
// in a proof's verificationMethod or a JWS kid.
func (k Key) VerificationMethod() string { return k.vm }

// String returns the DID; it never prints the private key.
func (k Key) String() string { return k.did }

// GoString keeps %#v from printing the private key.
func (k Key) GoString() string { return fmt.Sprintf("credential.Key{DID: %q}", k.did) }

// LogValue logs the DID only.
func (k Key) LogValue() slog.Value { return slog.GroupValue(slog.String("did", k.did)) }

func (k *Key) public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// keyFile is the JSON form of a key: the DID (checked on load) and the seed as a Multikey
// privateKeyMultibase (base58btc, multicodec ed25519-priv 0x1300).
type keyFile struct {
	DID                 string `json:"did"`
	PrivateKeyMultibase string `json:"privateKeyMultibase"`
}

// MarshalJSON writes a key file, {"did": "did:key:z6Mk…", "privateKeyMultibase": "z3u2…"}.
// It holds the private key: store it like a password.
func (k *Key) MarshalJSON() ([]byte, error) {
	if k == nil || k.priv == nil {
		return nil, errors.New("marshal key: empty key")
	}
	return json.Marshal(keyFile{DID: k.did, PrivateKeyMultibase: fingerprint.KeyFingerprint(ed25519PrivMultiCodec, k.priv.Seed())})
}

// UnmarshalJSON reads a key file written by MarshalJSON. The DID is optional; when present it
// must be the key's own.
func (k *Key) UnmarshalJSON(b []byte) error {
	var f keyFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	if !strings.HasPrefix(f.PrivateKeyMultibase, "z") || !isBase58(f.PrivateKeyMultibase[1:]) {
		return errors.New("key file: privateKeyMultibase is not base58btc multibase")
	}
	seed, code, err := fingerprint.PubKeyFromFingerprint(f.PrivateKeyMultibase)
	if err != nil {
		return fmt.Errorf("key file: privateKeyMultibase: %w", err)
	}
	if code != ed25519PrivMultiCodec {
		return fmt.Errorf("key file: privateKeyMultibase has multicodec 0x%x, want ed25519-priv 0x%x", code, ed25519PrivMultiCodec)
	}
	nk, err := KeyFromSeed(seed)
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	if f.DID != "" && f.DID != nk.did {
		return fmt.Errorf("key file: did %q does not match the private key (%s)", f.DID, nk.did)
	}
	*k = *nk
	return nil
}

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

func isBase58(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune(base58Alphabet, r) {
			return false
		}
	}
	return s != ""
}

// didMethod returns the method of a DID ("key" for did:key:…), or "" if s is not a DID.
func didMethod(s string) string {
	rest, ok := strings.CutPrefix(s, "did:")
	if !ok {
		return ""
	}
	m, _, ok := strings.Cut(rest, ":")
	if !ok {
		return ""
	}
	return m
}

// publicKeyFromDID returns the Ed25519 public key of a did:key DID. Only did:key is resolved,
// locally; any other method fails with ErrUnsupportedDID.
func publicKeyFromDID(did string) (ed25519.PublicKey, error) {
	switch m := didMethod(did); m {
	case "key":
	case "":
		return nil, fmt.Errorf("%q is not a DID: %w", clip(did), ErrMalformed)
	default:
		return nil, fmt.Errorf("DID %q: method %q (only did:key is resolved, locally): %w", clip(did), clip(m), ErrUnsupportedDID)
	}
	id := strings.TrimPrefix(did, "did:key:")
	// Checked before afgo decodes it: a non-Ed25519 multicodec can panic afgo's decoder.
	if len(id) != ed25519FingerprintLen || !strings.HasPrefix(id, ed25519FingerprintPrefix) || !isBase58(id) {
		return nil, fmt.Errorf("DID %q is not an Ed25519 did:key: %w", clip(did), ErrUnsupportedDID)
	}
	pub, code, err := fingerprint.PubKeyFromFingerprint(id)
	if err != nil || code != fingerprint.ED25519PubKeyMultiCodec || len(pub) != ed25519.PublicKeySize ||
		fingerprint.KeyFingerprint(code, pub) != id {
		return nil, fmt.Errorf("DID %q is not an Ed25519 did:key: %w", clip(did), ErrUnsupportedDID)
	}
	return ed25519.PublicKey(pub), nil
}

// resolveVerificationMethod splits a did:key verification method id (did:key:X#X) into its DID
// and public key.
func resolveVerificationMethod(vm string) (string, ed25519.PublicKey, error) {
	did, frag, ok := strings.Cut(vm, "#")
	if !ok || frag == "" {
		if m := didMethod(vm); m != "" && m != "key" {
			return "", nil, fmt.Errorf("verification method %q: method %q: %w", clip(vm), clip(m), ErrUnsupportedDID)
		}
		return "", nil, fmt.Errorf("verification method %q is not a DID URL with a fragment: %w", clip(vm), ErrMalformed)
	}
	pub, err := publicKeyFromDID(did)
	if err != nil {
		return "", nil, err
	}
	if frag != strings.TrimPrefix(did, "did:key:") {
		return "", nil, fmt.Errorf("verification method %q is not the did:key's key: %w", clip(vm), ErrMalformed)
	}
	return did, pub, nil
}

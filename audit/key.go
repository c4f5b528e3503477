package audit

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/btcsuite/btcutil/base58"
)

// keyInfo names what the bot's signing key is derived for (HKDF info).
const keyInfo = "packbot bot signing key v1"

// Key is the bot's Ed25519 signing key and its did:key. It is immutable and safe for concurrent
// use; String, GoString and LogValue show the DID only.
type Key struct {
	priv ed25519.PrivateKey
	did  string
}

// KeyFromMaster derives the bot's signing key from the 32-byte DIDComm master key
// (PACKBOT_DIDCOMM_KEY, or the data folder's key file): HKDF-SHA256 with the info "packbot bot
// signing key v1" gives the Ed25519 seed. Every replica holding the master key signs as the
// same did:key; nothing else needs storing.
func KeyFromMaster(master []byte) (*Key, error) {
	if len(master) != 32 {
		return nil, fmt.Errorf("derive the bot's signing key: master key of %d bytes, want 32", len(master))
	}
	seed, err := hkdf.Key(sha256.New, master, nil, keyInfo, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("derive the bot's signing key: %w", err)
	}
	return KeyFromSeed(seed)
}

// macInfo names what the store's audit key is derived for (HKDF info).
const macInfo = "packbot audit mac key v1"

// MACKeyFromMaster derives the store's audit key (sqlstore.Options.AuditKey, [Options.MACKey])
// from the 32-byte DIDComm master key: HKDF-SHA256 with the info "packbot audit mac key v1".
// Every replica holding the master key MACs the records it writes under the same key.
func MACKeyFromMaster(master []byte) ([]byte, error) {
	if len(master) != 32 {
		return nil, fmt.Errorf("derive the audit key: master key of %d bytes, want 32", len(master))
	}
	k, err := hkdf.Key(sha256.New, master, nil, macInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("derive the audit key: %w", err)
	}
	return k, nil
}

// KeyFromSeed returns the key of a 32-byte Ed25519 seed.
func KeyFromSeed(seed []byte) (*Key, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("key seed of %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	return &Key{priv: priv, did: DIDKey(priv.Public().(ed25519.PublicKey))}, nil
}

// DID returns the key's did:key.
func (k *Key) DID() string { return k.did }

// Seed returns the key's Ed25519 seed (for a component that signs as the bot in another format,
// such as a verifiable credential's proof). Keep it secret.
func (k *Key) Seed() []byte { return k.priv.Seed() }

// Sign signs msg.
func (k *Key) Sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

// String returns the DID; it never prints the private key.
func (k *Key) String() string { return k.did }

// GoString keeps %#v from printing the private key.
func (k *Key) GoString() string { return fmt.Sprintf("audit.Key{DID: %q}", k.did) }

// LogValue logs the DID only.
func (k *Key) LogValue() slog.Value { return slog.GroupValue(slog.String("did", k.did)) }

// ed25519Codec is the multicodec prefix of an Ed25519 public key (varint 0xed).
var ed25519Codec = []byte{0xed, 0x01}

// DIDKey is the did:key of an Ed25519 public key.
func DIDKey(pub ed25519.PublicKey) string {
	return "did:key:z" + base58.Encode(append(append([]byte{}, ed25519Codec...), pub...))
}

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// ErrNotEd25519DIDKey: a DID is not the did:key of an Ed25519 key.
var ErrNotEd25519DIDKey = errors.New("not an Ed25519 did:key")

// PublicKey returns the Ed25519 public key of a did:key (a fragment is ignored).
func PublicKey(did string) (ed25519.PublicKey, error) {
	s, _, _ := strings.Cut(strings.TrimPrefix(did, "did:key:"), "#")
	// base58.Decode panics on characters outside its alphabet (a byte >= 128): check first.
	if !strings.HasPrefix(did, "did:key:z") || strings.Trim(s[1:], base58Alphabet) != "" {
		return nil, fmt.Errorf("%q: %w", did, ErrNotEd25519DIDKey)
	}
	b := base58.Decode(s[1:])
	if len(b) != 2+ed25519.PublicKeySize || b[0] != ed25519Codec[0] || b[1] != ed25519Codec[1] {
		return nil, fmt.Errorf("%q: %w", did, ErrNotEd25519DIDKey)
	}
	return ed25519.PublicKey(b[2:]), nil
}

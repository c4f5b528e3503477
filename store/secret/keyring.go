package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/packbot/packbot/store"
)

// Environment variables read by [KeyringFromEnv].
const (
	EnvKey     = "MCP_CONFIG_ENCRYPTION_KEY"
	EnvOldKeys = "MCP_CONFIG_ENCRYPTION_KEYS_OLD"
)

// Errors returned by this package; test with errors.Is.
var (
	// ErrNoKey means no current key is configured: user-controlled MCP configuration is off.
	ErrNoKey = errors.New(EnvKey + " is not set")
	// ErrMalformedKey means a key is not 64 hexadecimal characters.
	ErrMalformedKey = errors.New("malformed key: want 64 hexadecimal characters (openssl rand -hex 32)")
	// ErrUnknownKey means a row was sealed under a key id the keyring does not hold.
	ErrUnknownKey = errors.New("sealed under a key that is not configured")
	// ErrOpen means the ciphertext does not authenticate for this row: it was tampered with,
	// moved from another user, server or kind, or sealed under a different key with the same id.
	ErrOpen = errors.New("sealed value does not authenticate for this row (tampered, moved between rows, or wrong key)")
)

const keyIDPrefix = "packbot key id v1\x00"

// Key is a 256-bit AES key. Its String and LogValue show only its id; the key bytes sit behind a
// pointer so that printing a struct holding a Key in an unexported field shows no key material.
type Key struct {
	id  string
	raw *[32]byte
}

// ParseKey decodes a key written as 64 hexadecimal characters.
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		return Key{}, ErrMalformedKey
	}
	k := Key{raw: new([32]byte)}
	copy(k.raw[:], b)
	sum := sha256.Sum256(append([]byte(keyIDPrefix), k.raw[:]...))
	k.id = hex.EncodeToString(sum[:8])
	return k, nil
}

// GenerateKey reads a new key from r (crypto/rand.Reader when r is nil).
func GenerateKey(r io.Reader) (Key, error) {
	if r == nil {
		r = rand.Reader
	}
	var b [32]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return Key{}, fmt.Errorf("generate key: %w", err)
	}
	return ParseKey(hex.EncodeToString(b[:]))
}

// ID is the key's public identifier, recorded with every value it seals.
func (k Key) ID() string { return k.id }

// Hex is the key itself, for `packbot keys gen` to print once. Never log it.
func (k Key) Hex() string { return hex.EncodeToString(k.raw[:]) }

// String redacts the key.
func (k Key) String() string { return "key:" + k.id }

// GoString redacts the key.
func (k Key) GoString() string { return k.String() }

// LogValue redacts the key.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// Keyring seals with its current key and opens with any key it holds. It is immutable and safe
// for concurrent use.
type Keyring struct {
	current Key
	byID    map[string]cipher.AEAD
}

// NewKeyring returns a keyring sealing with current and opening with current and old.
func NewKeyring(current Key, old ...Key) (*Keyring, error) {
	kr := &Keyring{current: current, byID: make(map[string]cipher.AEAD)}
	for _, k := range append([]Key{current}, old...) {
		if k.id == "" || k.raw == nil {
			return nil, ErrMalformedKey
		}
		block, err := aes.NewCipher(k.raw[:])
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.id, err)
		}
		kr.byID[k.id] = aead
	}
	return kr, nil
}

// KeyringFromEnv builds the keyring from MCP_CONFIG_ENCRYPTION_KEY and the comma-separated
// MCP_CONFIG_ENCRYPTION_KEYS_OLD. It returns ErrNoKey when the current key is unset or empty,
// and an error naming the variable when a key is malformed.
func KeyringFromEnv(lookup func(string) (string, bool)) (*Keyring, error) {
	cur, ok := lookup(EnvKey)
	if !ok || strings.TrimSpace(cur) == "" {
		return nil, ErrNoKey
	}
	current, err := ParseKey(cur)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvKey, err)
	}
	var old []Key
	if s, ok := lookup(EnvOldKeys); ok {
		for i, part := range strings.Split(s, ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			k, err := ParseKey(part)
			if err != nil {
				return nil, fmt.Errorf("%s entry %d: %w", EnvOldKeys, i+1, err)
			}
			old = append(old, k)
		}
	}
	return NewKeyring(current, old...)
}

// CurrentKeyID is the id of the key new values are sealed with.
func (kr *Keyring) CurrentKeyID() string { return kr.current.id }

// Seal encrypts plaintext for the row k under the current key.
func (kr *Keyring) Seal(k store.CredentialKey, plaintext []byte) (store.Sealed, error) {
	aead := kr.byID[kr.current.id]
	nonce := make([]byte, aead.NonceSize())
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		return store.Sealed{}, fmt.Errorf("seal: read nonce: %w", err)
	}
	return store.Sealed{
		KeyID:      kr.current.id,
		Nonce:      nonce,
		Ciphertext: aead.Seal(nil, nonce, plaintext, additionalData(k)),
	}, nil
}

// Open decrypts a value sealed for the row k. It fails with ErrUnknownKey when the value's key
// is not in the keyring and with ErrOpen when it does not authenticate for k.
func (kr *Keyring) Open(k store.CredentialKey, s store.Sealed) ([]byte, error) {
	aead, ok := kr.byID[s.KeyID]
	if !ok {
		return nil, fmt.Errorf("open %s: key id %q: %w (add the old key to %s)", describe(k), s.KeyID, ErrUnknownKey, EnvOldKeys)
	}
	if len(s.Nonce) != aead.NonceSize() {
		return nil, fmt.Errorf("open %s: %w", describe(k), ErrOpen)
	}
	pt, err := aead.Open(nil, s.Nonce, s.Ciphertext, additionalData(k))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", describe(k), ErrOpen)
	}
	return pt, nil
}

// SealJSON encodes v as JSON and seals it for the row k: the one way packbot seals a
// structured secret (credential fields, OAuth grants, pending sign-ins, inbox events). The
// plaintext is wiped once sealed.
func (kr *Keyring) SealJSON(k store.CredentialKey, v any) (store.Sealed, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return store.Sealed{}, fmt.Errorf("seal %s: encode: %w", describe(k), err)
	}
	defer clear(b)
	return kr.Seal(k, b)
}

// OpenJSON opens s for the row k and decodes it into v (see [Keyring.Open] for its errors). The
// plaintext is wiped once decoded.
func (kr *Keyring) OpenJSON(k store.CredentialKey, s store.Sealed, v any) error {
	b, err := kr.Open(k, s)
	if err != nil {
		return err
	}
	defer clear(b)
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("open %s: decode: %w", describe(k), err)
	}
	return nil
}

// Reseal opens s for the row k and seals it again under the current key; it implements
// [store.Resealer].
func (kr *Keyring) Reseal(k store.CredentialKey, s store.Sealed) (store.Sealed, error) {
	pt, err := kr.Open(k, s)
	if err != nil {
		return store.Sealed{}, err
	}
	return kr.Seal(k, pt)
}

// additionalData binds a ciphertext to its row: a version label, then each field with its length,
// so that no two different rows give the same bytes.
func additionalData(k store.CredentialKey) []byte {
	b := []byte("packbot sealed credential v1\x00")
	for _, f := range []string{k.Identity, k.Server, k.Kind} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}

func describe(k store.CredentialKey) string {
	return fmt.Sprintf("credential (identity %q, server %q, kind %q)", k.Identity, k.Server, k.Kind)
}

var _ store.Resealer = (*Keyring)(nil)

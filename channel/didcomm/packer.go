package didcomm

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/btcsuite/btcutil/base58"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/hyperledger/aries-framework-go/pkg/didcomm/packer"
	"github.com/hyperledger/aries-framework-go/pkg/didcomm/transport"
	"github.com/hyperledger/aries-framework-go/pkg/doc/util/jwkkid"
	"github.com/hyperledger/aries-framework-go/pkg/kms"
	"github.com/hyperledger/aries-framework-go/pkg/kms/localkms"
)

// rfc0019Packer packs and unpacks DIDComm v1 envelopes (Aries RFC 0019) the way Credo-ts does,
// replacing afgo's legacy packers, which Credo cannot read and which cannot read Credo:
//   - base64url is written without padding (Credo's form) and read with or without;
//   - the content cipher is labelled "xchacha20poly1305_ietf" (the only label Credo accepts) and
//     either label is read; both mean the 12-byte-nonce ChaCha20-Poly1305 that afgo and Credo use;
//   - the content key is wrapped with crypto_box (authcrypt) or a sealed box (anoncrypt), with the
//     agent's keys kept in afgo's KMS.
//
// Interop fixes to DID exchange plaintexts (interop.go) are applied here, on the way in and out:
// this is the one hook between afgo's protocol code and the wire.
type rfc0019Packer struct {
	kms       kms.KeyManager
	authcrypt bool
	fix       *interopFixer
}

const (
	encLabel       = "xchacha20poly1305_ietf"
	encLabelLegacy = "chacha20poly1305_ietf"
	algAuthcrypt   = "Authcrypt"
	algAnoncrypt   = "Anoncrypt"
)

// newPackers returns the creators for aries.WithPacker: authcrypt first (the primary), then
// anoncrypt.
func newPackers(fix *interopFixer) (packer.Creator, packer.Creator) {
	auth := func(p packer.Provider) (packer.Packer, error) {
		fix.kms, fix.crypto = p.KMS(), p.Crypto()
		return &rfc0019Packer{kms: p.KMS(), authcrypt: true, fix: fix}, nil
	}
	anon := func(p packer.Provider) (packer.Packer, error) {
		return &rfc0019Packer{kms: p.KMS(), fix: fix}, nil
	}
	return auth, anon
}

// EncodingType is how afgo's packager indexes packers: it appends "-authcrypt" itself only for
// its own packer types, so ours says it.
func (p *rfc0019Packer) EncodingType() string {
	if p.authcrypt {
		return transport.MediaTypeRFC0019EncryptedEnvelope + "-authcrypt"
	}
	return transport.MediaTypeRFC0019EncryptedEnvelope
}

type envelope struct {
	Protected  string `json:"protected"`
	IV         string `json:"iv"`
	Ciphertext string `json:"ciphertext"`
	Tag        string `json:"tag"`
}

type protectedHeader struct {
	Enc        string           `json:"enc"`
	Typ        string           `json:"typ"`
	Alg        string           `json:"alg"`
	Recipients []envelopeRecipt `json:"recipients"`
}

type envelopeRecipt struct {
	EncryptedKey string          `json:"encrypted_key"`
	Header       recipientHeader `json:"header"`
}

type recipientHeader struct {
	KID    string `json:"kid"`
	Sender string `json:"sender,omitempty"`
	IV     string `json:"iv,omitempty"`
}

var b64 = base64.RawURLEncoding

// unb64 decodes base64url with or without padding.
func unb64(s string) ([]byte, error) { return b64.DecodeString(strings.TrimRight(s, "=")) }

// Pack encrypts payload for recipients (raw Ed25519 public keys); sender is the raw Ed25519
// public key of one of our KMS keys (authcrypt) or nil (anoncrypt).
func (p *rfc0019Packer) Pack(_ string, payload, sender []byte, recipients [][]byte) ([]byte, error) {
	if len(recipients) == 0 {
		return nil, errors.New("pack: no recipients")
	}
	if p.authcrypt && len(sender) == 0 {
		return nil, errors.New("pack: authcrypt needs a sender key")
	}
	payload, err := p.fix.outbound(payload)
	if err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	box, err := localkms.NewCryptoBox(p.kms)
	if err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	var cek [chacha20poly1305.KeySize]byte
	if _, err := rand.Read(cek[:]); err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	h := protectedHeader{Enc: encLabel, Typ: transport.MediaTypeRFC0019EncryptedEnvelope, Alg: algAnoncrypt}
	var senderKID string
	if p.authcrypt {
		h.Alg = algAuthcrypt
		if senderKID, err = jwkkid.CreateKID(sender, kms.ED25519Type); err != nil {
			return nil, fmt.Errorf("pack: sender key: %w", err)
		}
	}
	for _, rk := range recipients {
		recX, err := ed25519PublicToX25519(rk)
		if err != nil {
			return nil, fmt.Errorf("pack: recipient key: %w", err)
		}
		r := envelopeRecipt{Header: recipientHeader{KID: base58.Encode(rk)}}
		if p.authcrypt {
			var nonce [24]byte
			if _, err := rand.Read(nonce[:]); err != nil {
				return nil, fmt.Errorf("pack: %w", err)
			}
			enc, err := box.Easy(cek[:], nonce[:], recX, senderKID)
			if err != nil {
				return nil, fmt.Errorf("pack: wrap key: %w", err)
			}
			encSender, err := box.Seal([]byte(base58.Encode(sender)), recX, rand.Reader)
			if err != nil {
				return nil, fmt.Errorf("pack: seal sender: %w", err)
			}
			r.EncryptedKey, r.Header.Sender, r.Header.IV = b64.EncodeToString(enc), b64.EncodeToString(encSender), b64.EncodeToString(nonce[:])
		} else {
			enc, err := box.Seal(cek[:], recX, rand.Reader)
			if err != nil {
				return nil, fmt.Errorf("pack: seal key: %w", err)
			}
			r.EncryptedKey = b64.EncodeToString(enc)
		}
		h.Recipients = append(h.Recipients, r)
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	protected := b64.EncodeToString(hb)
	aead, err := chacha20poly1305.New(cek[:])
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	// The protected header as sent is the additional data.
	sealed := aead.Seal(nil, nonce, payload, []byte(protected))
	ct, tag := sealed[:len(sealed)-aead.Overhead()], sealed[len(sealed)-aead.Overhead():]
	return json.Marshal(envelope{Protected: protected, IV: b64.EncodeToString(nonce), Ciphertext: b64.EncodeToString(ct), Tag: b64.EncodeToString(tag)})
}

// Unpack decrypts an envelope addressed to one of our keys.
func (p *rfc0019Packer) Unpack(raw []byte) (*transport.Envelope, error) {
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("unpack: envelope: %w", err)
	}
	hb, err := unb64(env.Protected)
	if err != nil {
		return nil, fmt.Errorf("unpack: protected header: %w", err)
	}
	var h protectedHeader
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, fmt.Errorf("unpack: protected header: %w", err)
	}
	if h.Typ != transport.MediaTypeRFC0019EncryptedEnvelope {
		return nil, fmt.Errorf("unpack: typ %q is not %s", h.Typ, transport.MediaTypeRFC0019EncryptedEnvelope)
	}
	if h.Enc != encLabel && h.Enc != encLabelLegacy {
		return nil, fmt.Errorf("unpack: unsupported content cipher %q", h.Enc)
	}
	if (h.Alg == algAuthcrypt) != p.authcrypt || (h.Alg != algAuthcrypt && h.Alg != algAnoncrypt) {
		return nil, fmt.Errorf("unpack: unexpected alg %q", h.Alg)
	}
	box, err := localkms.NewCryptoBox(p.kms)
	if err != nil {
		return nil, fmt.Errorf("unpack: %w", err)
	}
	r, myKey, err := p.ourRecipient(h.Recipients)
	if err != nil {
		return nil, err
	}
	encKey, err := unb64(r.EncryptedKey)
	if err != nil {
		return nil, fmt.Errorf("unpack: encrypted key: %w", err)
	}
	var cek, senderKey []byte
	if p.authcrypt {
		encSender, err := unb64(r.Header.Sender)
		if err != nil {
			return nil, fmt.Errorf("unpack: sender: %w", err)
		}
		senderB58, err := box.SealOpen(encSender, myKey)
		if err != nil {
			return nil, fmt.Errorf("unpack: open sender: %w", err)
		}
		if senderKey, err = decodeBase58(string(senderB58)); err != nil {
			return nil, fmt.Errorf("unpack: sender: %w", err)
		}
		senderX, err := ed25519PublicToX25519(senderKey)
		if err != nil {
			return nil, fmt.Errorf("unpack: sender key: %w", err)
		}
		nonce, err := unb64(r.Header.IV)
		if err != nil {
			return nil, fmt.Errorf("unpack: key nonce: %w", err)
		}
		if cek, err = box.EasyOpen(encKey, nonce, senderX, myKey); err != nil {
			return nil, fmt.Errorf("unpack: open content key: %w", err)
		}
	} else if cek, err = box.SealOpen(encKey, myKey); err != nil {
		return nil, fmt.Errorf("unpack: open content key: %w", err)
	}
	aead, err := chacha20poly1305.New(cek)
	if err != nil {
		return nil, fmt.Errorf("unpack: content key: %w", err)
	}
	iv, err1 := unb64(env.IV)
	ct, err2 := unb64(env.Ciphertext)
	tag, err3 := unb64(env.Tag)
	if err := errors.Join(err1, err2, err3); err != nil || len(iv) != aead.NonceSize() {
		return nil, fmt.Errorf("unpack: malformed iv, ciphertext or tag")
	}
	msg, err := aead.Open(nil, iv, append(ct, tag...), []byte(env.Protected))
	if err != nil {
		return nil, fmt.Errorf("unpack: content does not authenticate")
	}
	if msg, err = p.fix.inbound(msg); err != nil {
		return nil, fmt.Errorf("unpack: %w", err)
	}
	return &transport.Envelope{Message: msg, FromKey: senderKey, ToKey: myKey}, nil
}

// ourRecipient finds the recipient entry for a key our KMS holds.
func (p *rfc0019Packer) ourRecipient(rs []envelopeRecipt) (envelopeRecipt, []byte, error) {
	for _, r := range rs {
		pub, err := decodeBase58(r.Header.KID)
		if err != nil || len(pub) != 32 {
			continue
		}
		kid, err := jwkkid.CreateKID(pub, kms.ED25519Type)
		if err != nil {
			continue
		}
		if _, err := p.kms.Get(kid); err == nil {
			return r, pub, nil
		}
	}
	return envelopeRecipt{}, nil, errors.New("unpack: no recipient key of this agent")
}

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// decodeBase58 decodes base58btc, refusing any character outside the alphabet: btcutil's
// Decode panics on some non-ASCII input, and these strings come from peers.
func decodeBase58(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty base58")
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(base58Alphabet, s[i]) < 0 {
			return nil, errors.New("not base58")
		}
	}
	return base58.Decode(s), nil
}

// curve25519P is 2^255 - 19.
var curve25519P = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

// ed25519PublicToX25519 converts an Ed25519 public key to the X25519 key of the same secret:
// u = (1 + y) / (1 - y) mod p, where y is the Edwards y coordinate.
func ed25519PublicToX25519(pub []byte) ([]byte, error) {
	if len(pub) != 32 {
		return nil, fmt.Errorf("ed25519 public key is %d bytes, want 32", len(pub))
	}
	le := make([]byte, 32)
	copy(le, pub)
	le[31] &= 0x7f // drop the sign bit of x
	y := new(big.Int).SetBytes(reverse(le))
	if y.Cmp(curve25519P) >= 0 {
		return nil, errors.New("ed25519 public key out of range")
	}
	one := big.NewInt(1)
	den := new(big.Int).Sub(one, y)
	den.Mod(den, curve25519P)
	if den.Sign() == 0 {
		return nil, errors.New("ed25519 public key has no X25519 form")
	}
	u := new(big.Int).Add(one, y)
	u.Mul(u, new(big.Int).ModInverse(den, curve25519P))
	u.Mod(u, curve25519P)
	out := make([]byte, 32)
	u.FillBytes(out)
	return reverse(out), nil
}

func reverse(b []byte) []byte {
	out := make([]byte, len(b))
	for i := range b {
		out[len(b)-1-i] = b[i]
	}
	return out
}

var _ packer.Packer = (*rfc0019Packer)(nil)

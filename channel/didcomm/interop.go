package didcomm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	cryptoapi "github.com/hyperledger/aries-framework-go/pkg/crypto"
	"github.com/hyperledger/aries-framework-go/pkg/doc/util/jwkkid"
	"github.com/hyperledger/aries-framework-go/pkg/kms"
)

// interopFixer rewrites DID exchange plaintexts between afgo and Credo-ts, which do not agree on
// a few details. It is called by the packer (the only hook between afgo's protocol code and the
// wire) and touches nothing but DID exchange messages.
type interopFixer struct {
	kms    kms.KeyManager
	crypto cryptoapi.Crypto
}

const (
	didexchange10 = "https://didcomm.org/didexchange/1.0/"
	didexchange11 = "https://didcomm.org/didexchange/1.1/"
)

// inbound fixes a plaintext that arrived, before afgo reads it.
func (f *interopFixer) inbound(msg []byte) ([]byte, error) {
	if !bytes.Contains(msg, []byte("/didexchange/1.")) {
		return msg, nil
	}
	var m map[string]any
	if err := json.Unmarshal(msg, &m); err != nil {
		return msg, nil // not JSON: afgo will refuse it with its own error
	}
	t, _ := m["@type"].(string)
	if !strings.HasPrefix(t, didexchange11) && !strings.HasPrefix(t, didexchange10) {
		return msg, nil
	}
	// Credo sends didexchange/1.1 even to a 1.0 invitation; afgo speaks only 1.0, and the two
	// messages are the same but for the version.
	m["@type"] = didexchange10 + strings.TrimPrefix(strings.TrimPrefix(t, didexchange11), didexchange10)
	// A did:peer:2 or :4 is its own document, so Credo attaches none; afgo insists on one.
	if did, _ := m["did"].(string); m["did_doc~attach"] == nil && (strings.HasPrefix(did, "did:peer:4") || strings.HasPrefix(did, "did:peer:2")) {
		doc, err := peerDIDDocument(did)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		m["did_doc~attach"] = map[string]any{"@id": uuid.NewString(), "mime-type": "application/json",
			"data": map[string]any{"base64": base64.StdEncoding.EncodeToString(doc)}}
	}
	// A did:peer:1 document from Credo names its DIDComm recipient keys by fragment ("#key-1");
	// afgo reads only did:key values there.
	if did, _ := m["did"].(string); strings.HasPrefix(did, "did:peer:1") {
		if err := fixAttachedDoc(did, m); err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("rewrite %s: %w", t, err)
	}
	return out, nil
}

// fixAttachedDoc rebuilds the attached document of m in afgo's shape. The rewrite invalidates
// the attachment's signature, so it is dropped: afgo does not check it.
func fixAttachedDoc(did string, m map[string]any) error {
	att, _ := m["did_doc~attach"].(map[string]any)
	data, _ := att["data"].(map[string]any)
	enc, _ := data["base64"].(string)
	if enc == "" {
		return nil
	}
	raw, err := decodeBase64(enc)
	if err != nil {
		return fmt.Errorf("did_doc~attach: %w", err)
	}
	// afgo reads its own shape as it is; Credo's key references and routing keys need rewriting.
	if !bytes.Contains(raw, []byte(`"recipientKeys":["#`)) && !bytes.Contains(raw, []byte(`"routingKeys":["`)) {
		return nil
	}
	var in peerInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return fmt.Errorf("did_doc~attach: %w", err)
	}
	doc, err := buildAFGODoc(did, in)
	if err != nil {
		return err
	}
	data["base64"] = base64.StdEncoding.EncodeToString(doc)
	delete(data, "jws")
	return nil
}

// outbound fixes a plaintext afgo wrote, before it is encrypted.
func (f *interopFixer) outbound(msg []byte) ([]byte, error) {
	if !bytes.Contains(msg, []byte(didexchange10+"response")) {
		return forwardTo(msg)
	}
	var m map[string]any
	if err := json.Unmarshal(msg, &m); err != nil {
		return msg, nil
	}
	att, ok := m["did_doc~attach"].(map[string]any)
	if t, _ := m["@type"].(string); t != didexchange10+"response" || !ok {
		return msg, nil
	}
	data, _ := att["data"].(map[string]any)
	enc, _ := data["base64"].(string)
	docBytes, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("response did_doc~attach: %w", err)
	}
	doc, signer, err := credoShapedDoc(docBytes)
	if err != nil {
		return nil, fmt.Errorf("response did_doc~attach: %w", err)
	}
	// Credo verifies a JWS over the attachment, signed by a key of the document's
	// authentication (or of the invitation), named by its did:key.
	jws, err := f.signAttachment(doc, signer)
	if err != nil {
		return nil, fmt.Errorf("response did_doc~attach: %w", err)
	}
	data["base64"] = base64.StdEncoding.EncodeToString(doc)
	data["jws"] = jws
	return json.Marshal(m)
}

// credoShapedDoc rewrites afgo's document the way Credo reads it: key controllers are the DID
// (afgo writes "#id" or ""), and recipient keys reference the document's own keys (afgo writes
// did:key values). It returns the document and the public key of its first authentication key.
func credoShapedDoc(raw []byte) ([]byte, []byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, err
	}
	id, _ := doc["id"].(string)
	byKey := make(map[string]string) // did:key → fragment
	vms, _ := doc["verificationMethod"].([]any)
	for _, v := range vms {
		vm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		vm["controller"] = id
		if vm["type"] == typeEd25519VK2018 {
			if raw, err := decodeBase58(fmt.Sprint(vm["publicKeyBase58"])); err == nil && len(raw) == 32 {
				byKey[didKey(raw)], _ = vm["id"].(string)
			}
		}
	}
	svcs, _ := doc["service"].([]any)
	for _, v := range svcs {
		svc, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if sid, _ := svc["id"].(string); sid != "" && !strings.Contains(sid, "#") {
			svc["id"] = "#" + sid
		}
		rks, _ := svc["recipientKeys"].([]any)
		for i, rk := range rks {
			if frag, ok := byKey[fmt.Sprint(rk)]; ok {
				rks[i] = frag
			}
		}
	}
	var signer []byte
	auth, _ := doc["authentication"].([]any)
	for _, a := range auth {
		ref, _ := a.(string)
		for k, frag := range byKey {
			if frag == ref && signer == nil {
				signer, _ = didKeyPublic(k)
			}
		}
	}
	if signer == nil {
		return nil, nil, errors.New("no Ed25519 authentication key to sign with")
	}
	out, err := json.Marshal(doc)
	return out, signer, err
}

// signAttachment makes the attachment JWS (flattened, payload detached) with our KMS key.
func (f *interopFixer) signAttachment(doc, pub []byte) (map[string]any, error) {
	kid, err := jwkkid.CreateKID(pub, kms.ED25519Type)
	if err != nil {
		return nil, err
	}
	kh, err := f.kms.Get(kid)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	protected, err := json.Marshal(map[string]any{"alg": "EdDSA",
		"jwk": map[string]string{"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(pub)}})
	if err != nil {
		return nil, err
	}
	p64 := base64.RawURLEncoding.EncodeToString(protected)
	sig, err := f.crypto.Sign([]byte(p64+"."+base64.RawURLEncoding.EncodeToString(doc)), kh)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return map[string]any{"header": map[string]string{"kid": didKey(pub)}, "protected": p64,
		"signature": base64.RawURLEncoding.EncodeToString(sig)}, nil
}

package didcomm

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/btcsuite/btcutil/base58"
)

// Peer DIDs as Credo-ts writes them, turned into DID documents afgo's DID exchange accepts.
// afgo resolves a did:peer only from a document attached to the exchange message, and reads
// DIDComm v1 recipient keys only as did:key values; Credo attaches nothing for did:peer:4 and
// did:peer:2 (the DID is the document) and refers to keys by fragment ("#key-1").

// Multicodec prefixes (varint-encoded).
var (
	codecEd25519 = []byte{0xed, 0x01}
	codecX25519  = []byte{0xec, 0x01}
	codecJSON    = []byte{0x80, 0x04} // 0x0200
)

const (
	typeEd25519VK2018 = "Ed25519VerificationKey2018"
	typeX25519KA2019  = "X25519KeyAgreementKey2019"
)

// didKey is the did:key of an Ed25519 public key.
func didKey(ed25519Pub []byte) string {
	return "did:key:z" + base58.Encode(append(append([]byte{}, codecEd25519...), ed25519Pub...))
}

// didKeyPublic returns the raw Ed25519 key of a did:key (with or without a fragment).
func didKeyPublic(dk string) ([]byte, error) {
	s, _, _ := strings.Cut(strings.TrimPrefix(dk, "did:key:"), "#")
	b, err := decodeBase58(strings.TrimPrefix(s, "z"))
	if err != nil || !strings.HasPrefix(s, "z") || len(b) != 34 || b[0] != codecEd25519[0] || b[1] != codecEd25519[1] {
		return nil, fmt.Errorf("%q is not an Ed25519 did:key", dk)
	}
	return b[2:], nil
}

// peerKey is one key of a peer DID's document.
type peerKey struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Base58    string `json:"publicKeyBase58,omitempty"`
	Multibase string `json:"publicKeyMultibase,omitempty"`
}

// raw returns the key's bytes, from base58 or multibase (with its multicodec prefix).
func (k peerKey) raw() ([]byte, error) {
	if k.Base58 != "" {
		b, err := decodeBase58(k.Base58)
		if err != nil || len(b) != 32 {
			return nil, fmt.Errorf("key %s: bad publicKeyBase58", k.ID)
		}
		return b, nil
	}
	if strings.HasPrefix(k.Multibase, "z") {
		if b, err := decodeBase58(k.Multibase[1:]); err == nil && len(b) == 34 {
			return b[2:], nil
		}
	}
	return nil, fmt.Errorf("key %s: no usable public key", k.ID)
}

type peerService struct {
	ID              string   `json:"id"`
	Type            string   `json:"type"`
	ServiceEndpoint any      `json:"serviceEndpoint"`
	RecipientKeys   []string `json:"recipientKeys,omitempty"`
	RoutingKeys     []string `json:"routingKeys,omitempty"`
	Accept          []string `json:"accept,omitempty"`
	Priority        int      `json:"priority,omitempty"`
}

// peerInput is the input document of a did:peer:4 (and the shape we assemble for did:peer:2).
type peerInput struct {
	Authentication     []json.RawMessage `json:"authentication"`
	KeyAgreement       []json.RawMessage `json:"keyAgreement"`
	VerificationMethod []peerKey         `json:"verificationMethod"`
	Service            []peerService     `json:"service"`
}

// afgoDoc is a DID document in the shape afgo parses.
type afgoDoc struct {
	Context            []string      `json:"@context"`
	ID                 string        `json:"id"`
	VerificationMethod []afgoVM      `json:"verificationMethod"`
	Authentication     []string      `json:"authentication,omitempty"`
	KeyAgreement       []string      `json:"keyAgreement,omitempty"`
	Service            []peerService `json:"service"`
}

type afgoVM struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Controller string `json:"controller"`
	Base58     string `json:"publicKeyBase58"`
}

// peerDIDDocument returns the afgo-shaped document of a did:peer:4 (long form) or did:peer:2.
func peerDIDDocument(did string) ([]byte, error) {
	var in peerInput
	var err error
	switch {
	case strings.HasPrefix(did, "did:peer:4"):
		in, err = peer4Input(did)
	case strings.HasPrefix(did, "did:peer:2"):
		in, err = peer2Input(did)
	default:
		return nil, fmt.Errorf("%s: not a did:peer:2 or :4", shortDID(did))
	}
	if err != nil {
		return nil, err
	}
	return buildAFGODoc(did, in)
}

// peer4Input reads the input document encoded in a long-form did:peer:4.
func peer4Input(did string) (peerInput, error) {
	var in peerInput
	_, long, ok := strings.Cut(strings.TrimPrefix(did, "did:peer:4"), ":")
	if !ok || !strings.HasPrefix(long, "z") {
		return in, fmt.Errorf("%s: not a long-form did:peer:4", shortDID(did))
	}
	b, err := decodeBase58(long[1:])
	if err != nil || len(b) < 3 || b[0] != codecJSON[0] || b[1] != codecJSON[1] {
		return in, fmt.Errorf("%s: encoded document is not JSON", shortDID(did))
	}
	if err := json.Unmarshal(b[2:], &in); err != nil {
		return in, fmt.Errorf("%s: encoded document: %w", shortDID(did), err)
	}
	return in, nil
}

// peer2Input reads did:peer:2.Ez…(key agreement).Vz…(authentication).S…(service).
func peer2Input(did string) (peerInput, error) {
	var in peerInput
	n := 0
	for _, el := range strings.Split(strings.TrimPrefix(did, "did:peer:2"), ".")[1:] {
		if el == "" {
			continue
		}
		purpose, val := el[0], el[1:]
		switch purpose {
		case 'V', 'E', 'A', 'I', 'D':
			n++
			k := peerKey{ID: fmt.Sprintf("#key-%d", n), Multibase: val, Type: typeEd25519VK2018}
			if b, err := decodeBase58(strings.TrimPrefix(val, "z")); err == nil && len(b) == 34 && b[0] == codecX25519[0] && b[1] == codecX25519[1] {
				k.Type = typeX25519KA2019
			}
			ref, _ := json.Marshal(k.ID)
			in.VerificationMethod = append(in.VerificationMethod, k)
			if purpose == 'E' {
				in.KeyAgreement = append(in.KeyAgreement, ref)
			} else if purpose == 'V' {
				in.Authentication = append(in.Authentication, ref)
			}
		case 'S':
			raw, err := decodeBase64(val)
			if err != nil {
				return in, fmt.Errorf("%s: service: %w", shortDID(did), err)
			}
			svcs, err := peer2Services(raw)
			if err != nil {
				return in, fmt.Errorf("%s: service: %w", shortDID(did), err)
			}
			in.Service = append(in.Service, svcs...)
		}
	}
	return in, nil
}

// peer2Services expands the abbreviated services of a did:peer:2 (t, s, r, a; "dm").
func peer2Services(raw []byte) ([]peerService, error) {
	var list []map[string]any
	if err := json.Unmarshal(raw, &list); err != nil {
		var one map[string]any
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, err
		}
		list = []map[string]any{one}
	}
	var out []peerService
	for i, m := range list {
		s := peerService{ID: fmt.Sprintf("#service-%d", i)}
		if i == 0 {
			s.ID = "#service"
		}
		if id, ok := m["id"].(string); ok {
			s.ID = id
		}
		s.Type, _ = firstOf(m, "t", "type").(string)
		if s.Type == "dm" {
			s.Type = "DIDCommMessaging"
		}
		s.ServiceEndpoint = firstOf(m, "s", "serviceEndpoint")
		s.RecipientKeys = stringList(firstOf(m, "recipientKeys"))
		s.RoutingKeys = stringList(firstOf(m, "r", "routingKeys"))
		s.Accept = stringList(firstOf(m, "a", "accept"))
		out = append(out, s)
	}
	return out, nil
}

func firstOf(m map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return nil
}

func stringList(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// buildAFGODoc assembles the document: absolute key ids, one verificationMethod list, and
// DIDComm v1 recipient keys as did:key values.
func buildAFGODoc(did string, in peerInput) ([]byte, error) {
	doc := afgoDoc{Context: []string{"https://www.w3.org/ns/did/v1"}, ID: did}
	keys := make(map[string][]byte) // fragment → raw key
	add := func(k peerKey) error {
		raw, err := k.raw()
		if err != nil {
			return err
		}
		frag := "#" + strings.TrimPrefix(strings.TrimPrefix(k.ID, did), "#")
		if _, dup := keys[frag]; dup {
			return nil
		}
		keys[frag] = raw
		t := k.Type
		if t == "Ed25519VerificationKey2020" || t == "Multikey" {
			t = typeEd25519VK2018
		}
		if t == "X25519KeyAgreementKey2020" {
			t = typeX25519KA2019
		}
		doc.VerificationMethod = append(doc.VerificationMethod, afgoVM{ID: did + frag, Type: t, Controller: did, Base58: base58.Encode(raw)})
		return nil
	}
	for _, k := range in.VerificationMethod {
		if err := add(k); err != nil {
			return nil, err
		}
	}
	// authentication and keyAgreement hold references or embedded keys.
	refs := func(list []json.RawMessage) ([]string, error) {
		var out []string
		for _, r := range list {
			var ref string
			if json.Unmarshal(r, &ref) == nil {
				out = append(out, did+"#"+strings.TrimPrefix(strings.TrimPrefix(ref, did), "#"))
				continue
			}
			var k peerKey
			if err := json.Unmarshal(r, &k); err != nil {
				return nil, err
			}
			if err := add(k); err != nil {
				return nil, err
			}
			out = append(out, did+"#"+strings.TrimPrefix(strings.TrimPrefix(k.ID, did), "#"))
		}
		return out, nil
	}
	var err error
	if doc.Authentication, err = refs(in.Authentication); err != nil {
		return nil, err
	}
	if doc.KeyAgreement, err = refs(in.KeyAgreement); err != nil {
		return nil, err
	}
	for i := range in.Service {
		in.Service[i].ID = did + "#" + strings.TrimPrefix(strings.TrimPrefix(in.Service[i].ID, did), "#")
	}
	if doc.Service, err = usableServices(did, in.Service, keys); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

// shortDID abbreviates a (long) DID for messages.
func shortDID(did string) string {
	if len(did) > 40 {
		return did[:40] + "…"
	}
	return did
}

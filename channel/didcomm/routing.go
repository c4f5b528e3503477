package didcomm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/btcsuite/btcutil/base58"
)

// Mediated recipients (Aries RFC 0211 routing, RFC 0094 forward). A phone wallet has no inbound
// endpoint: it registers with a mediator, and its DID document's service gives the mediator's
// endpoint and routingKeys. Every message to it is wrapped in one forward per routing key,
// anoncrypted to that key. afgo's dispatcher does the wrapping, with keys in the one shape it
// reads (did:key, no fragment): the documents we build for peer DIDs say routing keys that way,
// whatever the wallet wrote; forwardTo (the packer's hook) then writes each forward's "to" the
// way Credo's mediator looks it up (a base58 key).

const typeForward = "https://didcomm.org/routing/1.0/forward"

// v1 media type profiles of the "accept" list of a service; a service whose list has none of
// them (a DIDComm v2-only service) is not used.
var v1Profiles = []string{"didcomm/aip1", "didcomm/aip2;env=rfc19", "didcomm/v1", "application/didcomm-envelope-enc",
	"application/ssi-agent-wire", "didcomm/aip1;env=rfc19"}

// routingKeyDIDKey turns one routing key, as a wallet may write it, into an Ed25519 did:key:
//   - a did:key URL, with or without a fragment;
//   - a raw base58 Ed25519 key;
//   - a reference into the recipient's own document ("#key-2", or did + "#key-2"), resolved in
//     keys (fragment → raw key);
//   - a did:peer:2 or :4 URL of another DID (a mediator's), resolved from that DID itself.
//
// Other DIDs (did:web, did:sov, …) would need a resolver packbot does not have: an error.
func routingKeyDIDKey(rk, did string, keys map[string][]byte) (string, error) {
	switch {
	case rk == "":
		return "", errors.New("empty routing key")
	case strings.HasPrefix(rk, "did:key:"):
		raw, err := didKeyPublic(rk)
		if err != nil {
			return "", fmt.Errorf("routing key: %w", err)
		}
		return didKey(raw), nil
	case strings.HasPrefix(rk, "#") || (did != "" && strings.HasPrefix(rk, did+"#")):
		raw, ok := keys["#"+strings.TrimPrefix(strings.TrimPrefix(rk, did), "#")]
		if !ok {
			return "", fmt.Errorf("routing key %s is not in the document", clipKey(rk))
		}
		return didKey(raw), nil
	case strings.HasPrefix(rk, "did:peer:2") || strings.HasPrefix(rk, "did:peer:4"):
		other, frag, ok := strings.Cut(rk, "#")
		if !ok {
			return "", fmt.Errorf("routing key %s names a DID, not one of its keys", clipKey(rk))
		}
		raw, err := peerDIDKey(other, "#"+frag)
		if err != nil {
			return "", fmt.Errorf("routing key %s: %w", clipKey(rk), err)
		}
		return didKey(raw), nil
	case strings.HasPrefix(rk, "did:"):
		return "", fmt.Errorf("routing key %s: only did:key, did:peer:2 and did:peer:4 keys can be resolved here", clipKey(rk))
	}
	raw, err := decodeBase58(rk)
	if err != nil || len(raw) != 32 {
		return "", fmt.Errorf("routing key %s is not a base58 Ed25519 key", clipKey(rk))
	}
	return didKey(raw), nil
}

// peerDIDKey returns the raw key with fragment frag of a did:peer:2 or :4.
func peerDIDKey(did, frag string) ([]byte, error) {
	var in peerInput
	var err error
	if strings.HasPrefix(did, "did:peer:2") {
		in, err = peer2Input(did)
	} else {
		in, err = peer4Input(did)
	}
	if err != nil {
		return nil, err
	}
	for _, k := range in.VerificationMethod {
		if "#"+strings.TrimPrefix(strings.TrimPrefix(k.ID, did), "#") == frag {
			return k.raw()
		}
	}
	return nil, fmt.Errorf("%s has no key %s", shortDID(did), frag)
}

func clipKey(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// normalizeService makes one service of a peer DID's document usable by afgo's DIDComm v1
// dispatcher, or says why it is not: the endpoint (a string, or a DIDComm v2 style object with
// "uri") must be http(s) or ws(s), the accept list (when present) must name a DIDComm v1
// profile, recipient keys become did:key values, routing keys become did:key values without a
// fragment, and "DIDCommMessaging" services that carry recipient keys (Credo's did:peer:2
// abbreviation "dm") are typed "did-communication", which afgo reads as v1.
func normalizeService(did string, s peerService, keys map[string][]byte) (peerService, error) {
	if m, ok := s.ServiceEndpoint.(map[string]any); ok { // {"uri": …, "accept": […], "routingKeys": […]}
		s.ServiceEndpoint, _ = m["uri"].(string)
		if len(s.Accept) == 0 {
			s.Accept = stringList(m["accept"])
		}
		if len(s.RoutingKeys) == 0 {
			s.RoutingKeys = stringList(m["routingKeys"])
		}
	}
	endpoint, _ := s.ServiceEndpoint.(string)
	if !supportedScheme(endpoint) {
		return s, fmt.Errorf("service %s: endpoint %q is not http(s) or ws(s)", s.ID, clipKey(endpoint))
	}
	if len(s.Accept) > 0 && !slices.ContainsFunc(s.Accept, func(a string) bool { return slices.Contains(v1Profiles, a) }) {
		return s, fmt.Errorf("service %s accepts only %v", s.ID, s.Accept)
	}
	if len(s.RecipientKeys) == 0 {
		return s, fmt.Errorf("service %s has no recipient keys (a DIDComm v2 service)", s.ID)
	}
	rks := make([]string, len(s.RecipientKeys))
	for i, rk := range s.RecipientKeys {
		if strings.HasPrefix(rk, "did:key:") {
			raw, err := didKeyPublic(rk)
			if err != nil {
				return s, fmt.Errorf("service %s: recipient key: %w", s.ID, err)
			}
			rks[i] = didKey(raw)
			continue
		}
		raw, ok := keys["#"+strings.TrimPrefix(strings.TrimPrefix(rk, did), "#")]
		if !ok {
			return s, fmt.Errorf("service %s: recipient key %s is not in the document", s.ID, clipKey(rk))
		}
		rks[i] = didKey(raw)
	}
	s.RecipientKeys = rks
	routing := make([]string, len(s.RoutingKeys))
	for i, rk := range s.RoutingKeys {
		var err error
		if routing[i], err = routingKeyDIDKey(rk, did, keys); err != nil {
			return s, fmt.Errorf("service %s: %w", s.ID, err)
		}
	}
	s.RoutingKeys = routing
	s.Type = "did-communication"
	return s, nil
}

// usableServices normalizes every DIDComm service of a document and orders the usable ones by
// priority (afgo sends to the first). It fails, with every service's reason, when none is usable.
func usableServices(did string, svcs []peerService, keys map[string][]byte) ([]peerService, error) {
	var out []peerService
	var why []error
	for _, s := range svcs {
		if s.Type != "did-communication" && s.Type != "DIDCommMessaging" && s.Type != "IndyAgent" {
			continue
		}
		n, err := normalizeService(did, s, keys)
		if err != nil {
			why = append(why, err)
			continue
		}
		out = append(out, n)
	}
	slices.SortStableFunc(out, func(a, b peerService) int { return a.Priority - b.Priority })
	if len(out) == 0 {
		why = append(why, errors.New("no DIDComm v1 service packbot can send to"))
		return nil, fmt.Errorf("%s: %w", shortDID(did), errors.Join(why...))
	}
	return out, nil
}

// forwardTo rewrites the "to" of a forward message afgo wrote (a did:key) as the base58 key
// that Credo's mediator (and RFC 0094's examples) use. Other messages are returned unchanged.
func forwardTo(msg []byte) ([]byte, error) {
	if !strings.Contains(string(msg[:min(len(msg), 256)]), "/routing/1.0/forward") {
		return msg, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return msg, nil
	}
	var typ, to string
	if json.Unmarshal(m["@type"], &typ) != nil || typ != typeForward || json.Unmarshal(m["to"], &to) != nil {
		return msg, nil
	}
	if !strings.HasPrefix(to, "did:key:") {
		return msg, nil
	}
	raw, err := didKeyPublic(to)
	if err != nil {
		return nil, fmt.Errorf("forward to: %w", err)
	}
	m["to"], _ = json.Marshal(base58.Encode(raw))
	return json.Marshal(m)
}

// endpointHost is the scheme and host of an endpoint, for logs (paths may carry tokens).
func endpointHost(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return clipKey(endpoint)
	}
	return u.Scheme + "://" + u.Host
}

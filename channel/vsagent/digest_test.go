package vsagent

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"testing"

	"github.com/packbot/packbot/channel"
)

var digestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// withoutDigest checks that a presentation result carries a SHA-256 digest and returns it
// without, for comparisons with the expected events.
func withoutDigest(t *testing.T, e channel.Event) channel.Event {
	t.Helper()
	p, ok := e.(channel.PresentationResult)
	if !ok {
		return e
	}
	if !digestRE.MatchString(p.Digest) {
		t.Errorf("presentation result digest %q, want a SHA-256 in hex", p.Digest)
	}
	p.Digest = ""
	return p
}

// TestProofDigest: a submission's digest is the SHA-256 of the message as the VS Agent posted
// it, so two submissions (two proof exchanges) never share one.
func TestProofDigest(t *testing.T) {
	const m1 = `{"type":"identity-proof-submit","id":"m1","connectionId":"c1","threadId":"t1","submittedProofItems":[{"id":"1","type":"verifiable-credential","proofExchangeId":"pe-1","verified":true,"claims":[{"name":"email","value":"bob@acme.corp"}]}]}`
	const m2 = `{"type":"identity-proof-submit","id":"m2","connectionId":"c1","threadId":"t1","submittedProofItems":[{"id":"1","type":"verifiable-credential","proofExchangeId":"pe-2","verified":true,"claims":[{"name":"email","value":"bob@acme.corp"}]}]}`
	var digests []string
	for _, m := range []string{m1, m2} {
		d, err := decodeWebhook(routeMessageReceived, []byte(`{"type":"message-received","timestamp":"2026-03-01T10:20:30.123Z","message":`+m+`}`))
		if err != nil {
			t.Fatal(err)
		}
		p := d.Event.(channel.PresentationResult)
		sum := sha256.Sum256([]byte(m))
		if p.Outcome != channel.Verified || p.Digest != hex.EncodeToString(sum[:]) {
			t.Fatalf("result %+v, want verified with the digest of %s", p, m)
		}
		digests = append(digests, p.Digest)
	}
	if digests[0] == digests[1] {
		t.Fatal("two proof exchanges share a digest")
	}
}

package store

import (
	"crypto/hmac"
	"crypto/sha256"
	"testing"
	"time"
)

// BenchmarkAuditHash is the bot's CPU per audit record for its hash (AuditHash) and for a keyed
// MAC over the same text (HMAC-SHA256): what a record sealed after its commit would cost its
// writer in Go (BENCHMARKS.md, issue 21).
//
//	go test -run XXX -bench AuditHash -count 3 ./store
func BenchmarkAuditHash(b *testing.B) {
	r := AuditRecord{ID: 42, At: time.UnixMilli(1795861010776), Identity: "did:example:ana", Roles: []string{"staff"},
		Server: "bank", Tool: "send_money", Decision: "allowed", Outcome: "ok", Latency: 1200 * time.Microsecond,
		ArgsFingerprint:   "sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
		ResultFingerprint: "sha256:a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90",
		Link:              AuditLink{Lane: 1, Seq: 7, PrevID: 41, Prev: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}}
	b.Run("hash", func(b *testing.B) {
		for b.Loop() {
			_ = AuditHash(r)
		}
	})
	b.Run("hmac", func(b *testing.B) {
		key := make([]byte, 32)
		for b.Loop() {
			m := hmac.New(sha256.New, key)
			m.Write([]byte(auditHashText(r)))
			_ = m.Sum(nil)
		}
	})
}

func BenchmarkAuditMAC(b *testing.B) {
	key := []byte("0123456789abcdef0123456789abcdef")
	r := AuditRecord{ID: 123456, At: time.Now(), Identity: "did:example:ana", Roles: []string{"staff"}, Server: "bank", Tool: "send_money",
		ArgsFingerprint: "sha256:0f1e2d3c", Decision: "allow", Outcome: "executed", Latency: time.Millisecond}
	for b.Loop() {
		r.MAC = AuditMAC(key, r)
	}
	if !CheckAuditMAC(key, r) {
		b.Fatal("MAC does not check")
	}
}

package packs

import (
	"time"
)

// maxProofAge bounds proofMaxAge: a proof that may come a day later is no longer fresh.
const maxProofAge = 24 * time.Hour

// proof checks the fresh-proof fields of approval policy a at path ap.
func (v *validator) proof(ap string, a *ApprovalPolicy) {
	switch a.Proof {
	case "":
		if a.ProofMaxAge != "" {
			v.warnf(joinPath(ap, "proofMaxAge"), "ignored without proof: %s", ProofFresh)
		}
		return
	case ProofFresh:
	default:
		v.errorf(joinPath(ap, "proof"), "unknown proof %q: write %s (approvers present their credential again when they approve) or leave it out",
			a.Proof, ProofFresh)
		return
	}
	if auth := v.p.Flows.Authentication; !auth.Enabled {
		v.errorf(joinPath(ap, "proof"), "proof: %s needs flows.authentication enabled: approvers prove themselves with the credential they log in with",
			ProofFresh)
	}
	if a.ProofMaxAge == "" {
		return
	}
	d, err := time.ParseDuration(a.ProofMaxAge)
	switch {
	case err != nil:
		v.errorf(joinPath(ap, "proofMaxAge"), "%q is not a duration: write one such as 5m or 90s", a.ProofMaxAge)
	case d <= 0:
		v.errorf(joinPath(ap, "proofMaxAge"), "must be positive, not %s", a.ProofMaxAge)
	case d > maxProofAge:
		v.errorf(joinPath(ap, "proofMaxAge"), "%s is longer than %s: a proof that old is not fresh", a.ProofMaxAge, maxProofAge)
	}
}

package credential

import (
	"errors"
	"strings"
)

// reasonError is a sentinel error that carries a short machine reason.
type reasonError struct {
	reason string
	msg    string
}

func (e *reasonError) Error() string { return e.msg }

func newReason(reason, msg string) error { return &reasonError{reason: reason, msg: msg} }

// Sentinel errors of [Verify], [CheckSubmission] and [Present]. Every error Verify returns wraps
// exactly one of them; check with errors.Is, or log [Reason].
var (
	// ErrInvalidRequest: the caller's own input is wrong (empty policy type, unknown format,
	// empty challenge, zero time). A programming or configuration error, not the wallet's fault.
	ErrInvalidRequest = newReason("invalid-request", "invalid verification request")
	// ErrMalformed: the presentation or a credential in it is not a well-formed W3C VC data
	// model document (bad JSON, missing holder, missing or several proofs, unknown proof type,
	// undefined JSON-LD terms, a JWT that is not a compact EdDSA JWS…).
	ErrMalformed = newReason("malformed", "malformed presentation")
	// ErrUnknownContext: a JSON-LD context is not embedded in packbot; it is never fetched.
	ErrUnknownContext = newReason("unknown-context", "unknown JSON-LD context")
	// ErrUnsupportedDID: a signer, holder or issuer DID is not did:key; no other method is resolved.
	ErrUnsupportedDID = newReason("unsupported-did-method", "unsupported DID method")
	// ErrPresentationProof: the presentation's signature does not verify (tampered presentation).
	ErrPresentationProof = newReason("tampered-presentation", "presentation proof invalid")
	// ErrSignerNotHolder: the presentation is signed by a key that is not the holder's.
	ErrSignerNotHolder = newReason("signer-not-holder", "presentation signer is not the holder")
	// ErrProofPurpose: the presentation proof's purpose is not authentication, or a
	// credential proof's purpose is not assertionMethod.
	ErrProofPurpose = newReason("wrong-proof-purpose", "wrong proof purpose")
	// ErrChallenge: the presentation answers another challenge (replay).
	ErrChallenge = newReason("wrong-challenge", "challenge mismatch")
	// ErrDomain: the presentation is bound to another domain.
	ErrDomain = newReason("wrong-domain", "domain mismatch")
	// ErrCredentialProof: a credential's signature does not verify (tampered credential), or the
	// credential is not signed at all.
	ErrCredentialProof = newReason("tampered-credential", "credential proof invalid")
	// ErrSignerNotIssuer: a credential is signed by a key that is not its issuer's.
	ErrSignerNotIssuer = newReason("signer-not-issuer", "credential signer is not the issuer")
	// ErrNoCredential: the presentation holds no credential of the policy's type.
	ErrNoCredential = newReason("no-matching-credential", "no credential of the requested type")
	// ErrFormat: the credential's format (jsonld, jwt) is not allowed by the policy.
	ErrFormat = newReason("format-not-allowed", "credential format not allowed")
	// ErrUntrustedIssuer: the credential's issuer is not in the policy's list (an empty list
	// trusts no one).
	ErrUntrustedIssuer = newReason("untrusted-issuer", "untrusted issuer")
	// ErrExpired: the credential's expirationDate (exp) has passed.
	ErrExpired = newReason("expired", "credential expired")
	// ErrNotYetValid: the credential's issuanceDate (nbf, iat) is in the future.
	ErrNotYetValid = newReason("not-yet-valid", "credential not yet valid")
	// ErrHolderNotSubject: the credential's subject is not the presentation's holder.
	ErrHolderNotSubject = newReason("holder-not-subject", "credential subject is not the holder")
	// ErrSubmission: a presentation's presentation_submission does not answer the definition.
	ErrSubmission = newReason("submission-mismatch", "presentation submission does not match the definition")
)

// Reason returns the short machine reason of an error from this package ("tampered-credential",
// "untrusted-issuer", "wrong-challenge", "expired", "holder-not-subject"…), "" for nil, and
// "internal" for an error that wraps none of the sentinels.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	var re *reasonError
	if errors.As(err, &re) {
		return re.reason
	}
	return "internal"
}

// clip shortens a value taken from a presentation before it goes into an error message, so that
// a hostile wallet cannot flood the logs.
func clip(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit], "") + "…"
}

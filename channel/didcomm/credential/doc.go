// Package credential owns W3C verifiable credentials for packbot's embedded DIDComm channel and
// its demo tools: did:key Ed25519 keys ([Key], [DemoIssuer]), issuing ([Issue], JSON-LD with
// Ed25519Signature2018 and contexts a stock Credo wallet loads offline, or VC-JWT), presenting
// ([Present], [Submit]), verifying a wallet's JSON-LD or VC-JWT presentation against a
// [Policy] ([Verify]), and the DIF presentation-exchange
// definition a present-proof 2.0 request carries ([Definition], [PolicyFromDefinition],
// [CheckSubmission]), and statements a bot signs about what it did (receipts: [Signer],
// [VerifyStatement]).
//
// It does not speak DIDComm, keep credentials, or decide what a verified claim means: the parent
// package channel/didcomm sends the request and the presentation, and hands [Result] to the bot.
// aries-framework-go is an implementation detail: callers see packbot types, JSON bytes and
// strings. Nothing is fetched at run time: JSON-LD contexts are embedded (afgo's plus packbot's
// [ContextURL], whose "@vocab" makes any pack-defined type or attribute signable), and only
// did:key DIDs are resolved, locally.
//
// Verification failures wrap sentinel errors; [Reason] gives the short machine reason packbot
// logs ("tampered-credential", "untrusted-issuer", "wrong-challenge", "expired",
// "holder-not-subject"…).
//
// A complete round trip:
//
//	issuer := credential.DemoIssuer() // public seed: demos only
//	holder, _ := credential.GenerateKey()
//	vc, _ := credential.Issue(issuer, credential.IssueRequest{
//		Types: []string{"EmployeeCredential"}, Subject: holder.DID(),
//		Attributes: map[string]any{"name": "Ana"}, IssuedAt: now,
//	})
//	policy := credential.Policy{Type: "EmployeeCredential", Issuers: []string{issuer.DID()}}
//	def, _ := credential.Definition(policy, "Log in") // bot → wallet, with a challenge and domain
//	vp, _ := credential.Present(holder, [][]byte{vc}, challenge, domain) // wallet → bot
//	res, err := credential.Verify(vp, challenge, domain, policy, now)
//	if err != nil {
//		log.Println(credential.Reason(err), err)
//	}
//	_ = res.Claims["name"] // "Ana"
package credential

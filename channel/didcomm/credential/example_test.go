package credential_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/packbot/packbot/channel/didcomm/credential"
)

// A demo issuer issues an employee credential; the holder's wallet presents it for the bot's
// challenge; the bot verifies it against its pack's policy.
func Example() {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	issuer := credential.DemoIssuer()
	holder, err := credential.GenerateKey()
	if err != nil {
		panic(err)
	}
	vc, err := credential.Issue(issuer, credential.IssueRequest{
		Types:      []string{"EmployeeCredential"},
		Subject:    holder.DID(),
		Attributes: map[string]any{"name": "Ana", "roles": "employee,approver"},
		IssuedAt:   now.Add(-time.Hour),
	})
	if err != nil {
		panic(err)
	}
	policy := credential.Policy{Type: "EmployeeCredential", Issuers: []string{issuer.DID()}}

	vp, err := credential.Present(holder, [][]byte{vc}, "challenge-42", "bot.example.org")
	if err != nil {
		panic(err)
	}
	res, err := credential.Verify(vp, "challenge-42", "bot.example.org", policy, now)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Claims["name"], res.Claims["roles"], res.Format, res.Holder == holder.DID())

	// A replayed presentation answers an old challenge.
	_, err = credential.Verify(vp, "challenge-43", "bot.example.org", policy, now)
	fmt.Println(credential.Reason(err))
	// Output:
	// Ana employee,approver jsonld true
	// wrong-challenge
}

func ExampleDemoIssuer() {
	fmt.Println(credential.DemoIssuer().DID())
	// Output: did:key:z6Mkg5JPG6jzTYpXhDRGkPhBUkpauWtoXS2qoYGE5oEqaQY4
}

func ExampleKey_MarshalJSON() {
	k, err := credential.KeyFromSeed([]byte("an example seed of 32 bytes!!!!!"))
	if err != nil {
		panic(err)
	}
	file, err := json.Marshal(k) // a key file: keep it secret
	if err != nil {
		panic(err)
	}
	var loaded credential.Key
	if err := json.Unmarshal(file, &loaded); err != nil {
		panic(err)
	}
	fmt.Println(loaded.DID() == k.DID(), strings.Contains(string(file), `"privateKeyMultibase":"z`))
	fmt.Printf("%v\n", loaded) // the DID only
	// Output:
	// true true
	// did:key:z6MkrcLKEeyTkHCu8KFsQ479StkXgGmkPBw95TURe1dNUchT
}

func ExampleIssue() {
	holder, err := credential.GenerateKey()
	if err != nil {
		panic(err)
	}
	jwt, err := credential.Issue(credential.DemoIssuer(), credential.IssueRequest{
		Types:     []string{"CorporateBadgeCredential"},
		Subject:   holder.DID(),
		Format:    credential.FormatJWT,
		IssuedAt:  time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC),
		ExpiresAt: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.Count(string(jwt), "."), strings.HasPrefix(string(jwt), "eyJ"))
	// Output: 2 true
}

func ExampleVerify() {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	holder, err := credential.GenerateKey()
	if err != nil {
		panic(err)
	}
	stranger, err := credential.GenerateKey()
	if err != nil {
		panic(err)
	}
	// A credential the holder minted for itself: validly signed, but by no trusted issuer.
	vc, err := credential.Issue(stranger, credential.IssueRequest{Types: []string{"EmployeeCredential"},
		Subject: holder.DID(), IssuedAt: now.Add(-time.Minute)})
	if err != nil {
		panic(err)
	}
	vp, err := credential.Present(holder, [][]byte{vc}, "c1", "bot.example.org")
	if err != nil {
		panic(err)
	}
	policy := credential.Policy{Type: "EmployeeCredential", Issuers: []string{credential.DemoIssuer().DID()}}
	_, err = credential.Verify(vp, "c1", "bot.example.org", policy, now)
	fmt.Println(credential.Reason(err), err != nil)
	// Output: untrusted-issuer true
}

func ExampleDefinition() {
	policy := credential.Policy{Type: "EmployeeCredential", Issuers: []string{credential.DemoIssuer().DID()},
		Formats: []string{credential.FormatJWT}}
	def, err := credential.Definition(policy, "Log in to the bot")
	if err != nil {
		panic(err)
	}
	// The wallet reads back what is asked.
	asked, err := credential.PolicyFromDefinition(def)
	if err != nil {
		panic(err)
	}
	fmt.Println(asked.Type, asked.Formats, asked.Issuers[0] == credential.DemoIssuer().DID())
	// Output: EmployeeCredential [jwt] true
}

func ExampleSubmit() {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	issuer := credential.DemoIssuer()
	holder, err := credential.GenerateKey()
	if err != nil {
		panic(err)
	}
	var wallet [][]byte
	for _, typ := range []string{"LibraryCard", "EmployeeCredential"} {
		vc, err := credential.Issue(issuer, credential.IssueRequest{Types: []string{typ}, Subject: holder.DID(),
			Attributes: map[string]any{"card": typ}, IssuedAt: now.Add(-time.Hour)})
		if err != nil {
			panic(err)
		}
		wallet = append(wallet, vc)
	}
	policy := credential.Policy{Type: "EmployeeCredential", Issuers: []string{issuer.DID()}}
	def, err := credential.Definition(policy, "")
	if err != nil {
		panic(err)
	}
	vp, err := credential.Submit(holder, def, wallet, "c1", "bot.example.org")
	if err != nil {
		panic(err)
	}
	fmt.Println(credential.CheckSubmission(def, vp))
	res, err := credential.Verify(vp, "c1", "bot.example.org", policy, now)
	fmt.Println(res.Claims["card"], err)
	// Output:
	// <nil>
	// EmployeeCredential <nil>
}

func ExampleReason() {
	err := fmt.Errorf("authenticate: %w", credential.ErrExpired)
	fmt.Println(credential.Reason(err), credential.Reason(nil), credential.Reason(fmt.Errorf("other")))
	// Output: expired  internal
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/channel/didcomm/credential"
)

func newCredentialCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "credential",
		Short: "Make demo W3C verifiable credentials (did:key issuer)",
		Long: `Mint W3C verifiable credentials for local use and tests: JSON-LD (Ed25519Signature2018, with
only contexts a stock Credo wallet has offline) or VC-JWT, signed by a did:key issuer.

Without --issuer, credentials are signed by packbot's public demo issuer
(` + credential.DemoIssuer().DID() + `), which the demo pack trusts. Anyone can mint
credentials with it: for demos only. Make your own issuer with 'packbot credential keygen' and
list its DID in your pack's flows.authentication.credential.issuers.`,
	}
	cmd.AddCommand(newCredentialKeygenCmd(a), newCredentialIssueCmd(a))
	return cmd
}

func newCredentialKeygenCmd(a *app) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:     "keygen",
		Short:   "Make an issuer key file and print its DID",
		Example: `  packbot credential keygen --out issuer.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := credential.GenerateKey()
			if err != nil {
				return err
			}
			b, err := json.MarshalIndent(k, "", "  ")
			if err != nil {
				return err
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s exists: choose another --out (a key file is never overwritten)", out)
			}
			if err != nil {
				return err
			}
			if _, err := f.Write(append(b, '\n')); err != nil {
				return errors.Join(err, f.Close())
			}
			if err := f.Close(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s\n", k.DID())
			return err
		},
	}
	cmd.Flags().StringVar(&out, "out", "issuer.json", "key file to write (mode 0600; holds the private key)")
	return cmd
}

type issueOptions struct {
	issuer  string
	subject string
	types   []string
	attrs   []string
	format  string
	expires time.Duration
	out     string
}

func newCredentialIssueCmd(a *app) *cobra.Command {
	var o issueOptions
	cmd := &cobra.Command{
		Use:   "issue",
		Short: "Issue a credential to a holder DID",
		Long: `Issue a credential whose subject is the holder's DID (print a wallet's with 'packbot wallet
did'). Attributes come from --attr name=value; a value that is a JSON array or object is kept
as JSON, anything else is a string (roles=employee,finance stays the comma-separated string the
roles attribute accepts).`,
		Example: `  packbot credential issue --subject $(packbot wallet did) --attr email=ana@acme.corp --attr name=Ana --attr roles=employee,finance > ana.json
  packbot credential issue --issuer issuer.json --type CorporateBadgeCredential --format jwt --expires 720h --subject did:key:z6Mk… --attr employeeLogin=ana`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCredentialIssue(a, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.issuer, "issuer", "demo", `issuer key file from 'packbot credential keygen', or "demo" for the public demo issuer`)
	f.StringVar(&o.subject, "subject", "", "the holder's DID (required)")
	f.StringSliceVar(&o.types, "type", []string{"EmployeeCredential"}, "credential type(s); VerifiableCredential is added")
	f.StringArrayVar(&o.attrs, "attr", nil, "attribute name=value (repeatable)")
	f.StringVar(&o.format, "format", credential.FormatJSONLD, "jsonld (Ed25519Signature2018, what stock wallets store and present), jwt (VC-JWT), or jsonld-2020 (Ed25519Signature2020 with packbot's own context, as issued before)")
	f.DurationVar(&o.expires, "expires", 0, "validity, e.g. 720h (default: no expiry)")
	f.StringVar(&o.out, "out", "", "file to write (default: standard output)")
	_ = cmd.MarkFlagRequired("subject")
	return cmd
}

func runCredentialIssue(a *app, o issueOptions) error {
	issuer := credential.DemoIssuer()
	if o.issuer != "demo" {
		b, err := os.ReadFile(o.issuer)
		if err != nil {
			return fmt.Errorf("--issuer: %w", err)
		}
		issuer = &credential.Key{}
		if err := json.Unmarshal(b, issuer); err != nil {
			return fmt.Errorf("--issuer %s: %w", o.issuer, err)
		}
	}
	attrs, err := parseAttrs(o.attrs)
	if err != nil {
		return err
	}
	now := time.Now()
	req := credential.IssueRequest{Types: o.types, Subject: o.subject, Attributes: attrs, Format: o.format, IssuedAt: now}
	if o.expires > 0 {
		req.ExpiresAt = now.Add(o.expires)
	}
	vc, err := credential.Issue(issuer, req)
	if err != nil {
		return fmt.Errorf("issue: %w", err)
	}
	if o.out == "" {
		_, err = fmt.Fprintf(a.stdout, "%s\n", vc)
		return err
	}
	return os.WriteFile(o.out, append(vc, '\n'), 0o600)
}

// parseAttrs reads name=value pairs; JSON arrays and objects stay JSON.
func parseAttrs(list []string) (map[string]any, error) {
	attrs := make(map[string]any, len(list))
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--attr %q: want name=value", kv)
		}
		var j any
		if t := strings.TrimSpace(v); (strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{")) && json.Unmarshal([]byte(t), &j) == nil {
			attrs[k] = j
			continue
		}
		attrs[k] = v
	}
	return attrs, nil
}

package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/approvals"
	"github.com/packbot/packbot/audit"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm/credential"
	"github.com/packbot/packbot/store"
)

// receiptSigner is the signer of serve's receipts: the bot's signing key, the one that signs
// the audit's checkpoints (audit.KeyFromMaster), derived from the DIDComm master key
// (PACKBOT_DIDCOMM_KEY, else the data folder's key file, made on first use), so that replicas
// sharing PACKBOT_DIDCOMM_KEY sign as one bot, and the key is never stored.
func receiptSigner(a *app, dataDir, storeKind string) (*credential.Signer, error) {
	master, _, err := didcommKey(a, dataDir, storeKind)
	if err != nil {
		return nil, fmt.Errorf("receipts' signing key: %w", err)
	}
	bk, err := audit.KeyFromMaster(master)
	if err != nil {
		return nil, fmt.Errorf("receipts' signing key: %w", err)
	}
	k, err := credential.KeyFromSeed(bk.Seed())
	if err != nil {
		return nil, fmt.Errorf("receipts' signing key: %w", err)
	}
	return credential.NewSigner(k, approvals.ReceiptType), nil
}

// receiptIssuer is the DID the bot's receipts name as their issuer, from PACKBOT_DIDCOMM_KEY or
// the data folder's key file; it never makes a key.
func receiptIssuer(a *app, dataDir string) (string, error) {
	if a.getenv(EnvDIDCommKey) == "" {
		path := filepath.Join(dataDir, "didcomm.key")
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("this bot's receipt issuer is unknown here: no %s and no %s; run the command where the bot runs, "+
				"set %s as it has it, or give --issuer did:key:… (packbot receipt issuer prints it)", EnvDIDCommKey, path, EnvDIDCommKey)
		}
	}
	s, err := receiptSigner(a, dataDir, "")
	if err != nil {
		return "", err
	}
	return s.Issuer(), nil
}

func newReceiptCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "receipt",
		Short: "Check the receipts the bot gives requesters of approved calls",
		Long: `When an approved call has run, its requester is offered a receipt: a W3C verifiable credential
signed by the bot (tool, server, the arguments' fingerprint, the outcome and the result's
fingerprint, the approvers' votes with their proof digests, the audit record's id and hash;
never the arguments). 'verify' checks one; 'issuer' prints the DID receipts are signed by.
See docs/approvals-accountability.md.`,
	}
	cmd.AddCommand(newReceiptVerifyCmd(a), newReceiptIssuerCmd(a))
	return cmd
}

type receiptOptions struct {
	store  storeOptions
	issuer string
	audit  bool
}

func newReceiptVerifyCmd(a *app) *cobra.Command {
	var o receiptOptions
	cmd := &cobra.Command{
		Use:   "verify FILE",
		Short: "Verify a receipt: its signature, its issuer and (with --store) the audit record it quotes",
		Long: `verify reads a receipt (the credential's JSON, or the text a wallet kept that ends with it; - is
standard input) and checks that it is signed by its issuer, that the issuer is this bot (--issuer,
else the DID derived from PACKBOT_DIDCOMM_KEY or the data folder's key, as serve signs), and with
--store that the store's audit still holds the record it quotes, unchanged. It exits 0 when every
check passes, 1 naming the first that fails.`,
		Example: `  packbot receipt verify receipt.json
  packbot receipt verify receipt.json --store --database-url postgres://…
  packbot receipt verify receipt.json --issuer did:key:z6Mk…`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReceiptVerify(cmd.Context(), a, o, args[0])
		},
	}
	o.store.bind(cmd.Flags())
	cmd.Flags().StringVar(&o.issuer, "issuer", "", "the DID the receipt must be issued by (default: this bot's, from PACKBOT_DIDCOMM_KEY or the data folder)")
	cmd.Flags().BoolVar(&o.audit, "store", false, "also check that the store's audit holds the record the receipt quotes, unchanged")
	return cmd
}

func newReceiptIssuerCmd(a *app) *cobra.Command {
	var o storeOptions
	cmd := &cobra.Command{
		Use:   "issuer",
		Short: "Print the DID this bot signs its receipts with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			did, err := receiptIssuer(a, o.dir(a))
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, did)
			return err
		},
	}
	o.bind(cmd.Flags())
	return cmd
}

// receipt is a verified receipt's claims, as the checks read them.
type receipt struct {
	st         credential.Statement
	identity   string
	tool       string
	server     string
	args       string
	outcome    string
	approvalID string
	executedAt time.Time
	auditID    int64
	auditHash  string
	votes      int
}

func runReceiptVerify(ctx context.Context, a *app, o receiptOptions, path string) error {
	raw, err := readReceipt(path)
	if err != nil {
		return err
	}
	issuer := o.issuer
	if issuer == "" {
		if issuer, err = receiptIssuer(a, o.store.dir(a)); err != nil {
			return err
		}
	}
	st, err := credential.VerifyStatement(raw, approvals.ReceiptType, []string{issuer})
	if err != nil {
		return fmt.Errorf("receipt %s refused (%s): %w", path, credential.Reason(err), err)
	}
	r, err := readClaims(st)
	if err != nil {
		return fmt.Errorf("receipt %s: %w", path, err)
	}
	fmt.Fprintf(a.stdout, "signature: valid, by %s (this bot)\n", st.Issuer)
	fmt.Fprintf(a.stdout, "receipt: %s on %s for %s, %s at %s; approval %s, %d vote(s); audit record %d\n", r.tool, r.server, r.identity,
		r.outcome, r.executedAt.Format(time.RFC3339), r.approvalID, r.votes, r.auditID)
	if !o.audit {
		return nil
	}
	return checkReceiptAudit(ctx, a, o.store, r)
}

// readReceipt reads the credential from path (- is standard input): the credential's JSON, or a
// text that ends with it (what a channel without credential offers sent).
func readReceipt(path string) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read receipt: %w", err)
	}
	if vc, ok := channel.CredentialInText(string(b)); ok {
		return vc, nil
	}
	return nil, fmt.Errorf("receipt %s: no credential in it (want the receipt's JSON, or the text that ends with it)", path)
}

// readClaims reads what the checks need of a verified receipt.
func readClaims(st credential.Statement) (receipt, error) {
	c := st.Claims
	text := func(k string) string { s, _ := c[k].(string); return s }
	r := receipt{st: st, identity: text(approvals.ClaimIdentity), tool: text(approvals.ClaimTool), server: text(approvals.ClaimServer),
		args: text(approvals.ClaimArgsFingerprint), outcome: text(approvals.ClaimOutcome), approvalID: text(approvals.ClaimApprovalID)}
	var err error
	if r.executedAt, err = time.Parse(time.RFC3339, text(approvals.ClaimExecutedAt)); err != nil {
		return r, fmt.Errorf("claim %s: %w", approvals.ClaimExecutedAt, err)
	}
	if r.auditID, err = strconv.ParseInt(text(approvals.ClaimAuditRecordID), 10, 64); err != nil {
		return r, fmt.Errorf("claim %s: no record id", approvals.ClaimAuditRecordID)
	}
	r.auditHash = text(approvals.ClaimAuditRecordHash)
	if _, err := hex.DecodeString(r.auditHash); err != nil {
		return r, fmt.Errorf("claim %s: %q is not hex", approvals.ClaimAuditRecordHash, r.auditHash)
	}
	votes, _ := c[approvals.ClaimVotes].([]any)
	r.votes = len(votes)
	if r.identity == "" || r.tool == "" || r.server == "" {
		return r, errors.New("the receipt does not say whose call on which tool it is")
	}
	return r, nil
}

// checkReceiptAudit checks that the store's audit holds the record r quotes, as r describes it.
func checkReceiptAudit(ctx context.Context, a *app, so storeOptions, r receipt) (err error) {
	st, _, err := so.open(ctx, a)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	row, err := st.GetAudit(ctx, r.auditID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("the audit holds no record %d of %s's %s on %s: it was removed, or this is not the store of the bot that signed the receipt",
			r.auditID, r.identity, r.tool, r.server)
	}
	if err != nil {
		return fmt.Errorf("read the audit: %w", err)
	}
	if err := sameRecord(row, r); err != nil {
		return fmt.Errorf("audit record %d was changed after the receipt was signed: %w", r.auditID, err)
	}
	// Its place in the chain, and the checkpoint that covers it, signed by the bot that signed
	// the receipt (one key signs both).
	chk, err := audit.VerifyRecord(ctx, st, r.auditID, r.auditHash, r.st.Issuer)
	if err != nil {
		return fmt.Errorf("audit record %d: %w", r.auditID, err)
	}
	if chk.Checkpoint == 0 {
		fmt.Fprintf(a.stdout, "audit: record %d holds this call, unchanged, in its place (no signed checkpoint covers it yet)\n", r.auditID)
		return nil
	}
	fmt.Fprintf(a.stdout, "audit: record %d holds this call, unchanged, in its place; checkpoint %d, signed by %s, covers it\n",
		r.auditID, chk.Checkpoint, chk.Signer)
	return nil
}

// sameRecord compares an audit row with what a receipt says of it.
func sameRecord(row store.AuditRecord, r receipt) error {
	for _, f := range []struct{ name, row, receipt string }{
		{"identity", row.Identity, r.identity}, {"server", row.Server, r.server}, {"tool", row.Tool, r.tool},
		{"arguments fingerprint", row.ArgsFingerprint, r.args}, {"outcome", row.Outcome, r.outcome},
		{"approval", row.ApprovalID, r.approvalID}, {"hash", row.Hash, r.auditHash},
	} {
		if f.row != f.receipt {
			return fmt.Errorf("its %s is %q, the receipt says %q", f.name, f.row, f.receipt)
		}
	}
	return nil
}

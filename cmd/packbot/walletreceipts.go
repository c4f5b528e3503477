package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm"
)

// receive handles what reached the wallet: a credential the bot offers (a receipt) is accepted,
// and once issued kept in the data folder's receipts/; everything else is shown.
func (u *walletUI) receive(ctx context.Context, w *didcomm.Wallet, e didcomm.WalletEvent) {
	switch {
	case e.CredentialOffer != nil:
		o := e.CredentialOffer
		u.out(map[string]any{"event": "credential-offer", "id": o.ID, "comment": o.Comment}, "the bot offers a credential: %s (accepting it)", o.Comment)
		if err := w.AcceptCredential(ctx, o.ID); err != nil {
			// Not a failure of anything the user asked: the offer stays with the bot, and the
			// session goes on.
			u.out(map[string]any{"event": "credential-not-accepted", "id": o.ID, "reason": err.Error()},
				"could not accept the credential: %v", err)
		}
	case e.Credential != nil:
		path, err := keepCredential(u.dir, *e.Credential)
		if err != nil {
			u.fail(err)
			return
		}
		u.out(map[string]any{"event": "credential", "id": e.Credential.ID, "file": path},
			"kept the credential in %s (packbot receipt verify %s checks it)", path, path)
	default:
		u.show(e)
	}
}

// unsafeName matches what a file name may not hold of an offer's id.
var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// keepCredential writes a credential issued to the wallet to dir/receipts/ID.json.
func keepCredential(dir string, c channel.CredentialOffer) (string, error) {
	d := filepath.Join(dir, "receipts")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("keep the credential: %w", err)
	}
	name := unsafeName.ReplaceAllString(c.ID, "_")
	if name == "" || name == "." || name == ".." {
		name = "credential"
	}
	path := filepath.Join(d, name+".json")
	if err := os.WriteFile(path, c.Credential, 0o600); err != nil {
		return "", fmt.Errorf("keep the credential: %w", err)
	}
	return path, nil
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm"
)

// TestWalletKeepsCredentials: a credential issued to the terminal wallet is written to its
// data folder, under a file name made safe from the offer's id, and the user is told where.
func TestWalletKeepsCredentials(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	u := &walletUI{a: &app{stdout: &out}, dir: dir}
	u.receive(t.Context(), nil, didcomm.WalletEvent{Credential: &channel.CredentialOffer{ID: "../receipt-1", Credential: []byte(`{"a":1}`)}})
	path := filepath.Join(dir, "receipts", ".._receipt-1.json")
	b, err := os.ReadFile(path)
	if err != nil || string(b) != `{"a":1}` {
		t.Fatalf("kept %q, %v", b, err)
	}
	if !strings.Contains(out.String(), path) {
		t.Fatalf("the wallet said %q", out.String())
	}
}

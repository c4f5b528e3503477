package transcript_test

import (
	"strings"
	"testing"

	"github.com/packbot/packbot/transcript"
)

// TestParseHoldAndReceipt: a wallet's re-issued credential and a receipt check read as steps,
// and their mistakes are reported with file:line.
func TestParseHoldAndReceipt(t *testing.T) {
	s, err := transcript.Parse("x.txt", []byte("connect bob lang=en email=bob@acme.corp\nbob: hold roles=treasurer name=\"Bob B\"\n"+
		"receipt: bob create_invoice executed proved=1\nreceipt: bob send_money failed\n"))
	if err != nil {
		t.Fatal(err)
	}
	hold, r1, r2 := s.Steps[1], s.Steps[2], s.Steps[3]
	if hold.Kind != transcript.Hold || hold.Claims["roles"] != "treasurer" || hold.Claims["name"] != "Bob B" {
		t.Errorf("hold %+v", hold)
	}
	if r1.Kind != transcript.Receipt || r1.Wallet != "bob" || r1.Tool != "create_invoice" || r1.Text != "executed" || r1.N != 1 || r1.Line != 3 {
		t.Errorf("receipt %+v", r1)
	}
	if r2.N != -1 || r2.Text != "failed" {
		t.Errorf("receipt without proved= %+v", r2)
	}
	for _, c := range []struct{ src, want string }{
		{"connect a lang=en\na: hold", "x.txt:2: hold: want at least one claim=value"},
		{"connect a lang=en\na: hold lang=es", "x.txt:2: hold: want claim=value"},
		{"receipt: a t executed", "x.txt:1: wallet \"a\" is used before connect"},
		{"connect a lang=en\nreceipt: a t", "x.txt:2: receipt: want NAME TOOL OUTCOME"},
		{"connect a lang=en\nreceipt: a t executed proved=x", "x.txt:2: receipt: want proved=N"},
	} {
		if _, err := transcript.Parse("x.txt", []byte(c.src)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
}

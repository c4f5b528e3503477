package demoserver_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/mcp/demoserver"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestLedgerTransferCompletes(t *testing.T) {
	c := &clock{t: testNow()}
	l := demoserver.NewLedger(c.Now)
	tr, _, err := l.Send(demoserver.SendRequest{Recipient: "Jane Cooper", Amount: 20, Currency: demoserver.GBP})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if tr.TargetCurrency != demoserver.EUR || tr.TargetAmount != 23.36 || tr.Status != demoserver.StatusProcessing {
		t.Errorf("send 20 GBP to Jane = %+v, want 23.36 EUR, processing", tr)
	}
	c.Advance(29 * time.Minute)
	if got, err := l.Transfer(tr.ID); err != nil || got.Status != demoserver.StatusProcessing {
		t.Errorf("after 29 min: %q, %v; want processing", got.Status, err)
	}
	c.Advance(time.Minute)
	if got, err := l.Transfer(tr.ID); err != nil || got.Status != demoserver.StatusCompleted {
		t.Errorf("after 30 min: %q, %v; want completed", got.Status, err)
	}
	// A cancelled opening transfer stays cancelled.
	if got, err := l.Transfer("t-1003"); err != nil || got.Status != demoserver.StatusCancelled {
		t.Errorf("T-1003: %q, %v; want cancelled", got.Status, err)
	}
}

func TestLedgerRefusals(t *testing.T) {
	l := demoserver.NewLedger(testNow)
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"unknown profile", first(l.Balances("nobody")), demoserver.ErrUnknownProfile},
		{"transfers of unknown profile", first(l.Transfers("nobody", 1)), demoserver.ErrUnknownProfile},
		{"unknown transfer", first(l.Transfer("T-1")), demoserver.ErrUnknownTransfer},
		{"unknown currency", first(demoserver.Rate("EUR", "JPY")), demoserver.ErrUnknownCurrency},
		{"zero", sendErr(l, demoserver.SendRequest{Recipient: "rcp-jane", Currency: "EUR"}), demoserver.ErrInvalidAmount},
		{"negative", sendErr(l, demoserver.SendRequest{Recipient: "rcp-jane", Amount: -1, Currency: "EUR"}), demoserver.ErrInvalidAmount},
		{"too large", sendErr(l, demoserver.SendRequest{Recipient: "rcp-jane", Amount: 2e6, Currency: "EUR"}), demoserver.ErrInvalidAmount},
		{"sub-cent", sendErr(l, demoserver.SendRequest{Recipient: "rcp-jane", Amount: 0.001, Currency: "EUR"}), demoserver.ErrInvalidAmount},
		{"unknown recipient", sendErr(l, demoserver.SendRequest{Recipient: "Bob", Amount: 1, Currency: "EUR"}), demoserver.ErrUnknownRecipient},
		{"funds", sendErr(l, demoserver.SendRequest{ProfileID: "alex-morgan", Recipient: "rcp-jane", Amount: 4200.51, Currency: "EUR"}), demoserver.ErrInsufficientFunds},
		{"send from unknown profile", sendErr(l, demoserver.SendRequest{ProfileID: "x", Recipient: "rcp-jane", Amount: 1, Currency: "EUR"}), demoserver.ErrUnknownProfile},
		{"send unknown currency", sendErr(l, demoserver.SendRequest{Recipient: "rcp-jane", Amount: 1, Currency: "eur"}), demoserver.ErrUnknownCurrency},
		{"bad date", first(l.CreateInvoice(demoserver.InvoiceRequest{Customer: "c", Amount: 1, Currency: "EUR", DueDate: "02/03/2026"})), demoserver.ErrInvalidDate},
		{"past date", first(l.CreateInvoice(demoserver.InvoiceRequest{Customer: "c", Amount: 1, Currency: "EUR", DueDate: "2026-03-01"})), demoserver.ErrInvalidDate},
		{"invoice amount", first(l.CreateInvoice(demoserver.InvoiceRequest{Customer: "c", Currency: "EUR"})), demoserver.ErrInvalidAmount},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if _, err := l.CreateInvoice(demoserver.InvoiceRequest{Customer: "  ", Amount: 1, Currency: "EUR"}); err == nil {
		t.Error("invoice for a blank customer: want an error")
	}
	// Nothing was recorded, and alex-morgan can still spend exactly what she holds.
	if got, err := l.Transfers("", 0); err != nil || len(got) != 4 {
		t.Errorf("transfers after refusals: %d, %v; want the 4 opening ones", len(got), err)
	}
	if len(l.Invoices()) != 0 {
		t.Errorf("invoices after refusals: %+v", l.Invoices())
	}
	if _, b, err := l.Send(demoserver.SendRequest{ProfileID: "alex-morgan", Recipient: "rcp-jane", Amount: 4200.50, Currency: "EUR"}); err != nil || b.Amount != 0 {
		t.Errorf("send the whole balance: %+v, %v; want 0 left", b, err)
	}
}

func TestRates(t *testing.T) {
	for _, from := range demoserver.Currencies() {
		for _, to := range demoserver.Currencies() {
			r, err := demoserver.Rate(from, to)
			if err != nil || r <= 0 || (from == to) != (r == 1) {
				t.Errorf("Rate(%s, %s) = %v, %v", from, to, r, err)
			}
		}
	}
}

func first[T any](_ T, err error) error { return err }

func sendErr(l *demoserver.Ledger, r demoserver.SendRequest) error {
	_, _, err := l.Send(r)
	return err
}

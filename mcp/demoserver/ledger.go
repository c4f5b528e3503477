package demoserver

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Expected refusals of the ledger, told apart with [errors.Is]. The tools turn each into a tool
// error whose text is the wrapped message, so the model can correct its next call.
var (
	ErrUnknownCurrency   = errors.New("unknown currency")
	ErrUnknownProfile    = errors.New("unknown profile")
	ErrUnknownRecipient  = errors.New("unknown recipient")
	ErrUnknownTransfer   = errors.New("unknown transfer")
	ErrInvalidAmount     = errors.New("invalid amount")
	ErrInsufficientFunds = errors.New("insufficient funds")
	ErrInvalidDate       = errors.New("invalid date")
)

// Currency is an ISO 4217 code; the demo bank holds EUR, USD and GBP only.
type Currency string

// The currencies of the demo bank.
const (
	EUR Currency = "EUR"
	USD Currency = "USD"
	GBP Currency = "GBP"
)

// Currencies lists the currencies the ledger knows, in a fixed order.
func Currencies() []Currency { return []Currency{EUR, USD, GBP} }

// MaxAmount is the largest amount one transfer or invoice may carry, in major units.
const MaxAmount = 1_000_000

// deliveryDelay is how long a new transfer stays "processing" before it reads as "completed".
const deliveryDelay = 30 * time.Minute

// Transfer statuses.
const (
	StatusProcessing = "processing"
	StatusCompleted  = "completed"
	StatusCancelled  = "cancelled"
)

// rates are the fixed mid-market rates of the demo bank: 1 unit of the key's first currency buys
// this many units of the second.
var rates = map[[2]Currency]float64{
	{EUR, USD}: 1.0850, {EUR, GBP}: 0.8560,
	{USD, EUR}: 0.9217, {USD, GBP}: 0.7889,
	{GBP, EUR}: 1.1682, {GBP, USD}: 1.2675,
}

// Rate returns the fixed exchange rate from one currency to another (1 for the same currency).
func Rate(from, to Currency) (float64, error) {
	if err := checkCurrency(from); err != nil {
		return 0, err
	}
	if err := checkCurrency(to); err != nil {
		return 0, err
	}
	if from == to {
		return 1, nil
	}
	return rates[[2]Currency{from, to}], nil
}

func checkCurrency(c Currency) error {
	if !slices.Contains(Currencies(), c) {
		return fmt.Errorf("%w %q (use one of EUR, USD, GBP)", ErrUnknownCurrency, c)
	}
	return nil
}

// Profile is an account holder: the business treasury or a person.
type Profile struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type" jsonschema:"business or personal"`
}

// Balance is the amount a profile holds in one currency.
type Balance struct {
	ProfileID   string   `json:"profileId"`
	ProfileName string   `json:"profileName"`
	Currency    Currency `json:"currency"`
	Amount      float64  `json:"amount" jsonschema:"amount in major units (e.g. 12.50)"`
}

// Recipient is a saved payee that money can be sent to.
type Recipient struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Currency Currency `json:"currency" jsonschema:"the currency the recipient is paid in"`
	Account  string   `json:"account" jsonschema:"masked account number"`
	Country  string   `json:"country" jsonschema:"ISO 3166 country code"`
}

// Transfer is a payment from a profile to a recipient, converted at the fixed rate.
type Transfer struct {
	ID             string    `json:"id"`
	ProfileID      string    `json:"profileId"`
	RecipientID    string    `json:"recipientId"`
	RecipientName  string    `json:"recipientName"`
	SourceAmount   float64   `json:"sourceAmount" jsonschema:"amount debited, in major units"`
	SourceCurrency Currency  `json:"sourceCurrency"`
	TargetAmount   float64   `json:"targetAmount" jsonschema:"amount the recipient receives, in major units"`
	TargetCurrency Currency  `json:"targetCurrency"`
	Rate           float64   `json:"rate"`
	Reference      string    `json:"reference,omitempty"`
	Status         string    `json:"status" jsonschema:"processing, completed or cancelled"`
	CreatedAt      time.Time `json:"createdAt"`
}

// Invoice is a request for payment sent to a customer.
type Invoice struct {
	ID        string    `json:"invoiceId"`
	ProfileID string    `json:"profileId"`
	Customer  string    `json:"customer"`
	Amount    float64   `json:"amount"`
	Currency  Currency  `json:"currency"`
	DueDate   string    `json:"dueDate" jsonschema:"YYYY-MM-DD"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"createdAt"`
}

// SendRequest asks [Ledger.Send] to pay a recipient. Recipient is an ID or a name (any case);
// an empty ProfileID means the business profile.
type SendRequest struct {
	ProfileID string
	Recipient string
	Amount    float64
	Currency  Currency
	Reference string
}

// InvoiceRequest asks [Ledger.CreateInvoice] for an invoice. An empty DueDate means 30 days
// from today; an empty ProfileID means the business profile.
type InvoiceRequest struct {
	ProfileID string
	Customer  string
	Amount    float64
	Currency  Currency
	DueDate   string
}

type transfer struct {
	Transfer
	settled bool // status is final (seeded transfers); otherwise it follows deliveryDelay
}

type balanceKey struct {
	profile  string
	currency Currency
}

// Ledger is the in-memory books of the demo bank. Every method is safe for concurrent use; a
// [Ledger.Send] is atomic (the balance check, the debit and the record happen under one lock).
type Ledger struct {
	now func() time.Time

	mu         sync.Mutex
	profiles   []Profile
	balances   map[balanceKey]int64 // cents
	recipients []Recipient
	transfers  []transfer // oldest first
	invoices   []Invoice
}

// DefaultProfileID is the business profile that [Ledger.Send] and [Ledger.CreateInvoice] use when
// no profile is named.
const DefaultProfileID = "acme-treasury"

// NewLedger returns the demo bank's books with their deterministic opening data: two profiles,
// balances in every currency, four recipients and four past transfers dated relative to now().
// A nil now means [time.Now].
func NewLedger(now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	start := now().UTC().Truncate(time.Minute)
	l := &Ledger{
		now: now,
		profiles: []Profile{
			{ID: DefaultProfileID, Name: "Acme Treasury", Type: "business"},
			{ID: "alex-morgan", Name: "Alex Morgan", Type: "personal"},
		},
		balances: map[balanceKey]int64{
			{DefaultProfileID, EUR}: 25_000_000, {DefaultProfileID, USD}: 12_000_000, {DefaultProfileID, GBP}: 8_000_000,
			{"alex-morgan", EUR}: 420_050, {"alex-morgan", USD}: 35_000, {"alex-morgan", GBP}: 15_000,
		},
		recipients: []Recipient{
			{ID: "rcp-globex", Name: "Globex Corporation", Currency: EUR, Account: "DE89 •••• 3000", Country: "DE"},
			{ID: "rcp-initech", Name: "Initech Ltd", Currency: GBP, Account: "GB29 •••• 6819", Country: "GB"},
			{ID: "rcp-umbrella", Name: "Umbrella Supplies Inc", Currency: USD, Account: "•••• 7731", Country: "US"},
			{ID: "rcp-jane", Name: "Jane Cooper", Currency: EUR, Account: "FR76 •••• 0189", Country: "FR"},
		},
	}
	seed := []struct {
		profile, recipient string
		cents              int64
		currency           Currency
		reference, status  string
		ago                time.Duration
	}{
		{DefaultProfileID, "rcp-globex", 1_250_000, EUR, "Invoice GX-2291", StatusCompleted, 72 * time.Hour},
		{DefaultProfileID, "rcp-initech", 480_000, USD, "Consulting March", StatusCompleted, 48 * time.Hour},
		{"alex-morgan", "rcp-jane", 6_000, EUR, "Dinner", StatusCancelled, 26 * time.Hour},
		{DefaultProfileID, "rcp-umbrella", 99_900, USD, "Office supplies", StatusProcessing, 10 * time.Minute},
	}
	for _, s := range seed {
		t := l.newTransferLocked(s.profile, l.recipientLocked(s.recipient), s.cents, s.currency, s.reference, start.Add(-s.ago))
		t.Status = s.status
		l.transfers = append(l.transfers, transfer{Transfer: t, settled: s.status != StatusProcessing})
	}
	return l
}

// Profiles returns every profile.
func (l *Ledger) Profiles() []Profile {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.profiles)
}

// Balances returns the balances of one profile, or of every profile when profileID is empty.
func (l *Ledger) Balances(profileID string) ([]Balance, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Balance
	for _, p := range l.profiles {
		if profileID != "" && p.ID != profileID {
			continue
		}
		for _, c := range Currencies() {
			out = append(out, l.balanceLocked(p, c))
		}
	}
	if out == nil {
		return nil, l.unknownProfileLocked(profileID)
	}
	return out, nil
}

// Recipients returns every saved recipient.
func (l *Ledger) Recipients() []Recipient {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recipients)
}

// Transfers returns up to limit transfers, newest first, of one profile or of every profile when
// profileID is empty. A limit below 1 means no limit.
func (l *Ledger) Transfers(profileID string, limit int) ([]Transfer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if profileID != "" && l.profileLocked(profileID) == nil {
		return nil, l.unknownProfileLocked(profileID)
	}
	now := l.now()
	out := []Transfer{}
	for i := len(l.transfers) - 1; i >= 0 && (limit < 1 || len(out) < limit); i-- {
		if t := l.transfers[i]; profileID == "" || t.ProfileID == profileID {
			out = append(out, t.at(now))
		}
	}
	return out, nil
}

// Transfer returns one transfer with its current status.
func (l *Ledger) Transfer(id string) (Transfer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.transfers {
		if strings.EqualFold(t.ID, id) {
			return t.at(l.now()), nil
		}
	}
	return Transfer{}, fmt.Errorf("%w %q (see list_transfers)", ErrUnknownTransfer, id)
}

// Send debits the profile's balance in the request's currency, converts the amount into the
// recipient's currency at the fixed rate and records a transfer, which it returns with the
// balance left. It refuses an unknown profile, recipient or currency, an amount that is not
// positive, has more than two decimals or exceeds [MaxAmount], and insufficient funds; a refused
// request changes nothing.
func (l *Ledger) Send(req SendRequest) (Transfer, Balance, error) {
	cents, err := toCents(req.Amount)
	if err != nil {
		return Transfer{}, Balance{}, err
	}
	if err := checkCurrency(req.Currency); err != nil {
		return Transfer{}, Balance{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p, err := l.profileOrDefaultLocked(req.ProfileID)
	if err != nil {
		return Transfer{}, Balance{}, err
	}
	r := l.findRecipientLocked(req.Recipient)
	if r == nil {
		return Transfer{}, Balance{}, fmt.Errorf("%w %q (see list_recipients; known: %s)", ErrUnknownRecipient, req.Recipient, l.recipientIDsLocked())
	}
	key := balanceKey{p.ID, req.Currency}
	if have := l.balances[key]; have < cents {
		return Transfer{}, Balance{}, fmt.Errorf("%w: %s holds %s %s, the transfer needs %s %s",
			ErrInsufficientFunds, p.Name, formatCents(have), req.Currency, formatCents(cents), req.Currency)
	}
	l.balances[key] -= cents
	t := l.newTransferLocked(p.ID, r, cents, req.Currency, strings.TrimSpace(req.Reference), l.now().UTC())
	l.transfers = append(l.transfers, transfer{Transfer: t})
	return t, l.balanceLocked(*p, req.Currency), nil
}

// CreateInvoice records an open invoice and returns it. It refuses an empty customer, an invalid
// amount, an unknown currency or profile, and a due date that is malformed or in the past.
func (l *Ledger) CreateInvoice(req InvoiceRequest) (Invoice, error) {
	cents, err := toCents(req.Amount)
	if err != nil {
		return Invoice{}, err
	}
	if err := checkCurrency(req.Currency); err != nil {
		return Invoice{}, err
	}
	customer := strings.TrimSpace(req.Customer)
	if customer == "" {
		return Invoice{}, errors.New("customer must not be empty")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p, err := l.profileOrDefaultLocked(req.ProfileID)
	if err != nil {
		return Invoice{}, err
	}
	now := l.now().UTC()
	today := now.Format(time.DateOnly)
	due := req.DueDate
	if due == "" {
		due = now.AddDate(0, 0, 30).Format(time.DateOnly)
	} else if _, err := time.Parse(time.DateOnly, due); err != nil {
		return Invoice{}, fmt.Errorf("%w %q: use YYYY-MM-DD", ErrInvalidDate, due)
	} else if due < today {
		return Invoice{}, fmt.Errorf("%w %q: the due date is before today (%s)", ErrInvalidDate, due, today)
	}
	inv := Invoice{
		ID:        fmt.Sprintf("INV-%04d", len(l.invoices)+1),
		ProfileID: p.ID,
		Customer:  customer,
		Amount:    fromCents(cents),
		Currency:  req.Currency,
		DueDate:   due,
		Status:    "open",
		CreatedAt: now,
	}
	l.invoices = append(l.invoices, inv)
	return inv, nil
}

// Invoices returns every invoice, oldest first.
func (l *Ledger) Invoices() []Invoice {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.invoices)
}

func (l *Ledger) newTransferLocked(profile string, r *Recipient, cents int64, c Currency, ref string, at time.Time) Transfer {
	rate, _ := Rate(c, r.Currency) // both currencies come from the ledger or were checked
	return Transfer{
		ID:             fmt.Sprintf("T-%d", 1001+len(l.transfers)),
		ProfileID:      profile,
		RecipientID:    r.ID,
		RecipientName:  r.Name,
		SourceAmount:   fromCents(cents),
		SourceCurrency: c,
		TargetAmount:   fromCents(int64(math.Round(float64(cents) * rate))),
		TargetCurrency: r.Currency,
		Rate:           rate,
		Reference:      ref,
		Status:         StatusProcessing,
		CreatedAt:      at,
	}
}

// at returns the transfer as seen at now: an unsettled transfer completes after deliveryDelay.
func (t transfer) at(now time.Time) Transfer {
	out := t.Transfer
	if !t.settled && !now.Before(t.CreatedAt.Add(deliveryDelay)) {
		out.Status = StatusCompleted
	}
	return out
}

func (l *Ledger) balanceLocked(p Profile, c Currency) Balance {
	return Balance{ProfileID: p.ID, ProfileName: p.Name, Currency: c, Amount: fromCents(l.balances[balanceKey{p.ID, c}])}
}

func (l *Ledger) profileLocked(id string) *Profile {
	for i := range l.profiles {
		if l.profiles[i].ID == id {
			return &l.profiles[i]
		}
	}
	return nil
}

func (l *Ledger) profileOrDefaultLocked(id string) (*Profile, error) {
	if id == "" {
		id = DefaultProfileID
	}
	if p := l.profileLocked(id); p != nil {
		return p, nil
	}
	return nil, l.unknownProfileLocked(id)
}

func (l *Ledger) unknownProfileLocked(id string) error {
	ids := make([]string, len(l.profiles))
	for i, p := range l.profiles {
		ids[i] = p.ID
	}
	return fmt.Errorf("%w %q (known: %s)", ErrUnknownProfile, id, strings.Join(ids, ", "))
}

func (l *Ledger) recipientLocked(id string) *Recipient {
	for i := range l.recipients {
		if l.recipients[i].ID == id {
			return &l.recipients[i]
		}
	}
	return nil
}

// findRecipientLocked matches an ID or a name, ignoring case and surrounding spaces.
func (l *Ledger) findRecipientLocked(idOrName string) *Recipient {
	s := strings.TrimSpace(idOrName)
	for i, r := range l.recipients {
		if strings.EqualFold(r.ID, s) || strings.EqualFold(r.Name, s) {
			return &l.recipients[i]
		}
	}
	return nil
}

func (l *Ledger) recipientIDsLocked() string {
	ids := make([]string, len(l.recipients))
	for i, r := range l.recipients {
		ids[i] = r.ID
	}
	return strings.Join(ids, ", ")
}

// toCents converts a positive amount in major units with at most two decimals.
func toCents(amount float64) (int64, error) {
	if math.IsNaN(amount) || amount <= 0 {
		return 0, fmt.Errorf("%w %v: it must be greater than zero", ErrInvalidAmount, amount)
	}
	if amount > MaxAmount {
		return 0, fmt.Errorf("%w %v: the most one operation may carry is %d", ErrInvalidAmount, amount, MaxAmount)
	}
	cents := math.Round(amount * 100)
	if math.Abs(cents-amount*100) > 1e-6 {
		return 0, fmt.Errorf("%w %v: use at most two decimals", ErrInvalidAmount, amount)
	}
	return int64(cents), nil
}

func fromCents(c int64) float64 { return float64(c) / 100 }

func formatCents(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }

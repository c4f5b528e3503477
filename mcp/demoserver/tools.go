package demoserver

import (
	"context"
	"encoding/json"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The names of the built-in tools.
const (
	ToolGetExchangeRate   = "get_exchange_rate"
	ToolListProfiles      = "list_profiles"
	ToolGetBalances       = "get_balances"
	ToolListTransfers     = "list_transfers"
	ToolGetTransferStatus = "get_transfer_status"
	ToolListRecipients    = "list_recipients"
	ToolSendMoney         = "send_money"
	ToolCreateInvoice     = "create_invoice"
	ToolGetStats          = "get_stats"
)

// Tool inputs. Field tags become the input schema (descriptions, required fields); the schema
// functions below add enums, bounds and defaults.
type (
	exchangeRateIn struct {
		From Currency `json:"from" jsonschema:"the currency to convert from"`
		To   Currency `json:"to" jsonschema:"the currency to convert to"`
	}
	noIn       struct{}
	balancesIn struct {
		ProfileID string `json:"profileId,omitempty" jsonschema:"the profile whose balances to show; omit for every profile (see list_profiles)"`
	}
	listTransfersIn struct {
		Limit     int    `json:"limit,omitempty" jsonschema:"the most transfers to return, newest first"`
		ProfileID string `json:"profileId,omitempty" jsonschema:"only the transfers of this profile; omit for every profile"`
	}
	transferStatusIn struct {
		TransferID string `json:"transferId" jsonschema:"the transfer ID, e.g. T-1001 (see list_transfers)"`
	}
	sendMoneyIn struct {
		Recipient string   `json:"recipient" jsonschema:"the recipient's ID (e.g. rcp-globex) or exact name, from list_recipients"`
		Amount    float64  `json:"amount" jsonschema:"the amount to debit, in major units of currency (e.g. 250.00), with at most two decimals"`
		Currency  Currency `json:"currency" jsonschema:"the currency of amount, debited from the balance in that currency"`
		Reference string   `json:"reference,omitempty" jsonschema:"an optional note shown to the recipient"`
		ProfileID string   `json:"profileId,omitempty" jsonschema:"the profile to debit; omit for the business profile acme-treasury"`
	}
	createInvoiceIn struct {
		Customer  string   `json:"customer" jsonschema:"the name of the customer to invoice"`
		Amount    float64  `json:"amount" jsonschema:"the amount due, in major units of currency, with at most two decimals"`
		Currency  Currency `json:"currency" jsonschema:"the currency of the invoice"`
		DueDate   string   `json:"dueDate,omitempty" jsonschema:"the due date as YYYY-MM-DD; omit for 30 days from today"`
		ProfileID string   `json:"profileId,omitempty" jsonschema:"the profile issuing the invoice; omit for acme-treasury"`
	}
)

// Tool outputs: the structured content of each result, and its output schema.
type (
	// ExchangeRate is the result of get_exchange_rate.
	ExchangeRate struct {
		From Currency  `json:"from"`
		To   Currency  `json:"to"`
		Rate float64   `json:"rate" jsonschema:"units of to bought by one unit of from"`
		AsOf time.Time `json:"asOf"`
	}
	profilesOut struct {
		Profiles []Profile `json:"profiles"`
	}
	balancesOut struct {
		Balances []Balance `json:"balances"`
		AsOf     time.Time `json:"asOf"`
	}
	transfersOut struct {
		Transfers []Transfer `json:"transfers"`
	}
	recipientsOut struct {
		Recipients []Recipient `json:"recipients"`
	}
	sendMoneyOut struct {
		Transfer Transfer `json:"transfer"`
		Balance  Balance  `json:"balance" jsonschema:"the balance left in the debited currency"`
	}
)

func currencySchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Enum: []any{string(EUR), string(USD), string(GBP)}}
}

// inputSchema infers the schema of T (with the currency enum) and lets edit refine its
// properties. An error is a programming error, hence the panic.
func inputSchema[T any](edit func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[Currency](): currencySchema()},
	})
	if err != nil {
		panic("demoserver: input schema: " + err.Error())
	}
	if edit != nil {
		edit(s.Properties)
	}
	return s
}

func amountBounds(p *jsonschema.Schema) {
	p.ExclusiveMinimum = ptr(0.0)
	p.Maximum = ptr(float64(MaxAmount))
}

func ptr[T any](v T) *T { return &v }

// registerBuiltins adds the bank's tools to the SDK server.
func (s *Server) registerBuiltins() {
	profileIDs := []any{}
	for _, p := range s.ledger.Profiles() {
		profileIDs = append(profileIDs, p.ID)
	}
	profileEnum := func(props map[string]*jsonschema.Schema) { props["profileId"].Enum = profileIDs }
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}

	addTool(s, &mcp.Tool{
		Name:  ToolGetExchangeRate,
		Title: "Exchange rate",
		Description: "Get the bank's current exchange rate between two currencies (EUR, USD, GBP): " +
			"how many units of `to` one unit of `from` buys. Use it to convert amounts; never guess rates.",
		InputSchema: inputSchema[exchangeRateIn](nil),
		Annotations: readOnly,
	}, func(_ context.Context, in exchangeRateIn) (ExchangeRate, error) {
		rate, err := Rate(in.From, in.To)
		return ExchangeRate{From: in.From, To: in.To, Rate: rate, AsOf: s.now().UTC()}, err
	})

	addTool(s, &mcp.Tool{
		Name:        ToolListProfiles,
		Title:       "Profiles",
		Description: "List the bank's profiles (account holders): the business treasury and a personal account, with their IDs.",
		InputSchema: inputSchema[noIn](nil),
		Annotations: readOnly,
	}, func(context.Context, noIn) (profilesOut, error) {
		return profilesOut{Profiles: s.ledger.Profiles()}, nil
	})

	addTool(s, &mcp.Tool{
		Name:        ToolGetBalances,
		Title:       "Balances",
		Description: "Get the balances of a profile in every currency (EUR, USD, GBP), or of every profile when profileId is omitted. Amounts are in major units.",
		InputSchema: inputSchema[balancesIn](profileEnum),
		Annotations: readOnly,
	}, func(_ context.Context, in balancesIn) (balancesOut, error) {
		b, err := s.ledger.Balances(in.ProfileID)
		return balancesOut{Balances: b, AsOf: s.now().UTC()}, err
	})

	addTool(s, &mcp.Tool{
		Name:        ToolListTransfers,
		Title:       "Transfers",
		Description: "List recent transfers, newest first, with amounts, recipient, reference and status (processing, completed or cancelled).",
		InputSchema: inputSchema[listTransfersIn](func(props map[string]*jsonschema.Schema) {
			profileEnum(props)
			props["limit"].Minimum, props["limit"].Maximum = ptr(1.0), ptr(100.0)
			props["limit"].Default = json.RawMessage("10")
		}),
		Annotations: readOnly,
	}, func(_ context.Context, in listTransfersIn) (transfersOut, error) {
		t, err := s.ledger.Transfers(in.ProfileID, in.Limit)
		return transfersOut{Transfers: t}, err
	})

	addTool(s, &mcp.Tool{
		Name:        ToolGetTransferStatus,
		Title:       "Transfer status",
		Description: "Get one transfer by its ID, with its current status: processing (on its way), completed or cancelled.",
		InputSchema: inputSchema[transferStatusIn](func(props map[string]*jsonschema.Schema) {
			props["transferId"].MinLength = ptr(1)
		}),
		Annotations: readOnly,
	}, func(_ context.Context, in transferStatusIn) (Transfer, error) {
		return s.ledger.Transfer(in.TransferID)
	})

	addTool(s, &mcp.Tool{
		Name:        ToolListRecipients,
		Title:       "Recipients",
		Description: "List the saved recipients that send_money can pay, with their IDs, names and the currency they are paid in.",
		InputSchema: inputSchema[noIn](nil),
		Annotations: readOnly,
	}, func(context.Context, noIn) (recipientsOut, error) {
		return recipientsOut{Recipients: s.ledger.Recipients()}, nil
	})

	addTool(s, &mcp.Tool{
		Name:  ToolSendMoney,
		Title: "Send money",
		Description: "Send money to a saved recipient (see list_recipients). This moves real funds in the ledger: it debits " +
			"`amount` in `currency` from the profile's balance, converts it into the recipient's currency at the bank's rate " +
			"and returns the new transfer and the balance left. It fails, changing nothing, for an unknown recipient, " +
			"an amount that is not positive, or insufficient funds. Confirm the recipient and amount with the user first.",
		InputSchema: inputSchema[sendMoneyIn](func(props map[string]*jsonschema.Schema) {
			props["recipient"].MinLength = ptr(1)
			amountBounds(props["amount"])
			props["reference"].MaxLength = ptr(140)
			profileEnum(props)
		}),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, in sendMoneyIn) (sendMoneyOut, error) {
		t, b, err := s.ledger.Send(SendRequest{ProfileID: in.ProfileID, Recipient: in.Recipient, Amount: in.Amount, Currency: in.Currency, Reference: in.Reference})
		if err != nil {
			return sendMoneyOut{}, err
		}
		s.logger.InfoContext(ctx, "money sent", "transfer", t.ID, "profile", t.ProfileID, "recipient", t.RecipientID,
			"amount", t.SourceAmount, "currency", t.SourceCurrency)
		return sendMoneyOut{Transfer: t, Balance: b}, nil
	})

	addTool(s, &mcp.Tool{
		Name:  ToolCreateInvoice,
		Title: "Create invoice",
		Description: "Create an invoice asking a customer to pay an amount by a due date, and return its invoice ID. " +
			"The invoice is recorded as open; no money moves until the customer pays.",
		InputSchema: inputSchema[createInvoiceIn](func(props map[string]*jsonschema.Schema) {
			props["customer"].MinLength, props["customer"].MaxLength = ptr(1), ptr(200)
			amountBounds(props["amount"])
			props["dueDate"].Pattern = `^\d{4}-\d{2}-\d{2}$`
			props["dueDate"].Format = "date"
			profileEnum(props)
		}),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, in createInvoiceIn) (Invoice, error) {
		inv, err := s.ledger.CreateInvoice(InvoiceRequest{ProfileID: in.ProfileID, Customer: in.Customer, Amount: in.Amount, Currency: in.Currency, DueDate: in.DueDate})
		if err == nil {
			s.logger.InfoContext(ctx, "invoice created", "invoice", inv.ID, "amount", inv.Amount, "currency", inv.Currency)
		}
		return inv, err
	})

	addTool(s, &mcp.Tool{
		Name:  ToolGetStats,
		Title: "Server statistics",
		Description: "Diagnostics for tests and operators: how many times each tool has run successfully (and failed) " +
			"since the server started. Not needed to serve users.",
		InputSchema: inputSchema[noIn](nil),
		Annotations: readOnly,
	}, func(context.Context, noIn) (Stats, error) {
		return s.Stats(), nil
	})
}

// addTool registers a typed tool whose handler sees only its input: a returned error becomes a
// tool error (IsError, with the error's text), and every outcome is counted in the stats.
func addTool[In, Out any](s *Server, t *mcp.Tool, h func(context.Context, In) (Out, error)) {
	mcp.AddTool(s.mcp, t, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		out, err := h(ctx, in)
		s.stats.record(t.Name, err)
		if err != nil {
			s.logger.DebugContext(ctx, "tool refused", "tool", t.Name, "err", err)
		}
		return nil, out, err
	})
	s.trackTool(t.Name, true)
}

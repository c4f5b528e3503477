package demoserver_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/packbot/packbot/mcp/demoserver"
)

// TestTools runs every tool over every transport, on a fresh server each time.
func TestTools(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			srv := newServer(t, tr)
			cs := tr.dial(t, srv, nil)
			testCatalog(t, cs)
			testReads(t, cs)
			testSendMoney(t, cs)
			testRefusals(t, cs)
			testCreateInvoice(t, cs)
			if st := srv.Stats(); st.SendMoneyExecutions != 2 || st.Executions[demoserver.ToolCreateInvoice] != 2 {
				t.Errorf("Server.Stats() = %+v, want 2 send_money and 2 create_invoice", st)
			}
		})
	}
}

func testCatalog(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	var names []string
	var send *mcp.Tool
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		names = append(names, tool.Name)
		if tool.Description == "" || tool.OutputSchema == nil {
			t.Errorf("tool %s: description %q, output schema %v: want both", tool.Name, tool.Description, tool.OutputSchema)
		}
		if tool.Name == demoserver.ToolSendMoney {
			send = tool
		}
	}
	slices.Sort(names)
	want := []string{"create_invoice", "get_balances", "get_exchange_rate", "get_stats", "get_transfer_status",
		"list_profiles", "list_recipients", "list_transfers", "send_money"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	if send == nil {
		t.Fatal("send_money missing")
	}
	b, err := json.Marshal(send.InputSchema)
	if err != nil {
		t.Fatalf("marshal send_money input schema: %v", err)
	}
	var schema struct {
		Required   []string
		Properties map[string]struct {
			Enum             []string
			ExclusiveMinimum *float64
			Description      string
		}
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatalf("decode send_money input schema %s: %v", b, err)
	}
	if !slices.Equal(schema.Required, []string{"recipient", "amount", "currency"}) {
		t.Errorf("send_money required = %v, want recipient, amount, currency", schema.Required)
	}
	if got := schema.Properties["currency"].Enum; !slices.Equal(got, []string{"EUR", "USD", "GBP"}) {
		t.Errorf("send_money currency enum = %v", got)
	}
	if m := schema.Properties["amount"].ExclusiveMinimum; m == nil || *m != 0 {
		t.Errorf("send_money amount exclusiveMinimum = %v, want 0", m)
	}
	for name, p := range schema.Properties {
		if p.Description == "" {
			t.Errorf("send_money property %s has no description", name)
		}
	}
}

func testReads(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	var rate demoserver.ExchangeRate
	callOK(t, cs, demoserver.ToolGetExchangeRate, map[string]any{"from": "EUR", "to": "USD"}, &rate)
	if rate.Rate != 1.085 || !rate.AsOf.Equal(testNow()) {
		t.Errorf("get_exchange_rate EUR→USD = %+v, want 1.085 as of %v", rate, testNow())
	}

	var profiles struct{ Profiles []demoserver.Profile }
	callOK(t, cs, demoserver.ToolListProfiles, map[string]any{}, &profiles)
	if len(profiles.Profiles) != 2 || profiles.Profiles[0].ID != "acme-treasury" || profiles.Profiles[0].Type != "business" {
		t.Errorf("list_profiles = %+v", profiles.Profiles)
	}

	var all struct{ Balances []demoserver.Balance }
	callOK(t, cs, demoserver.ToolGetBalances, nil, &all)
	if len(all.Balances) != 6 {
		t.Errorf("get_balances() = %d balances, want 6 (2 profiles × 3 currencies)", len(all.Balances))
	}
	if got := balance(t, cs, "alex-morgan", demoserver.EUR); got != 4200.50 {
		t.Errorf("alex-morgan EUR = %v, want 4200.50", got)
	}

	var transfers struct{ Transfers []demoserver.Transfer }
	callOK(t, cs, demoserver.ToolListTransfers, map[string]any{"limit": 2}, &transfers)
	if ids := transferIDs(transfers.Transfers); !slices.Equal(ids, []string{"T-1004", "T-1003"}) {
		t.Errorf("list_transfers(limit 2) = %v, want T-1004, T-1003", ids)
	}
	callOK(t, cs, demoserver.ToolListTransfers, nil, &transfers)
	if len(transfers.Transfers) != 4 {
		t.Errorf("list_transfers() = %d transfers, want the 4 opening ones", len(transfers.Transfers))
	}

	for id, want := range map[string]string{"T-1001": "completed", "T-1003": "cancelled", "T-1004": "processing"} {
		var tr demoserver.Transfer
		callOK(t, cs, demoserver.ToolGetTransferStatus, map[string]any{"transferId": id}, &tr)
		if tr.Status != want {
			t.Errorf("get_transfer_status(%s) = %q, want %q", id, tr.Status, want)
		}
	}

	var recipients struct{ Recipients []demoserver.Recipient }
	callOK(t, cs, demoserver.ToolListRecipients, map[string]any{}, &recipients)
	if len(recipients.Recipients) != 4 || recipients.Recipients[0].ID != "rcp-globex" {
		t.Errorf("list_recipients = %+v", recipients.Recipients)
	}
}

func testSendMoney(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	before := stats(t, cs).SendMoneyExecutions

	var out struct {
		Transfer demoserver.Transfer
		Balance  demoserver.Balance
	}
	callOK(t, cs, demoserver.ToolSendMoney, map[string]any{
		"recipient": "rcp-globex", "amount": 1000, "currency": "EUR", "reference": "Invoice GX-2300",
	}, &out)
	want := demoserver.Transfer{
		ID: "T-1005", ProfileID: "acme-treasury", RecipientID: "rcp-globex", RecipientName: "Globex Corporation",
		SourceAmount: 1000, SourceCurrency: "EUR", TargetAmount: 1000, TargetCurrency: "EUR", Rate: 1,
		Reference: "Invoice GX-2300", Status: "processing", CreatedAt: testNow(),
	}
	if out.Transfer != want {
		t.Errorf("send_money transfer = %+v, want %+v", out.Transfer, want)
	}
	if out.Balance.Amount != 249_000 || out.Balance.Currency != demoserver.EUR {
		t.Errorf("send_money balance = %+v, want 249000 EUR", out.Balance)
	}
	if got := balance(t, cs, "acme-treasury", demoserver.EUR); got != 249_000 {
		t.Errorf("acme-treasury EUR after send = %v, want 249000", got)
	}

	// By name, in any case, converted into the recipient's currency.
	callOK(t, cs, demoserver.ToolSendMoney, map[string]any{"recipient": "initech LTD", "amount": 100, "currency": "USD"}, &out)
	if out.Transfer.TargetCurrency != demoserver.GBP || out.Transfer.TargetAmount != 78.89 {
		t.Errorf("send_money 100 USD to Initech = %v %s, want 78.89 GBP", out.Transfer.TargetAmount, out.Transfer.TargetCurrency)
	}

	var transfers struct{ Transfers []demoserver.Transfer }
	callOK(t, cs, demoserver.ToolListTransfers, map[string]any{"limit": 1}, &transfers)
	if ids := transferIDs(transfers.Transfers); !slices.Equal(ids, []string{"T-1006"}) {
		t.Errorf("newest transfer = %v, want T-1006", ids)
	}
	if got := stats(t, cs).SendMoneyExecutions; got != before+2 {
		t.Errorf("get_stats sendMoneyExecutions = %d, want %d", got, before+2)
	}
}

// testRefusals checks that bad calls are tool errors the model can read, and change nothing.
func testRefusals(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	before := stats(t, cs)
	eur := balance(t, cs, "acme-treasury", demoserver.EUR)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"send_money", map[string]any{"recipient": "Bob", "amount": 10, "currency": "EUR"}, `unknown recipient "Bob"`},
		{"send_money", map[string]any{"recipient": "rcp-globex", "amount": 0, "currency": "EUR"}, "amount"},
		{"send_money", map[string]any{"recipient": "rcp-globex", "amount": -5, "currency": "EUR"}, "amount"},
		{"send_money", map[string]any{"recipient": "rcp-globex", "amount": 1.234, "currency": "EUR"}, "two decimals"},
		{"send_money", map[string]any{"recipient": "rcp-globex", "amount": 90_000, "currency": "GBP"}, "insufficient funds: Acme Treasury holds 80000.00 GBP"},
		{"send_money", map[string]any{"recipient": "rcp-globex", "amount": 10, "currency": "JPY"}, "currency"},
		{"send_money", map[string]any{"amount": 10, "currency": "EUR"}, "recipient"},
		{"get_transfer_status", map[string]any{"transferId": "T-9"}, `unknown transfer "T-9"`},
		{"get_exchange_rate", map[string]any{"from": "EUR"}, "to"},
		{"create_invoice", map[string]any{"customer": "Hooli", "amount": 5, "currency": "EUR", "dueDate": "2026-03-01"}, "before today"},
	} {
		res := call(t, cs, c.tool, c.args)
		if !res.IsError || !strings.Contains(text(res), c.want) {
			t.Errorf("%s(%v) = error %v %q, want a tool error containing %q", c.tool, c.args, res.IsError, text(res), c.want)
		}
	}
	if got := balance(t, cs, "acme-treasury", demoserver.EUR); got != eur {
		t.Errorf("acme-treasury EUR after refusals = %v, want %v", got, eur)
	}
	after := stats(t, cs)
	if after.SendMoneyExecutions != before.SendMoneyExecutions {
		t.Errorf("sendMoneyExecutions %d → %d after refused calls", before.SendMoneyExecutions, after.SendMoneyExecutions)
	}
	// The ledger refused these three; the schema refused the rest before the tool ran.
	if got := after.ToolErrors[demoserver.ToolSendMoney] - before.ToolErrors[demoserver.ToolSendMoney]; got != 3 {
		t.Errorf("send_money tool errors grew by %d, want 3 (unknown recipient, decimals, funds)", got)
	}

	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Error("calling an unknown tool: want a protocol error")
	}
}

func testCreateInvoice(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	var inv demoserver.Invoice
	callOK(t, cs, demoserver.ToolCreateInvoice, map[string]any{"customer": "Hooli", "amount": 1250.5, "currency": "USD"}, &inv)
	due := testNow().AddDate(0, 0, 30).Format(time.DateOnly)
	if inv.ID != "INV-0001" || inv.DueDate != due || inv.Amount != 1250.5 || inv.Status != "open" {
		t.Errorf("create_invoice = %+v, want INV-0001 for 1250.50 USD due %s", inv, due)
	}
	callOK(t, cs, demoserver.ToolCreateInvoice, map[string]any{"customer": "Hooli", "amount": 1, "currency": "GBP", "dueDate": "2026-03-02"}, &inv)
	if inv.ID != "INV-0002" || inv.DueDate != "2026-03-02" {
		t.Errorf("create_invoice due today = %+v, want INV-0002 due 2026-03-02", inv)
	}
}

func transferIDs(ts []demoserver.Transfer) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

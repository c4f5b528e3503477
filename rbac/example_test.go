package rbac_test

import (
	"fmt"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
)

func ExampleEngine_Decide() {
	p, err := packs.Parse("agent-pack.yaml", []byte(`
mcp:
  servers:
    - name: wise
      url: http://127.0.0.1:8091/mcp
      toolAccess:
        default: none
        roles:
          employee: [get_balances]
          finance: [send_money]
        approval:
          - tools: [send_money]
            approvers: [finance-manager]
`), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	e := rbac.New(p)
	ana := rbac.Caller{Identity: "ana@acme.corp", Roles: []string{"employee", "finance"}, Authenticated: true}
	for _, tool := range []string{"get_balances", "send_money", "delete_account"} {
		d := e.Decide(ana, "wise", tool)
		fmt.Printf("%s: %s (%s)\n", tool, d.Effect, d.Reason)
	}
	// Output:
	// get_balances: allow (role employee)
	// send_money: approval (role finance)
	// delete_account: deny (listed under no role (default: none))
}

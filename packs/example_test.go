package packs_test

import (
	"errors"
	"fmt"

	"github.com/packbot/packbot/packs"
)

func ExampleParse() {
	src := []byte(`
metadata: {id: shop}
mcp:
  servers:
    - name: orders
      url: ${ORDERS_URL:-http://127.0.0.1:9000/mcp}
      headers: {Authorization: "Bearer ${ORDERS_TOKEN}"}
`)
	env := packs.MapEnv(map[string]string{"ORDERS_TOKEN": "t0k"})
	p, err := packs.Parse("agent-pack.yaml", src, env)
	if err != nil {
		fmt.Println(err)
		return
	}
	s := p.MCP.Servers[0]
	fmt.Println(s.Transport, s.URL, s.TimeoutMs, p.LLM.Model)
	// Output: streamable-http http://127.0.0.1:9000/mcp 30000 gpt-4o-mini
}

func ExampleInvalidError() {
	src := []byte(`
mcp:
  servers:
    - name: orders
      transport: websocket
    - name: crm
      url: http://127.0.0.1:9001/mcp
      headers: {Authorization: "Bearer {env:CRM_TOKEN}"}
`)
	_, err := packs.Parse("agent-pack.yaml", src, nil)
	var invalid *packs.InvalidError
	if errors.As(err, &invalid) {
		for _, p := range invalid.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// agent-pack.yaml:5:18: mcp.servers[0].transport: unknown transport "websocket": use streamable-http, sse, stdio
	// agent-pack.yaml:8:32: mcp.servers[1].headers.Authorization: "{env:CRM_TOKEN}" is not a placeholder packbot expands; write ${CRM_TOKEN}
}

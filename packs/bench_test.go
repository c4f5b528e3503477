package packs_test

import (
	"os"
	"testing"

	"github.com/packbot/packbot/packs"
)

// BenchmarkParse measures loading a real pack (parse, expand, decode, validate):
//
//	go test -run XXX -bench Parse ./packs
func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("wise-corporate/agent-pack.yaml")
	if err != nil {
		b.Fatal(err)
	}
	env := packs.MapEnv(map[string]string{"WISE_MCP_URL": "https://wise.example/mcp", "WISE_API_TOKEN": "t"})
	for b.Loop() {
		if _, err := packs.Parse("wise.yaml", data, env); err != nil {
			b.Fatal(err)
		}
	}
}

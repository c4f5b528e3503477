package sqlstore

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var updateBenchScripts = flag.Bool("update", false, "rewrite the pgbench scripts generated from the store's statements")

// chainBenchScript is scripts/bench/auditchain/chain.sql: qAppendAuditPostgres as a pgbench
// script (its $1 as :src). It is generated from the statement, so that the benchmark measures
// the chain as built.
const chainBenchScript = "../../scripts/bench/auditchain/chain.sql"

func chainBenchText() string {
	return "-- qAppendAuditPostgres (store/sqlstore/audit.go), its $1 as :src: one record appended to the chain.\n" +
		"-- Generated: go test ./store/sqlstore -run TestAuditChainBenchScript -update\n" +
		strings.Replace(qAppendAuditPostgres, "$1::json", ":src::json", 1) + ";\n"
}

// TestAuditChainBenchScript: the pgbench script of the chain statement is the statement the
// store runs (-update rewrites it).
func TestAuditChainBenchScript(t *testing.T) {
	want := chainBenchText()
	if *updateBenchScripts {
		if err := os.WriteFile(chainBenchScript, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(chainBenchScript)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is not qAppendAuditPostgres as built: run go test ./store/sqlstore -run TestAuditChainBenchScript -update", chainBenchScript)
	}
}

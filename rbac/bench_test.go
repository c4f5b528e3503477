package rbac_test

import (
	"testing"

	"github.com/packbot/packbot/rbac"
)

// BenchmarkDecide measures one access decision on the corporate example (the check made for
// every tool offered and again at every call):
//
//	go test -run XXX -bench Decide ./rbac
func BenchmarkDecide(b *testing.B) {
	e := rbac.New(examplePack(b, "wise-corporate"))
	c := rbac.Caller{Identity: "ana@acme.corp", Roles: []string{"employee", "finance"}, Authenticated: true}
	for b.Loop() {
		if d := e.Decide(c, "wise", "send_money"); d.Effect != rbac.Approval {
			b.Fatal(d)
		}
	}
}

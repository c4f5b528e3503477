package sqlstore

import (
	"testing"

	"github.com/packbot/packbot/store/storetest"
)

// raceRepetitions is how many fresh requests TestApprovalRaces races on each backend: SQLite's
// single writer makes each race slower (its waiters sleep), and PostgreSQL, where replicas
// really race, is what the count has to convince about.
var raceRepetitions = map[string]int{"SQLite": 5, "Postgres": 200}

// TestApprovalRaces races approvers, rejecters, the requester and expiry sweepers on each request
// (see storetest.RunApprovalRaces): exactly one transition wins, every time.
func TestApprovalRaces(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			storetest.RunApprovalRaces(t, newStore(b.database), raceRepetitions[b.name])
		})
	}
}

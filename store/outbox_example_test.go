package store_test

import (
	"fmt"

	"github.com/packbot/packbot/store"
)

// Every outbox row is built by NewOutboxMessage: here a notice to an identity, delivered to
// whichever connection it has when the row goes out.
func ExampleNewOutboxMessage() {
	m, err := store.NewOutboxMessage("alice", "", "notice", map[string]string{"key": "APPROVAL_EXPIRED"})
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Identity, m.ConnectionID == "", m.Kind, string(m.Payload))
	// Output: alice true notice {"key":"APPROVAL_EXPIRED"}
}

// Package storetest is the conformance suite of the [store.Store] contract. Every implementation
// runs it from its own tests, so they all behave alike on the same inputs:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			db, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "packbot.db"), nil)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { _ = db.Close() })
//			return db
//		})
//		storetest.RunConcurrency(t, …the same newStore…)
//	}
//
// [Run] covers every method of every aggregate, failure paths included; [RunConcurrency] races
// goroutines through the updater closures and the outbox claim, and rotates the credential key
// while writers run. The suite does not own a database: newStore must return an empty store
// isolated from every other call, and close it in t.Cleanup. It checks ordering by time only
// when the store's clock gives distinct readings, so a clock that advances on every reading
// makes those checks strict.
package storetest

// Package store is packbot's persistence contract: the value types that outlive a process
// (sessions, the DIDComm agent's tagged records, sealed per-user credentials, the outbox,
// conversation memory, the hash-chained audit), the sentinel errors callers test with [errors.Is], and the
// [Store] interface composed of one small interface per aggregate.
//
// It does not talk to a database itself: store/sqlstore implements the contract on PostgreSQL
// and SQLite, and store/storetest holds the conformance suite every implementation must pass.
// Consumers ask for the aggregate they use (an [Outbox], a [Credentials]) rather than the whole
// [Store]. Secrets are sealed before they reach the store (see store/secret); the store only
// ever sees ciphertext, and [RotateCredentials] re-seals every row under a new key.
//
// Read-modify-write goes through updater closures ([Sessions.UpdateSession],
// [Credentials.UpdateCredential]) that the implementation runs in one transaction with the row
// locked; a closure may run more than once and must not have side effects.
package store

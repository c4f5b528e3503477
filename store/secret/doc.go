// Package secret seals per-user credentials before they reach the store, and keeps secret values
// out of logs.
//
// A [Keyring] holds the current 256-bit key (MCP_CONFIG_ENCRYPTION_KEY, 64 hex characters) and
// any number of old keys that may still open rows (MCP_CONFIG_ENCRYPTION_KEYS_OLD). Sealing is
// AES-256-GCM with a random 96-bit nonce; the additional authenticated data binds the ciphertext
// to its row (identity, server, kind), so a row copied to another user or server fails to open.
// Each sealed value records the id of its key, derived from the key itself, so rotation needs no
// bookkeeping: [store.RotateCredentials] re-seals every row whose key id is not the current one.
//
// [Value] is a string whose String, GoString, LogValue and MarshalJSON all redact it; wrap any
// secret in it as soon as it is read.
//
//	kr, err := secret.KeyringFromEnv(os.LookupEnv)
//	sealed, err := kr.Seal(store.CredentialKey{Identity: "alice", Server: "github", Kind: store.KindConfig}, token)
//	token, err = kr.Open(key, sealed)
package secret

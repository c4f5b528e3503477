package logid

import (
	"crypto/sha256"
	"encoding/hex"
)

// Conn is a short, stable name of connection id for logs: "c-" and the first 12 hexadecimal
// digits of its SHA-256 (the same on every replica, so lines about one connection can be
// followed across them). "" stays "".
func Conn(id string) string {
	if id == "" {
		return ""
	}
	h := sha256.Sum256([]byte(id))
	return "c-" + hex.EncodeToString(h[:6])
}

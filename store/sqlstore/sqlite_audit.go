package sqlstore

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"

	sqlitedriver "modernc.org/sqlite"

	"github.com/packbot/packbot/store"
)

// The SQLite driver learns packbot_audit_hash when the package loads, as database/sql drivers
// are registered: it is a pure function, and every connection the driver opens needs it (the
// chain statement and the trigger of migration 008 call it).
func init() {
	if err := sqlitedriver.RegisterDeterministicScalarFunction("packbot_audit_hash", 19, sqliteAuditHash); err != nil {
		panic(fmt.Sprintf("sqlstore: register packbot_audit_hash: %v", err))
	}
}

// sqliteAuditHash is store.AuditHash in SQL: its arguments are the link (prev, lane, seq, id,
// prev_id) and then the columns of auditDataColumns, as stored.
func sqliteAuditHash(_ *sqlitedriver.FunctionContext, args []driver.Value) (driver.Value, error) {
	str := func(i int) string {
		switch v := args[i].(type) {
		case string:
			return v
		case []byte:
			return string(v)
		}
		return ""
	}
	num := func(i int) int64 {
		n, _ := args[i].(int64)
		return n
	}
	r := store.AuditRecord{
		ID: num(3), Link: store.AuditLink{Prev: str(0), Lane: num(1), Seq: num(2), PrevID: num(4)},
		At: time.UnixMilli(num(5)), Identity: str(6), Server: str(8), Tool: str(9), ArgsFingerprint: str(10),
		Decision: str(11), ApprovalID: str(12), Outcome: str(13), Latency: time.Duration(num(14)), Error: str(15),
		ResultFingerprint: str(16), Event: str(17), Detail: str(18),
	}
	if roles := str(7); roles != "" {
		if err := json.Unmarshal([]byte(roles), &r.Roles); err != nil {
			return nil, fmt.Errorf("packbot_audit_hash: roles %q: %w", roles, err)
		}
	}
	return store.AuditHash(r), nil
}

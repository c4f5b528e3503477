package sqlstore

import "testing"

func TestRebind(t *testing.T) {
	cases := []struct{ name, in, sqlite string }{
		{"params", `SELECT a FROM t WHERE x = $1 AND y = $2`, `SELECT a FROM t WHERE x = ?1 AND y = ?2`},
		{"repeated", `WHERE ($1 = '' OR identity = $1) AND kind = $2`, `WHERE (?1 = '' OR identity = ?1) AND kind = ?2`},
		{"two digits", `VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, `VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)`},
		{"for update", `SELECT id FROM t WHERE k = $1 FOR UPDATE`, `SELECT id FROM t WHERE k = ?1`},
		{"skip locked", "WHERE id IN (SELECT id FROM t ORDER BY id LIMIT $5\n\tFOR UPDATE SKIP LOCKED)\nRETURNING id", "WHERE id IN (SELECT id FROM t ORDER BY id LIMIT ?5)\nRETURNING id"},
		{"no params", `SELECT 1`, `SELECT 1`},
	}
	for _, c := range cases {
		if got := sqliteDialect.rebind(c.in); got != c.sqlite {
			t.Errorf("%s: sqlite rebind\n got  %q\n want %q", c.name, got, c.sqlite)
		}
		if got := postgresDialect.rebind(c.in); got != c.in {
			t.Errorf("%s: postgres rebind changed the query to %q", c.name, got)
		}
	}
}

func TestFilter(t *testing.T) {
	script := "-- v9: test\nCREATE TABLE t (\n" +
		"    id BIGSERIAL PRIMARY KEY, -- only: postgres\n" +
		"    id INTEGER PRIMARY KEY AUTOINCREMENT, -- only: sqlite\n" +
		"    v  TEXT -- a comment that mentions only: nothing\n" +
		");\n" +
		"CREATE INDEX t_v ON t (v); -- only: sqlite"
	want := map[*dialect]string{
		postgresDialect: "-- v9: test\nCREATE TABLE t (\n" +
			"    id BIGSERIAL PRIMARY KEY, -- only: postgres\n" +
			"    v  TEXT -- a comment that mentions only: nothing\n" +
			");\n",
		sqliteDialect: "-- v9: test\nCREATE TABLE t (\n" +
			"    id INTEGER PRIMARY KEY AUTOINCREMENT, -- only: sqlite\n" +
			"    v  TEXT -- a comment that mentions only: nothing\n" +
			");\n" +
			"CREATE INDEX t_v ON t (v); -- only: sqlite",
	}
	for d, w := range want {
		got, err := d.filter(script)
		if err != nil || got != w {
			t.Errorf("%s:\n got  %q, %v\n want %q", d.name, got, err, w)
		}
		if _, err := d.filter("x INT, -- only: mysql\n"); err == nil {
			t.Errorf("%s: unknown dialect accepted", d.name)
		}
	}
}

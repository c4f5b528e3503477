package logid

import (
	"strings"
	"testing"
)

func TestConn(t *testing.T) {
	const id = "0b9d3a9e-1c2f-4f7e-8a6b-5c4d3e2f1a0b"
	got := Conn(id)
	if len(got) != 14 || !strings.HasPrefix(got, "c-") || strings.Contains(got, id[:8]) {
		t.Fatalf("Conn(%q) = %q", id, got)
	}
	if Conn(id) != got {
		t.Fatal("not stable")
	}
	if Conn(id+"x") == got {
		t.Fatal("two ids, one name")
	}
	if Conn("") != "" {
		t.Fatal(`Conn("") is not ""`)
	}
}

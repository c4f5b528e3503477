package bot

import (
	"reflect"
	"testing"
	"time"

	"github.com/packbot/packbot/store"
)

// TestSameSessionSeesEveryField: a change to any field of store.Session that the bot writes
// makes the session differ (and so be written with the event's completion), whatever fields the
// struct gains later; only the store's own stamp of the write is not compared.
func TestSameSessionSeesEveryField(t *testing.T) {
	base := store.Session{ConnectionID: "c1", State: store.StateChat, Language: "en", Roles: []string{"guest"},
		CreatedAt: time.UnixMilli(1000).UTC(), UpdatedAt: time.UnixMilli(2000).UTC()}
	typ := reflect.TypeFor[store.Session]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		changed := cloneSession(base)
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch x := v.Addr().Interface().(type) {
		case *string:
			*x += "-changed"
		case *bool:
			*x = !*x
		case *[]string:
			*x = append(*x, "changed")
		case *[]byte:
			*x = append(*x, '{')
		case *time.Time:
			*x = x.Add(time.Second)
		default:
			t.Fatalf("store.Session.%s is a %s: teach this test (and sameSession) to change it", f.Name, f.Type)
		}
		want := f.Name == "UpdatedAt"
		if got := sameSession(base, changed); got != want {
			t.Errorf("a change of %s only: sameSession = %v, want %v", f.Name, got, want)
		}
	}
	if !sameSession(base, cloneSession(base)) {
		t.Error("a clone differs from its original")
	}
	// What the store gives back compares equal to what was written: nil and empty lists, times
	// in another location or with a monotonic reading.
	a, b := base, base
	a.Roles, b.Roles = nil, []string{}
	a.Flow, b.Flow = nil, []byte{}
	a.CredentialExpiry, b.CredentialExpiry = time.UnixMilli(5000).UTC(), time.UnixMilli(5000).In(time.FixedZone("x", 3600))
	if !sameSession(a, b) {
		t.Error("equal sessions in other encodings differ")
	}
}

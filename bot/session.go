package bot

import (
	"bytes"
	"reflect"
	"slices"
	"time"

	"github.com/packbot/packbot/store"
)

// cloneSession is a copy of s that shares no slice with it.
func cloneSession(s store.Session) store.Session {
	s.Roles = slices.Clone(s.Roles)
	s.Flow = slices.Clone(s.Flow)
	return s
}

// sameSession reports whether a and b hold the same session: every field of store.Session but
// UpdatedAt, the store's stamp of the write (a session that changed in nothing else is not
// written). The fields are read from the struct, so that a field added later is compared too;
// times compare by instant, lists by content (nil and empty alike).
func sameSession(a, b store.Session) bool {
	va, vb := reflect.ValueOf(&a).Elem(), reflect.ValueOf(&b).Elem()
	typ := va.Type()
	for i := range typ.NumField() {
		if typ.Field(i).Name == "UpdatedAt" {
			continue
		}
		if !sameField(va.Field(i).Addr().Interface(), vb.Field(i).Addr().Interface()) {
			return false
		}
	}
	return true
}

// sameField compares two fields of a Session (pointers to them).
func sameField(a, b any) bool {
	switch x := a.(type) {
	case *[]string:
		return slices.Equal(*x, *b.(*[]string))
	case *[]byte:
		return bytes.Equal(*x, *b.(*[]byte))
	case *time.Time:
		return x.Equal(*b.(*time.Time))
	}
	return reflect.DeepEqual(a, b)
}

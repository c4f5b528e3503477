package rbac_test

import "strings"

func trim(s string) string { return strings.TrimSpace(s) }

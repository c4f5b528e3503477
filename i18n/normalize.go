package i18n

import (
	"strings"

	"golang.org/x/text/language"
)

// Normalize reduces a BCP 47-ish language tag to its lower-case base language: "pt-BR", "pt_BR"
// and "PT" give "pt"; "es-419" gives "es"; deprecated codes are canonicalized ("iw" gives "he").
// Of an Accept-Language list ("es-ES,es;q=0.9") only the first entry counts. It returns "" for
// "", "und", and anything golang.org/x/text/language does not know as a language ("xx", "x-foo").
func Normalize(tag string) string {
	s := strings.TrimSpace(tag)
	if i := strings.IndexAny(s, ",;"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if s == "" {
		return ""
	}
	s = strings.ReplaceAll(s, "_", "-")
	t, err := language.Parse(s)
	if err != nil {
		// A known language with an odd region or variant ("es-XYZW") still counts.
		first, _, _ := strings.Cut(s, "-")
		if t, err = language.Parse(first); err != nil {
			return ""
		}
	}
	base, conf := t.Base()
	if conf != language.Exact {
		return ""
	}
	return base.String()
}

// quickBase returns the lower-cased language of a plain "ll", "lll", "ll-RR" or "ll_419" tag
// without allocating, so that T finds "es-ES" or "PT" without a full parse. ok is false for any
// other shape, which needs Normalize (scripts, variants, grandfathered tags such as "zh-min-nan").
func quickBase(tag string, buf *[3]byte) (base []byte, ok bool) {
	n := 0
	for ; n < len(tag) && tag[n] != '-' && tag[n] != '_'; n++ {
		if n == len(buf) {
			return nil, false
		}
		c := tag[n]
		switch {
		case 'a' <= c && c <= 'z':
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		default:
			return nil, false
		}
		buf[n] = c
	}
	if n < 2 {
		return nil, false
	}
	if n < len(tag) && !isRegion(tag[n+1:]) {
		return nil, false
	}
	return buf[:n], true
}

// isRegion reports whether s is a two-letter or three-digit region subtag.
func isRegion(s string) bool {
	switch len(s) {
	case 2:
		return isLetter(s[0]) && isLetter(s[1])
	case 3:
		return isDigit(s[0]) && isDigit(s[1]) && isDigit(s[2])
	}
	return false
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

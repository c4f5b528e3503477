package i18n

import (
	"fmt"
	"strings"
)

// A text is one resolved string, split once (in New) into literal runs and placeholders so that
// T never scans it again.
type text struct {
	src  string
	segs []segment // nil when src has no placeholder: T returns src as is
}

// A segment is a literal run (name == "") or a placeholder, whose raw "{name}" is kept in lit so
// that a placeholder without a value is written as it was.
type segment struct {
	lit  string
	name string
}

// compile splits s into segments. It fails on a "{" that opens a placeholder name and is not
// closed by "}" right after it ("Hello {name", "{first-name}"). A "{" not followed by a letter or
// "_" is plain text, so JSON such as {"from":"EUR"} and "{}" need no escaping.
func compile(s string) (*text, error) {
	t := &text{src: s}
	lit := 0 // start of the pending literal run
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '{')
		if j < 0 {
			break
		}
		open := i + j
		end := open + 1
		if end == len(s) || !nameStart(s[end]) {
			i = end
			continue
		}
		for end < len(s) && nameChar(s[end]) {
			end++
		}
		if end == len(s) || s[end] != '}' {
			return nil, fmt.Errorf("unclosed placeholder %q: a placeholder is {name}, the name made of letters, digits and _", excerpt(s[open:end]))
		}
		if open > lit {
			t.segs = append(t.segs, segment{lit: s[lit:open]})
		}
		t.segs = append(t.segs, segment{lit: s[open : end+1], name: s[open+1 : end]})
		i = end + 1
		lit = i
	}
	if t.segs == nil {
		return t, nil
	}
	if lit < len(s) {
		t.segs = append(t.segs, segment{lit: s[lit:]})
	}
	return t, nil
}

// mustCompile is compile for the built-in catalogs, which the tests check.
func mustCompile(s string) *text {
	t, err := compile(s)
	if err != nil {
		panic("i18n: built-in catalog: " + err.Error())
	}
	return t
}

func nameStart(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func nameChar(c byte) bool {
	return nameStart(c) || '0' <= c && c <= '9'
}

func excerpt(s string) string {
	const limit = 24
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}

// placeholders returns the distinct placeholder names of t, in order of first use.
func (t *text) placeholders() []string {
	var names []string
	for _, s := range t.segs {
		if s.name != "" && !contains(names, s.name) {
			names = append(names, s.name)
		}
	}
	return names
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// render replaces every placeholder that has a value in args (name/value pairs; the first pair
// for a name wins, an odd trailing name is ignored). Values are copied verbatim, never scanned.
// It allocates at most once: the result.
func (t *text) render(args []string) string {
	if t.segs == nil || len(args) < 2 {
		return t.src
	}
	n, replaced := 0, false
	for _, s := range t.segs {
		if s.name != "" {
			if v, ok := arg(args, s.name); ok {
				n += len(v)
				replaced = true
				continue
			}
		}
		n += len(s.lit)
	}
	if !replaced {
		return t.src
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range t.segs {
		if s.name != "" {
			if v, ok := arg(args, s.name); ok {
				b.WriteString(v)
				continue
			}
		}
		b.WriteString(s.lit)
	}
	return b.String()
}

func arg(args []string, name string) (string, bool) {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == name {
			return args[i+1], true
		}
	}
	return "", false
}

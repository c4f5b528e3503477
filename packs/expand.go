package packs

import (
	"fmt"
	"regexp"
	"strings"
)

// fieldClass says how strictly placeholders are checked in a value, from the field's `pack` tag.
type fieldClass int

const (
	classPlain  fieldClass = iota // texts: an unset variable is a warning
	classStrict                   // command, args: an unset variable is an error
	classURL                      // URLs: an unset variable is an error; `$VAR` is rejected
	classSecret                   // headers, env, secrets: as URL
)

func classOf(tag string) fieldClass {
	switch tag {
	case "url":
		return classURL
	case "secret":
		return classSecret
	case "strict":
		return classStrict
	}
	return classPlain
}

var (
	varName      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	envLookalike = regexp.MustCompile(`\{\{?\s*\.?[Ee][Nn][Vv]\s*[:.]\s*([A-Za-z_][A-Za-z0-9_]*)?[^}]*\}\}?`)
	bareDollar   = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)`)
)

// expansion is the result of expanding one string.
type expansion struct {
	value      string
	unresolved []string // variables that are unset or empty: their placeholder stays in value
	bad        []string // look-alike placeholders, each with how to write it
}

// expand replaces ${NAME} and ${NAME:-default} in s. A variable counts as set when env has it
// with a non-empty value. An unset variable without a default leaves its placeholder literally in
// the value and is reported in unresolved. Strings that look like placeholders but are not ours
// are reported in bad; their messages never repeat more than a prefix of what was written, since
// it may be a pasted secret.
func expand(s string, env Env, class fieldClass) expansion {
	var x expansion
	if !strings.ContainsAny(s, "${") {
		x.value = s
		return x
	}
	for _, m := range envLookalike.FindAllStringSubmatch(s, -1) {
		name, shown := m[1], redactPrefix(m[0])
		if name == "" {
			name = "NAME"
		} else if len(m[0]) <= len(name)+10 {
			shown = m[0] // only a variable name: nothing secret to hide
		}
		x.bad = append(x.bad, fmt.Sprintf("%q is not a placeholder packbot expands; write ${%s}", shown, name))
	}
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			x.bad = append(x.bad, fmt.Sprintf("unterminated placeholder %q; write ${NAME}", redactPrefix(rest[i:])))
			b.WriteString(rest[i:])
			break
		}
		inner := rest[i+2 : i+end]
		whole := rest[i : i+end+1]
		rest = rest[i+end+1:]
		name, def, hasDef := strings.Cut(inner, ":-")
		if !varName.MatchString(name) {
			x.bad = append(x.bad, badPlaceholder(inner))
			b.WriteString(whole)
			continue
		}
		if v, ok := env(name); ok && v != "" {
			b.WriteString(v)
			continue
		}
		if hasDef {
			b.WriteString(def)
			continue
		}
		x.unresolved = append(x.unresolved, name)
		b.WriteString(whole)
	}
	x.value = b.String()
	if class == classURL || class == classSecret {
		// A bare $NAME outside ${…} in a URL or secret is almost always a shell habit.
		outside := placeholderRE.ReplaceAllString(s, "")
		for _, m := range bareDollar.FindAllStringSubmatch(outside, -1) {
			x.bad = append(x.bad, fmt.Sprintf("%q is not expanded here; write ${%s}", m[0], m[1]))
		}
	}
	return x
}

var placeholderRE = regexp.MustCompile(`\$\{[^}]*\}`)

// badPlaceholder explains a ${…} whose inside is not NAME or NAME:-default. It may be a
// pasted secret (${sk-…}), so only a prefix is shown.
func badPlaceholder(inner string) string {
	return fmt.Sprintf("%q is not a placeholder packbot expands: write ${NAME} or ${NAME:-default}, "+
		"and keep secret values in the environment, not in the pack", redactPrefix("${"+inner+"}"))
}

// redactPrefix shows at most the first 4 characters of s, so that a secret pasted into a
// placeholder does not end up in logs.
func redactPrefix(s string) string {
	const keep = 4
	r := []rune(s)
	if len(r) <= keep {
		return s
	}
	return string(r[:keep]) + "…"
}

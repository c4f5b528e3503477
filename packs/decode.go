package packs

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decoder fills typed structs from a YAML node tree. Unlike yaml.Node.Decode it keeps going after
// a problem, so that one run reports every problem; records the position of every field path
// (for validation messages); expands placeholders in every scalar according to the field's
// class; and warns about unknown keys.
type decoder struct {
	file  string
	env   Env
	ps    *problems
	index map[string]Pos
	// unresolved maps the path of a URL, secret or strict field to the variables left unset in
	// it; Load decides whether that is an error (it is, except in user-controlled headers).
	unresolved map[string][]string
	// nodes counts the nodes visited, aliases expanded; past maxNodes decoding stops, so an
	// alias bomb cannot make loading take exponential time.
	nodes int
}

// maxNodes bounds the work of decoding one pack. Real packs have a few thousand nodes.
const maxNodes = 100_000

func (d *decoder) pos(n *yaml.Node) Pos { return Pos{File: d.file, Line: n.Line, Column: n.Column} }

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.ps.add(Error, d.pos(n), path, format, args...)
}

func (d *decoder) warnf(n *yaml.Node, path, format string, args ...any) {
	d.ps.add(Warning, d.pos(n), path, format, args...)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "single value"
}

// decode fills v from n. v must be settable.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, class fieldClass) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if d.nodes++; d.nodes == maxNodes {
		d.errorf(n, path, "the pack is too large, or its aliases expand to more than %d values", maxNodes)
	}
	if d.nodes >= maxNodes {
		return
	}
	if path != "" {
		d.index[path] = d.pos(n)
	}
	if isNull(n) {
		return // absent value: keep the default
	}
	switch t := v.Addr().Interface().(type) {
	case *Text:
		d.decodeText(n, t, path)
		return
	case *StringList:
		d.decodeStringList(n, t, path, class)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			nv := reflect.New(v.Type().Elem())
			if df, ok := nv.Interface().(defaulter); ok {
				df.setDefaults()
			}
			v.Set(nv)
		}
		d.decode(n, v.Elem(), path, class)
	case reflect.Struct:
		d.decodeStruct(n, v, path, nil)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.errorf(n, path, "must be a mapping (key: value), not a %s", kindName(n))
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			elem := reflect.New(v.Type().Elem()).Elem()
			d.decode(val, elem, joinPath(path, k.Value), class)
			d.atKey(k, val, joinPath(path, k.Value))
			v.SetMapIndex(reflect.ValueOf(k.Value), elem)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "must be a list, not a %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			elem := s.Index(i)
			if df, ok := elem.Addr().Interface().(defaulter); ok {
				df.setDefaults()
			}
			d.decode(item, elem, indexPath(path, i), class)
		}
		v.Set(s)
	case reflect.String:
		if s, ok := d.scalar(n, path, class); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		if s, ok := d.scalar(n, path, class); ok {
			b, err := ParseBool(s)
			if err != nil {
				d.errorf(n, path, "%v", err)
				return
			}
			v.SetBool(b)
		}
	case reflect.Int:
		if s, ok := d.scalar(n, path, class); ok {
			i, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				d.errorf(n, path, "must be a whole number, not %q", s)
				return
			}
			v.SetInt(int64(i))
		}
	case reflect.Float64:
		if s, ok := d.scalar(n, path, class); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				d.errorf(n, path, "must be a number, not %q", s)
				return
			}
			v.SetFloat(f)
		}
	default:
		panic(fmt.Sprintf("packs: decoder cannot fill %s at %s", v.Type(), path))
	}
}

// scalar returns the expanded text of a scalar node.
func (d *decoder) scalar(n *yaml.Node, path string, class fieldClass) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "must be a single value, not a %s", kindName(n))
		return "", false
	}
	x := expand(n.Value, d.env, class)
	for _, msg := range x.bad {
		d.errorf(n, path, "%s", msg)
	}
	if len(x.unresolved) > 0 {
		if class == classPlain {
			d.warnf(n, path, "%s not set: the value keeps the placeholder", describeVars(x.unresolved))
		} else {
			d.unresolved[path] = x.unresolved
		}
	}
	return x.value, true
}

func describeVars(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "${" + n + "}"
	}
	if len(q) == 1 {
		return "variable " + q[0] + " is"
	}
	return "variables " + strings.Join(q, ", ") + " are"
}

// field describes one struct field the decoder can fill.
type field struct {
	index int
	name  string // canonical key
	class fieldClass
}

func structFields(t reflect.Type) (map[string]field, []string) {
	fields := make(map[string]field)
	var names []string
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name := strings.Split(sf.Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		f := field{index: i, name: name, class: classOf(sf.Tag.Get("pack"))}
		fields[name] = f
		names = append(names, name)
		if alias := sf.Tag.Get("alias"); alias != "" {
			fields[alias] = f
		}
	}
	return fields, names
}

// decodeStruct fills a struct from a mapping. Keys the struct does not know are passed to
// unknown when it is set, else warned about.
func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string, unknown func(k, val *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "must be a mapping (key: value), not a %s", kindName(n))
		return
	}
	fields, names := structFields(v.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		f, ok := fields[k.Value]
		if !ok {
			if unknown != nil {
				unknown(k, val)
				continue
			}
			msg := fmt.Sprintf("unknown key %q is ignored", k.Value)
			if s := suggest(k.Value, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.warnf(k, joinPath(path, k.Value), "%s", msg)
			continue
		}
		d.decode(val, v.Field(f.index), joinPath(path, f.name), f.class)
		d.atKey(k, val, joinPath(path, f.name))
	}
}

// atKey makes a block mapping or list be reported where its key is written: a problem with
// "approval:" points at that line, not at the first item below it.
func (d *decoder) atKey(k, val *yaml.Node, path string) {
	if val.Kind == yaml.MappingNode || val.Kind == yaml.SequenceNode {
		d.index[path] = d.pos(k)
	}
}

func (d *decoder) decodeText(n *yaml.Node, t *Text, path string) {
	switch n.Kind {
	case yaml.ScalarNode:
		t.Plain, _ = d.scalar(n, path, classPlain)
	case yaml.MappingNode:
		t.ByLang = make(map[string]string)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			p := joinPath(path, k.Value)
			d.index[p] = d.pos(val)
			if s, ok := d.scalar(val, p, classPlain); ok {
				t.ByLang[strings.ToLower(k.Value)] = s
			}
		}
	default:
		d.errorf(n, path, "must be a text or a mapping from language to text, not a %s", kindName(n))
	}
}

func (d *decoder) decodeStringList(n *yaml.Node, l *StringList, path string, class fieldClass) {
	switch n.Kind {
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		for i, item := range n.Content {
			p := indexPath(path, i)
			d.index[p] = d.pos(item)
			if s, ok := d.scalar(item, p, class); ok {
				out = append(out, s)
			}
		}
		*l = out
	case yaml.ScalarNode:
		s, ok := d.scalar(n, path, class)
		if !ok {
			return
		}
		var out []string
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			d.errorf(n, path, "must be a list, or a string holding a JSON array of strings (%v)", err)
			return
		}
		*l = out
	default:
		d.errorf(n, path, "must be a list, not a %s", kindName(n))
	}
}

// suggest returns the known name closest to key, if it is close enough to be a typo.
func suggest(key string, names []string) string {
	if len(key) > 64 {
		return ""
	}
	best, bestD := "", 3
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for _, n := range sorted {
		if strings.EqualFold(n, key) {
			return n
		}
		if dist := EditDistance(strings.ToLower(key), strings.ToLower(n)); dist < bestD {
			best, bestD = n, dist
		}
	}
	return best
}

// EditDistance is the optimal string alignment distance between a and b: the fewest
// single-rune insertions, deletions, substitutions and transpositions (the typo measure of the
// pack's "did you mean" hints and of packs/namecheck).
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

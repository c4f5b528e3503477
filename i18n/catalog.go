package i18n

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
	"github.com/nicksnyder/go-i18n/v2/i18n/template"
	"golang.org/x/text/language"

	"github.com/packbot/packbot/packs"
)

// GreetingKey is the key under which a pack's languages.<L>.greetingMessage is looked up.
const GreetingKey = "greetingMessage"

// packPrefix keeps a pack's strings apart from the built-in ones in the shared go-i18n bundle:
// built-in message IDs are the keys, pack message IDs are packPrefix+key.
const packPrefix = "pack:"

// Catalog holds the built-in catalogs plus one pack's overrides, resolved in [New]: every text
// T can return is already chosen and split into literal runs and placeholders. A Catalog is
// immutable and safe for concurrent use.
type Catalog struct {
	def    string
	langs  []string                    // supported languages, sorted
	tables map[string]map[string]*text // supported language → key → text
	// other serves languages the catalog does not support: the pack default language's
	// strings, then built-in English.
	other map[string]*text
}

// New builds the catalog for a pack. p.Languages[L].Strings override built-in strings key by
// key, and p.Languages[L].GreetingMessage is the pack string of key [GreetingKey] in language L
// (it wins over a "greetingMessage" entry in Strings). An empty pack string counts as absent.
// Regional codes count for their base language ("pt-BR" for "pt"); when a pack has both, the
// plain code wins key by key. The default language is p.Metadata.DefaultLanguage, "en" if
// empty. p may be nil: built-in strings only.
//
// New reports every problem at once, each with its field path: a pack string with a malformed
// placeholder (languages.es.strings.AUTH_SUCCESS_NAME: unclosed placeholder "{name"), or a
// language code that golang.org/x/text or go-i18n does not know.
func New(p *packs.Pack) (*Catalog, error) {
	ps, err := collect(p)
	if err != nil {
		return nil, err
	}
	r, err := newResolver(ps)
	if err != nil {
		return nil, err
	}

	c := &Catalog{def: ps.def, tables: make(map[string]map[string]*text)}
	supported := map[string]bool{ps.def: true}
	for _, lang := range builtinLanguages {
		supported[lang] = true
	}
	for lang := range ps.strings {
		supported[lang] = true
	}
	c.langs = slices.Sorted(maps.Keys(supported))

	texts := make(map[string]*text) // one *text per distinct string
	for _, lang := range c.langs {
		steps := []step{{lang, true}, {lang, false}, {ps.def, true}, {fallbackLanguage, false}}
		if c.tables[lang], err = r.table(steps, ps.keys(lang, ps.def), texts); err != nil {
			return nil, err
		}
	}
	steps := []step{{ps.def, true}, {fallbackLanguage, false}}
	if c.other, err = r.table(steps, ps.keys(ps.def), texts); err != nil {
		return nil, err
	}
	return c, nil
}

// T returns the text of key in lang with every {placeholder} replaced, all occurrences, from
// args given as name/value pairs: T("es", "AUTH_SUCCESS_NAME", "name", "Ana"). The lookup for
// language L is: pack L, built-in L, pack default language, built-in English, and finally the
// key itself (returned as is). lang is normalized first ("es-ES", "es_ES", "ES" mean "es"); ""
// means the pack default language. A placeholder without a value stays as written; values are
// inserted verbatim, never scanned for placeholders; when a name is given twice the first pair
// wins and an odd trailing name is ignored.
func (c *Catalog) T(lang, key string, args ...string) string {
	t := c.table(lang)[key]
	if t == nil {
		return key
	}
	return t.render(args)
}

// Has reports whether key has a text for lang in some step of the lookup, that is whether T
// returns more than the key itself.
func (c *Catalog) Has(lang, key string) bool {
	return c.table(lang)[key] != nil
}

// Language resolves a wallet's preferred language or a /lang argument to a supported code: a
// built-in language (en, es, fr, pt), a language the pack defines, or the pack default language.
// ok is false for "" and for unsupported languages.
func (c *Catalog) Language(tag string) (code string, ok bool) {
	if _, ok := c.tables[tag]; ok {
		return tag, true
	}
	code = Normalize(tag)
	if _, ok := c.tables[code]; ok {
		return code, true
	}
	return "", false
}

// Languages returns the supported language codes, sorted.
func (c *Catalog) Languages() []string {
	return slices.Clone(c.langs)
}

// Default returns the pack default language (normalized; "en" without a pack).
func (c *Catalog) Default() string {
	return c.def
}

// table returns the texts for lang, without allocating for a supported code, a plain regional
// tag ("es-ES", "pt_BR", "FR") or "".
func (c *Catalog) table(lang string) map[string]*text {
	if t, ok := c.tables[lang]; ok {
		return t
	}
	if lang == "" {
		return c.tables[c.def]
	}
	var buf [3]byte
	if base, ok := quickBase(lang, &buf); ok {
		if t, ok := c.tables[string(base)]; ok {
			return t
		}
	}
	if t, ok := c.tables[Normalize(lang)]; ok {
		return t
	}
	return c.other
}

// packStrings are a pack's strings by normalized language.
type packStrings struct {
	source  string
	def     string
	strings map[string]map[string]string // language → key → text
	codes   map[string]string            // language → the code the pack wrote, for messages
}

// keys returns the built-in keys plus the pack keys of langs.
func (ps *packStrings) keys(langs ...string) []string {
	keys := builtins().keys
	extra := false
	for _, lang := range langs {
		for k := range ps.strings[lang] {
			if _, found := slices.BinarySearch(keys, k); !found {
				extra = true
			}
		}
	}
	if !extra {
		return keys
	}
	set := make(map[string]bool)
	for _, k := range keys {
		set[k] = true
	}
	for _, lang := range langs {
		for k := range ps.strings[lang] {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// collect gathers and checks the pack's strings.
func collect(p *packs.Pack) (*packStrings, error) {
	ps := &packStrings{def: fallbackLanguage, strings: map[string]map[string]string{}, codes: map[string]string{}}
	if p == nil {
		return ps, nil
	}
	ps.source = p.Source
	var problems []string
	problem := func(path, format string, args ...any) {
		problems = append(problems, path+": "+fmt.Sprintf(format, args...))
	}
	if d := p.Metadata.DefaultLanguage; d != "" {
		if ps.def = Normalize(d); ps.def == "" {
			problem("metadata.defaultLanguage", "%q is not a language code golang.org/x/text knows", d)
		}
	}
	// The plain code first, so that it wins over its regional variants key by key.
	codes := slices.SortedFunc(maps.Keys(p.Languages), func(a, b string) int {
		if pa, pb := Normalize(a) == a, Normalize(b) == b; pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, code := range codes {
		lang := Normalize(code)
		if lang == "" {
			problem("languages."+code, "%q is not a language code golang.org/x/text knows", code)
			continue
		}
		if _, seen := ps.codes[lang]; !seen {
			ps.codes[lang] = code
		}
		set := ps.strings[lang]
		if set == nil {
			set = map[string]string{}
			ps.strings[lang] = set
		}
		add := func(path, key, s string) {
			if s == "" {
				return
			}
			if _, err := compile(s); err != nil {
				problem(path, "%v", err)
				return
			}
			if _, dup := set[key]; !dup {
				set[key] = s
			}
		}
		l := p.Languages[code]
		add("languages."+code+"."+GreetingKey, GreetingKey, l.GreetingMessage)
		for _, key := range slices.Sorted(maps.Keys(l.Strings)) {
			add("languages."+code+".strings."+key, key, l.Strings[key])
		}
	}
	if err := ps.err(problems); err != nil {
		return nil, err
	}
	return ps, nil
}

func (ps *packStrings) err(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	prefix := "i18n: pack"
	if ps.source != "" {
		prefix += " " + ps.source
	}
	if len(problems) == 1 {
		return fmt.Errorf("%s: %s", prefix, problems[0])
	}
	return fmt.Errorf("%s: %d problems:\n  %s", prefix, len(problems), strings.Join(problems, "\n  "))
}

// A step of the lookup: the pack's or the built-in string of a language.
type step struct {
	lang string
	pack bool
}

// resolver looks strings up in one go-i18n bundle holding the built-in catalogs (message ID =
// key) and the pack's strings (message ID = packPrefix + key), each under its language's tag.
type resolver struct {
	bundle *goi18n.Bundle
	locs   map[string]*goi18n.Localizer
	tags   map[string]language.Tag
}

func newResolver(ps *packStrings) (*resolver, error) {
	r := &resolver{
		bundle: goi18n.NewBundle(language.Make(fallbackLanguage)),
		locs:   map[string]*goi18n.Localizer{},
		tags:   map[string]language.Tag{},
	}
	b := builtins()
	for _, lang := range builtinLanguages {
		if err := r.bundle.AddMessages(r.tag(lang), b.messages[lang]...); err != nil {
			return nil, fmt.Errorf("i18n: built-in catalog %s: %w", lang, err)
		}
	}
	var problems []string
	for _, lang := range slices.Sorted(maps.Keys(ps.strings)) {
		msgs := make([]*goi18n.Message, 0, len(ps.strings[lang]))
		for key, s := range ps.strings[lang] {
			msgs = append(msgs, &goi18n.Message{ID: packPrefix + key, Other: s})
		}
		if err := r.bundle.AddMessages(r.tag(lang), msgs...); err != nil {
			problems = append(problems, fmt.Sprintf("languages.%s: go-i18n does not support this language: %v", ps.codes[lang], err))
		}
	}
	if err := ps.err(problems); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *resolver) tag(lang string) language.Tag {
	t, ok := r.tags[lang]
	if !ok {
		t = language.Make(lang)
		r.tags[lang] = t
	}
	return t
}

// identity makes go-i18n return texts untouched: {name} placeholders are packbot's, and a text
// is never executed as a Go template.
var identity template.IdentityParser

// lookup returns the message id in exactly lang: go-i18n's own fallbacks (language matching,
// the bundle default language) do not count, since packbot's lookup order is its own.
func (r *resolver) lookup(lang, id string) (string, bool) {
	loc := r.locs[lang]
	if loc == nil {
		loc = goi18n.NewLocalizer(r.bundle, r.tag(lang).String())
		r.locs[lang] = loc
	}
	s, tag, err := loc.LocalizeWithTag(&goi18n.LocalizeConfig{MessageID: id, TemplateParser: identity})
	if err != nil || tag != r.tag(lang) {
		return "", false
	}
	return s, true
}

// table resolves keys through steps, sharing compiled texts through texts.
func (r *resolver) table(steps []step, keys []string, texts map[string]*text) (map[string]*text, error) {
	table := make(map[string]*text, len(keys))
	for _, key := range keys {
		for _, st := range steps {
			id := key
			if st.pack {
				id = packPrefix + key
			}
			s, ok := r.lookup(st.lang, id)
			if !ok {
				continue
			}
			t := texts[s]
			if t == nil {
				var err error
				if t, err = compile(s); err != nil {
					return nil, fmt.Errorf("i18n: %s in %s: %w", key, st.lang, err)
				}
				texts[s] = t
			}
			table[key] = t
			break
		}
	}
	return table, nil
}

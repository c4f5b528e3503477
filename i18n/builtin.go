package i18n

import (
	"embed"
	"fmt"
	"slices"
	"sync"

	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

// The built-in catalogs, one go-i18n message file per language: a flat JSON object from key to
// text. English is the reference: every language has exactly its keys and placeholders.
//
//go:embed catalog/active.*.json
var catalogFS embed.FS

// builtinLanguages are the languages with a built-in catalog, sorted; English comes last in the
// lookup order of every language.
var builtinLanguages = []string{"en", "es", "fr", "pt"}

const fallbackLanguage = "en"

type builtinCatalogs struct {
	messages map[string][]*goi18n.Message // by language
	keys     []string                     // sorted keys of the English catalog
}

// builtins parses the embedded catalogs once. They are part of the binary, so a broken one is a
// programming error (the tests parse them) and panics.
var builtins = sync.OnceValue(func() *builtinCatalogs {
	b := &builtinCatalogs{messages: make(map[string][]*goi18n.Message, len(builtinLanguages))}
	for _, lang := range builtinLanguages {
		path := "catalog/active." + lang + ".json"
		buf, err := catalogFS.ReadFile(path)
		if err != nil {
			panic(fmt.Sprintf("i18n: built-in catalog: %v", err))
		}
		f, err := goi18n.ParseMessageFileBytes(buf, path, nil)
		if err != nil {
			panic(fmt.Sprintf("i18n: built-in catalog %s: %v", path, err))
		}
		if f.Tag != language.Make(lang) {
			panic(fmt.Sprintf("i18n: built-in catalog %s has language %s", path, f.Tag))
		}
		b.messages[lang] = f.Messages
	}
	for _, m := range b.messages[fallbackLanguage] {
		b.keys = append(b.keys, m.ID)
	}
	slices.Sort(b.keys)
	return b
})

// Keys returns every built-in key, sorted. Each has a text in every built-in language.
func Keys() []string {
	return slices.Clone(builtins().keys)
}

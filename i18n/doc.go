// Package i18n owns every string packbot's bot sends by itself — menu titles and status lines,
// prompts, approval notices, errors, command answers — in English, Spanish, French and
// Portuguese, and a pack's overrides of them.
//
// The built-in catalogs are go-i18n message files embedded from catalog/active.<lang>.json
// ([Keys] lists the keys). [New] loads them and a pack's languages.<L>.strings (and
// languages.<L>.greetingMessage, key "greetingMessage") into one go-i18n bundle and resolves,
// once, every key of every supported language through packbot's lookup order: the pack's
// string in L, the built-in L, the pack default language's string, built-in English, and the
// key itself. [Catalog.T] is then a map lookup plus placeholder substitution.
//
// Placeholders are Hologram's {name}, not go-i18n's templates: texts are never executed as
// Go templates, and T replaces every occurrence of each placeholder with the value given,
// verbatim. A "{" followed by anything but a letter or "_" is plain text, so JSON examples need
// no escaping; an unclosed "{name" in a pack string is an error from New.
//
// A language that only the pack defines should set its own LANGUAGE_NAME string (the name of
// the language in itself, used by /lang); otherwise it borrows the default language's.
//
// The package does no I/O and holds no per-user state: which language a user speaks is decided
// by the caller (bot, flows, menu) with [Catalog.Language]; the pack itself comes from package
// packs.
package i18n

package i18n

import "strings"

// noName removes the {userName} placeholder together with the separator that only makes sense
// before a name: "¡Hola, {userName}!" becomes "¡Hola!", "Hello {userName}!" becomes "Hello!",
// "Bonjour {userName} !" becomes "Bonjour !". The comma forms come first so that the vocative
// comma of Spanish and Portuguese goes with the name.
var noName = strings.NewReplacer(", {userName}", "", "，{userName}", "", " {userName}", "", "{userName} ", "", "{userName}", "")

// Greeting fills a greeting template's {userName} with name; with no name (a guest) the
// placeholder and the punctuation that goes with it are dropped, so that the greeting reads
// well in every language.
func Greeting(template, name string) string {
	if name == "" {
		return noName.Replace(template)
	}
	return strings.ReplaceAll(template, "{userName}", name)
}

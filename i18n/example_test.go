package i18n_test

import (
	"fmt"

	"github.com/packbot/packbot/i18n"
	"github.com/packbot/packbot/packs"
)

func ExampleCatalog_T() {
	c, err := i18n.New(&packs.Pack{
		Metadata: packs.Metadata{DefaultLanguage: "es"},
		Languages: map[string]packs.Language{
			"es": {
				GreetingMessage: "¡Hola {userName}! Soy el asistente de {userName}.",
				Strings:         map[string]string{"CANCEL": "Dejarlo"},
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.T("", "greetingMessage", "userName", "Ana"))
	fmt.Println(c.T("es-ES", "CANCEL"))
	fmt.Println(c.T("fr", "TOOL_DENIED", "tool", "transfer", "server", "bank"))
	lang, ok := c.Language("pt_BR")
	fmt.Println(lang, ok, c.T(lang, "LANG_SET", "language", c.T(lang, "LANGUAGE_NAME")))
	fmt.Println(c.T("en", "NOT_A_KEY"))
	// Output:
	// ¡Hola Ana! Soy el asistente de Ana.
	// Dejarlo
	// Vous n'avez pas le droit d'utiliser transfer sur bank.
	// pt true Vou falar com você em português.
	// NOT_A_KEY
}

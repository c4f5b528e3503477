package i18n

// MessageKind is the outbox kind of a [Message] (store.OutboxMessage.Kind).
const MessageKind = "notice"

// Message is a text to send later to someone whose language is known only then (a notice in
// the durable outbox): the text of Key with Args (name/value pairs) in the recipient's
// language, or Text verbatim when Key is empty.
type Message struct {
	Key  string   `json:"key,omitempty"`
	Args []string `json:"args,omitempty"`
	Text string   `json:"text,omitempty"`
}

// In renders m in lang.
func (m Message) In(c *Catalog, lang string) string {
	if m.Key == "" {
		return m.Text
	}
	if lang == "" {
		lang = c.Default()
	}
	return c.T(lang, m.Key, m.Args...)
}

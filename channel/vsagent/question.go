package vsagent

import "strings"

// Questions travel as "menu-display" messages. The VS Agent sends the wallet only the prompt
// and the item texts, keeps a text → item id table, and reports the answer as a "menu-select"
// carrying the chosen item's id. Its threadId is the DIDComm thread of the question, which the
// VS Agent (v1.x) does not map back to the id the bot gave the message, so the question id
// cannot come from there. Instead every item id is "<question id>:<option text>": the answer
// then names both the question and the option, and any replica can decode it without state.

// detailSeparator joins a question's text and its detail in the prompt.
const detailSeparator = "\n\n"

// optionID is the menu item id of option text in question qid.
func optionID(qid, text string) string { return qid + ":" + text }

// parseOptionID splits an item id made by [optionID]; ok is false for any other id (an item
// id chosen by someone else, or the bare response text a VS Agent reports when it lost its
// text → id table).
func parseOptionID(id string) (qid, text string, ok bool) {
	qid, text, ok = strings.Cut(id, ":")
	if !ok || !isUUID(qid) || text == "" {
		return "", "", false
	}
	return qid, text, true
}

package i18n

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// wantKeys is the contract other packages write against: adding a key is fine, renaming or
// removing one breaks them.
var wantKeys = []string{
	"ABORT_CONFIG", "ALREADY_ATTACHED", "APPROVAL_ALREADY_RESOLVED", "APPROVAL_ALREADY_VOTED",
	"APPROVAL_APPROVED_FAILED", "APPROVAL_APPROVED_OTHERS", "APPROVAL_APPROVED_RESULT",
	"APPROVAL_CANCELLED", "APPROVAL_CONFIRM", "APPROVAL_DETAILS", "APPROVAL_EXPIRED",
	"APPROVAL_INTERRUPTED", "APPROVAL_NEW", "APPROVAL_NOT_APPROVER", "APPROVAL_NOT_SUBMITTED",
	"APPROVAL_OWN_REQUEST", "APPROVAL_PROOF_DECLINED", "APPROVAL_PROOF_FAILED", "APPROVAL_PROOF_LATE",
	"APPROVAL_PROOF_MISMATCH", "APPROVAL_PROOF_PURPOSE", "APPROVAL_PROOF_ROLE",
	"APPROVAL_PROOF_TIMEOUT", "APPROVAL_PROOF_UNAVAILABLE", "APPROVAL_REJECTED", "APPROVAL_REQUIRED",
	"APPROVAL_REVOKED", "APPROVAL_SUBMITTED", "APPROVAL_TOOL_GONE", "APPROVAL_VOTE_RECORDED",
	"APPROVAL_WITHDRAWN", "APPROVAL_YOU_APPROVED", "APPROVAL_YOU_CANCELLED", "APPROVAL_YOU_REJECTED",
	"APPROVE", "ATTACHED", "ATTACHMENT_CUT", "ATTACHMENT_DENIED", "ATTACHMENT_GONE", "ATTACH_LIMIT",
	"ATTACH_USAGE", "AUTHENTICATE", "AUTH_DECLINED", "AUTH_ERROR", "AUTH_EXPIRED", "AUTH_FAILED",
	"AUTH_NO_CREDENTIAL", "AUTH_NO_CREDENTIAL_ISSUER", "AUTH_PACK_CHANGED", "AUTH_PROOF_PURPOSE",
	"AUTH_REQUIRED", "AUTH_SUCCESS", "AUTH_SUCCESS_NAME", "AUTH_TIMEOUT", "AUTH_UNAVAILABLE", "BACK",
	"CALL_AMBIGUOUS", "CALL_BAD_JSON", "CALL_USAGE", "CANCEL", "CANCEL_REQUEST", "CHOOSE_OPTION",
	"CONTEXT_ARG", "CONTEXT_ARGS_CANCELLED", "CONTEXT_ARG_OPTIONAL", "CONTEXT_ARG_REQUIRED",
	"CONTEXT_ARG_SKIP", "CONTEXT_ARG_TOO_LONG", "CREDENTIAL", "DETACHED", "DETACH_OPTION",
	"ELICIT_ACCEPT", "ELICIT_CANCEL", "ELICIT_CANCELLED", "ELICIT_CONFIRM", "ELICIT_DECLINE",
	"ELICIT_DECLINED", "ELICIT_FIELD", "ELICIT_HINT_MAX", "ELICIT_HINT_MIN", "ELICIT_INTRO",
	"ELICIT_INVALID_ENUM", "ELICIT_INVALID_FORMAT", "ELICIT_INVALID_MAX", "ELICIT_INVALID_MAXITEMS",
	"ELICIT_INVALID_MAXLENGTH", "ELICIT_INVALID_MIN", "ELICIT_INVALID_MINITEMS",
	"ELICIT_INVALID_MINLENGTH", "ELICIT_INVALID_PATTERN", "ELICIT_INVALID_TYPE", "ELICIT_SKIP",
	"ELICIT_TIMEOUT", "ELICIT_TYPE_ARRAY", "ELICIT_TYPE_INTEGER", "ELICIT_TYPE_NUMBER",
	"ELICIT_TYPE_STRING", "ELICIT_URL", "ELICIT_URL_DONE", "ELICIT_USE_DEFAULT", "HELP",
	"INTERNAL_ERROR", "LANGUAGE_NAME", "LANG_SET", "LANG_UNSUPPORTED", "LANG_USAGE", "LLM_ERROR",
	"LLM_TIMEOUT", "LOGOUT", "LOGOUT_CONFIRMATION", "MCP_CALL_CANCELLED", "MCP_CONFIG",
	"MCP_CONFIG_ABORTED", "MCP_CONFIG_ALREADY", "MCP_CONFIG_CHECK_FAILED", "MCP_CONFIG_CHOOSE_SERVER",
	"MCP_CONFIG_DELETE", "MCP_CONFIG_DELETED", "MCP_CONFIG_EMPTY_VALUE", "MCP_CONFIG_FAILURE",
	"MCP_CONFIG_FIELD_PROMPT", "MCP_CONFIG_INTERRUPTED", "MCP_CONFIG_LABEL_PROMPT",
	"MCP_CONFIG_LABEL_SECRET_PROMPT", "MCP_CONFIG_LOGIN_FIRST", "MCP_CONFIG_NO_SERVERS",
	"MCP_CONFIG_OAUTH_DONE", "MCP_CONFIG_OAUTH_FAILED", "MCP_CONFIG_OAUTH_LINK",
	"MCP_CONFIG_OPTION_CONFIGURED", "MCP_CONFIG_OPTION_NOT_CONFIGURED", "MCP_CONFIG_RECONFIGURE",
	"MCP_CONFIG_SECRET_PROMPT", "MCP_CONFIG_SUCCESS", "MCP_CONFIG_TESTING", "MCP_CONFIG_UNAVAILABLE",
	"MCP_CONFIG_UNREACHABLE", "MCP_CREDENTIAL_REJECTED", "MCP_PROGRESS", "MCP_PROGRESS_CANCEL_HINT",
	"MCP_SAMPLING", "MCP_UNAVAILABLE", "MENU_CANCEL_CALL", "MENU_STATUS_AUTHENTICATED",
	"MENU_STATUS_UNAUTHENTICATED", "MESSAGE_TOO_LONG", "MY_APPROVAL_REQUESTS", "MY_REQUESTS_NONE",
	"MY_REQUESTS_TITLE", "MY_REQUEST_OPTION", "NO", "NO_LLM", "NO_RUNNING_CALL", "PARKED_APOLOGY",
	"PENDING_APPROVALS", "PENDING_NONE", "PENDING_OPTION", "PENDING_TITLE", "PROMPTS",
	"PROMPTS_HEADER", "PROMPTS_NONE", "PROMPT_BAD_ARGS", "PROMPT_DENIED", "PROMPT_FAILED",
	"PROMPT_GONE", "PROMPT_OPTION", "PROMPT_UNKNOWN", "PROMPT_USAGE", "PROMPT_USED",
	"RECEIPT_OFFER_EXECUTED", "RECEIPT_OFFER_FAILED", "REJECT", "RESOURCES_ATTACHED",
	"RESOURCES_HEADER", "RESOURCES_NONE", "RESOURCE_DENIED", "RESOURCE_OPTION", "RESOURCE_UNKNOWN",
	"ROOT_TITLE", "SKILLS_HEADER", "SKILLS_NONE", "SKILL_LOADED", "SKILL_OPTION", "TEMPLATE_OPTION",
	"TOOLS_HEADER", "TOOLS_NEEDS_APPROVAL", "TOOLS_NONE", "TOOLS_SERVER_NOT_CONFIGURED",
	"TOOLS_SERVER_UNAVAILABLE", "TOOL_DENIED", "TOOL_FAILED", "TOOL_INTERRUPTED", "TOOL_NEEDS_CONFIG",
	"TOOL_RESULT", "TOOL_UNKNOWN", "UNEXPECTED_ANSWER", "UNKNOWN_COMMAND", "UNKNOWN_MENU_OPTION",
	"WAITING_CREDENTIAL", "WHOAMI_AUTHENTICATED", "WHOAMI_GUEST", "YES", "greetingMessage",
}

func TestKeys(t *testing.T) {
	if got := Keys(); !slices.Equal(got, wantKeys) {
		t.Errorf("Keys() = %q\nwant %q", got, wantKeys)
	}
	k := Keys()
	k[0] = "changed"
	if Keys()[0] == "changed" {
		t.Error("Keys returns the package's own slice")
	}
}

// readCatalog reads an embedded catalog as plain JSON, independently of go-i18n.
func readCatalog(t *testing.T, lang string) map[string]string {
	t.Helper()
	buf, err := catalogFS.ReadFile("catalog/active." + lang + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(buf, &m); err != nil {
		t.Fatalf("%s: %v", lang, err)
	}
	return m
}

func TestBuiltinCatalogsAreComplete(t *testing.T) {
	en := readCatalog(t, "en")
	for _, lang := range builtinLanguages {
		cat := readCatalog(t, lang)
		if got := slices.Sorted(maps.Keys(cat)); !slices.Equal(got, wantKeys) {
			t.Errorf("%s has keys %q, want %q", lang, got, wantKeys)
		}
		for key, s := range cat {
			if strings.TrimSpace(s) == "" {
				t.Errorf("%s.%s is empty", lang, key)
				continue
			}
			tx, err := compile(s)
			if err != nil {
				t.Errorf("%s.%s: %v", lang, key, err)
				continue
			}
			ref := mustCompile(en[key])
			if got, want := slices.Sorted(slices.Values(tx.placeholders())), slices.Sorted(slices.Values(ref.placeholders())); !slices.Equal(got, want) {
				t.Errorf("%s.%s has placeholders %q, English has %q", lang, key, got, want)
			}
			if lang != "en" && len(en[key]) > 20 && s == en[key] {
				t.Errorf("%s.%s is the English text %q", lang, key, s)
			}
		}
	}
}

func TestBuiltinTexts(t *testing.T) {
	c, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ lang, key, want string }{
		{"en", "LANGUAGE_NAME", "English"},
		{"es", "LANGUAGE_NAME", "español"},
		{"fr", "LANGUAGE_NAME", "français"},
		{"pt", "LANGUAGE_NAME", "português"},
		{"en", "AUTH_SUCCESS_NAME", "Welcome, {name}! You are logged in."},
		{"en", "TOOL_RESULT", "{tool}:\n{result}"},
		{"es", "YES", "Sí"},
		{"en", "MCP_CONFIG_OPTION_NOT_CONFIGURED", "⚠️ {server}"},
	}
	for _, tt := range tests {
		if got := c.T(tt.lang, tt.key); got != tt.want {
			t.Errorf("T(%q, %q) = %q, want %q", tt.lang, tt.key, got, tt.want)
		}
	}
	help := c.T("en", "HELP", "languages", "en, es")
	for _, want := range []string{`/call get_exchange_rate {"from":"EUR","to":"USD"}`, "(en, es)", "\n/whoami"} {
		if !strings.Contains(help, want) {
			t.Errorf("HELP = %q, want it to contain %q", help, want)
		}
	}
}

package flows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/packbot/packbot/internal/logid"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

// The MCP credential configuration dialog, in three kinds: choosing a server, deciding what to
// do with a server configured already, and typing the fields' values. Each keeps the session in
// store.StateMCPConfig (the menu offers to abort).
const (
	kindMCPServer   = "mcp-server"
	kindMCPExisting = "mcp-existing"
	kindMCPField    = "mcp-field"
)

// mcpServer: which server to configure (question).
type mcpServer struct {
	question
}

// mcpExisting: Server has working credentials: reconfigure, delete or cancel (question).
type mcpExisting struct {
	question
	Server string `json:"server"`
}

// mcpField: typing the value of field number Field of Server; the values typed before are in
// the sealed draft.
type mcpField struct {
	question
	Server string `json:"server"`
	Field  int    `json:"field,omitempty"`
}

func (*mcpServer) kind() string   { return kindMCPServer }
func (*mcpExisting) kind() string { return kindMCPExisting }
func (*mcpField) kind() string    { return kindMCPField }

// configServer is the server of an MCP configuration dialog ("" for none).
func configServer(d dialog) string {
	switch d := d.(type) {
	case *mcpExisting:
		return d.Server
	case *mcpField:
		return d.Server
	}
	return ""
}

// Values of the "existing credentials" question.
const (
	choiceReconfigure = "reconfigure"
	choiceDelete      = "delete"
	choiceCancel      = "cancel"
)

// startConfig lists the user-controlled servers, ✅ configured or ⚠️ not, and asks which one.
func (t *turn) startConfig(ctx context.Context) error {
	if !t.e.configAvailable() {
		return t.sayKey(ctx, "MCP_CONFIG_UNAVAILABLE")
	}
	if !t.s.Authenticated || t.s.Identity == "" {
		return t.sayKey(ctx, "MCP_CONFIG_LOGIN_FIRST")
	}
	var opts []option
	for i := range t.e.pack.MCP.Servers {
		srv := &t.e.pack.MCP.Servers[i]
		if !srv.Enabled || !srv.UserControlled() || (!srv.OAuth() && t.e.keyring == nil) || (srv.OAuth() && t.e.oauth == nil) {
			continue
		}
		key := "MCP_CONFIG_OPTION_NOT_CONFIGURED"
		if st, err := t.e.pool.Status(ctx, t.s.Identity, srv.Name); err == nil && st == mcp.StatusSuccess {
			key = "MCP_CONFIG_OPTION_CONFIGURED"
		}
		opts = append(opts, option{Text: t.tr(key, "server", srv.Name), Value: srv.Name})
	}
	if len(opts) == 0 {
		return t.sayKey(ctx, "MCP_CONFIG_NO_SERVERS")
	}
	t.dropDraft(ctx, configServer(t.dialog()))
	return t.askDialog(ctx, &mcpServer{}, t.tr("MCP_CONFIG_CHOOSE_SERVER"), opts)
}

// existingChosen: reconfigure, delete or keep the credentials of a configured server.
func (t *turn) existingChosen(ctx context.Context, d *mcpExisting, value string) error {
	switch value {
	case choiceReconfigure:
		return t.startFields(ctx, d.Server)
	case choiceDelete:
		t.endDialog()
		if err := t.e.pool.Forget(ctx, t.s.Identity, d.Server); err != nil {
			return fmt.Errorf("delete credentials: %w", err)
		}
		return t.sayKey(ctx, "MCP_CONFIG_DELETED", "server", d.Server)
	}
	return t.abortConfig(ctx)
}

// serverChosen: OAuth servers get a sign-in link; configured servers offer reconfigure, delete
// or cancel; the others start with the first field.
func (t *turn) serverChosen(ctx context.Context, _ *mcpServer, name string) error {
	srv := t.e.pack.Server(name)
	if srv == nil || !srv.UserControlled() {
		t.endDialog()
		return t.sayKey(ctx, "MCP_CONFIG_NO_SERVERS")
	}
	if srv.OAuth() {
		t.endDialog()
		u, err := t.e.oauth.Begin(ctx, t.s.Identity, srv.Name)
		if err != nil {
			t.e.log.WarnContext(ctx, "OAuth sign-in not started", slog.String("server", srv.Name), slog.Any("err", err))
			return t.sayKey(ctx, "MCP_CONFIG_OAUTH_FAILED", "server", srv.Name)
		}
		return t.sayKey(ctx, "MCP_CONFIG_OAUTH_LINK", "server", srv.Name, "url", u)
	}
	if st, err := t.e.pool.Status(ctx, t.s.Identity, srv.Name); err == nil && st != mcp.StatusNeedsAuthentication {
		return t.askDialog(ctx, &mcpExisting{Server: srv.Name},
			t.tr("MCP_CONFIG_ALREADY", "server", srv.Name), []option{
				{Text: t.tr("MCP_CONFIG_RECONFIGURE"), Value: choiceReconfigure},
				{Text: t.tr("MCP_CONFIG_DELETE"), Value: choiceDelete},
				{Text: t.tr("CANCEL"), Value: choiceCancel},
			})
	}
	return t.startFields(ctx, srv.Name)
}

// startFields asks for the first field of server.
func (t *turn) startFields(ctx context.Context, server string) error {
	srv := t.e.pack.Server(server)
	if srv.UserConfig == nil || len(srv.UserConfig.Fields) == 0 {
		t.endDialog()
		return t.sayKey(ctx, "MCP_CONFIG_NO_SERVERS")
	}
	t.dropDraft(ctx, server)
	t.setDialog(&mcpField{Server: server})
	return t.promptField(ctx, srv, 0)
}

func (t *turn) promptField(ctx context.Context, srv *packs.Server, i int) error {
	f := srv.UserConfig.Fields[i]
	label := f.Label.In(t.lang(), t.e.cat.Default())
	if label == "" {
		label = f.Name
	}
	// A label that is a whole sentence (Hologram packs write "Please enter your token:") is the
	// prompt itself: wrapped in ours it would read "Please enter Please enter …".
	key := map[[2]bool]string{
		{false, false}: "MCP_CONFIG_FIELD_PROMPT", {false, true}: "MCP_CONFIG_SECRET_PROMPT",
		{true, false}: "MCP_CONFIG_LABEL_PROMPT", {true, true}: "MCP_CONFIG_LABEL_SECRET_PROMPT",
	}[[2]bool{isPrompt(label), f.Secret()}]
	return t.sayKey(ctx, key, "field", label, "server", srv.Name)
}

// isPrompt: label reads as a sentence of its own (it ends as a question or an invitation to
// type: ":", "?", "." or their full-width forms), not as the name of a value.
func isPrompt(label string) bool {
	label = strings.TrimSpace(label)
	return strings.ContainsRune(label, ' ') && strings.ContainsAny(lastRune(label), ":?.：？。")
}

// lastRune is the last character of s ("" for an empty s).
func lastRune(s string) string {
	r, n := utf8.DecodeLastRuneInString(s)
	if n == 0 {
		return ""
	}
	return string(r)
}

// configValue takes the value of the current field: sealed into the draft; after the last
// field, the connection is tested and the credentials saved when it works.
func (t *turn) configValue(ctx context.Context, fs *mcpField, value string) error {
	srv := t.e.pack.Server(fs.Server)
	if srv == nil || srv.UserConfig == nil || fs.Field >= len(srv.UserConfig.Fields) {
		t.endDialog()
		return t.sayKey(ctx, "MCP_CONFIG_ABORTED")
	}
	values, err := t.loadDraft(ctx, fs)
	if err != nil {
		return err
	}
	values[srv.UserConfig.Fields[fs.Field].Name] = value
	if fs.Field+1 < len(srv.UserConfig.Fields) {
		if err := t.saveDraft(ctx, fs, values); err != nil {
			return err
		}
		fs.Field++
		t.setDialog(fs)
		return t.promptField(ctx, srv, fs.Field)
	}
	t.endDialog()
	// The test reaches the server with the user's secret: it is recorded first, so that an
	// event cut off during the test is never handled again (the user is told the check was
	// interrupted, and no later message is taken for a field's value).
	if err := t.journal.Begin(ctx, Step{Kind: StepCredentialTest, Server: srv.Name}); err != nil {
		return fmt.Errorf("record the credential test of %s: %w", srv.Name, err)
	}
	t.progress(ctx, "MCP_CONFIG_TESTING", "server", srv.Name) // now: the test may take a while
	typed := make(map[string]secret.Value, len(values))
	for k, v := range values {
		typed[k] = secret.NewValue(v)
	}
	tools, err := t.e.pool.Configure(ctx, t.s.Identity, srv.Name, typed)
	t.dropDraft(ctx, fs.Server) // saved as working credentials, or refused: the draft is done either way
	if err != nil {
		t.e.log.InfoContext(ctx, "MCP credentials refused", slog.String("connection", logid.Conn(t.conn)), slog.String("server", srv.Name),
			slog.String("reason", mcp.Classify(err)))
		return t.sayKey(ctx, configFailure(err), "server", srv.Name)
	}
	n := 0
	for _, tl := range tools {
		if t.e.rbac.Decide(t.caller(), srv.Name, tl.Name).Effect != rbac.Deny {
			n++
		}
	}
	return t.sayKey(ctx, "MCP_CONFIG_SUCCESS", "server", srv.Name, "count", strconv.Itoa(n))
}

// abortConfig leaves the configuration flow; nothing typed is kept.
func (t *turn) abortConfig(ctx context.Context) error {
	t.dropDraft(ctx, configServer(t.dialog()))
	t.endDialog()
	return t.sayKey(ctx, "MCP_CONFIG_ABORTED")
}

func (t *turn) draftKey(fs *mcpField) store.CredentialKey {
	return store.CredentialKey{Identity: t.s.Identity, Server: fs.Server, Kind: store.KindDraft}
}

// loadDraft opens the values typed so far (none for the first field).
func (t *turn) loadDraft(ctx context.Context, fs *mcpField) (map[string]string, error) {
	values := map[string]string{}
	if fs.Field == 0 || t.e.keyring == nil {
		return values, nil
	}
	k := t.draftKey(fs)
	row, err := t.e.st.GetCredential(ctx, k)
	if errors.Is(err, store.ErrNotFound) {
		return values, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load configuration draft: %w", err)
	}
	if err := t.e.keyring.OpenJSON(k, row.Secret, &values); err != nil {
		return nil, fmt.Errorf("open configuration draft: %w", err)
	}
	return values, nil
}

// saveDraft seals the values typed so far into the store.
func (t *turn) saveDraft(ctx context.Context, fs *mcpField, values map[string]string) error {
	if t.e.keyring == nil {
		return errors.New("save configuration draft: no encryption key")
	}
	k := t.draftKey(fs)
	sealed, err := t.e.keyring.SealJSON(k, values)
	if err != nil {
		return fmt.Errorf("seal configuration draft: %w", err)
	}
	if err := t.e.st.PutCredential(ctx, store.Credential{Identity: k.Identity, Server: k.Server, Kind: k.Kind, Secret: sealed}); err != nil {
		return fmt.Errorf("save configuration draft: %w", err)
	}
	return nil
}

// dropDraft deletes the user's configuration draft for server, if any ("": none).
func (t *turn) dropDraft(ctx context.Context, server string) {
	if server == "" || t.s.Identity == "" {
		return
	}
	if err := t.e.st.DeleteCredentials(ctx, t.s.Identity, server, store.KindDraft); err != nil {
		t.e.log.WarnContext(ctx, "delete configuration draft", slog.String("server", server), slog.Any("err", err))
	}
}

// configFailure is the message key for a credential test that failed with err: refused
// credentials are the user's to fix; a server that could not be reached, or answered nonsense,
// is not their token's fault.
func configFailure(err error) string {
	switch {
	case errors.Is(err, mcp.ErrUnreachable), errors.Is(err, mcp.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "MCP_CONFIG_UNREACHABLE"
	case errors.Is(err, mcp.ErrProtocol):
		return "MCP_CONFIG_CHECK_FAILED"
	}
	return "MCP_CONFIG_FAILURE"
}

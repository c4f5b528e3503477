package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

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
	t.dropDraft(ctx, t.flow())
	return t.askFlow(ctx, flowState{Kind: kindMCPConfig, Step: stepServer}, t.tr("MCP_CONFIG_CHOOSE_SERVER"), opts)
}

// askFlow asks a question whose answer continues flow fs, and enters MCP_CONFIG.
func (t *turn) askFlow(ctx context.Context, fs flowState, text string, opts []option) error {
	texts := make([]string, len(opts))
	for i, o := range opts {
		texts[i] = o.Text
	}
	id, err := t.ask(ctx, text, texts)
	if err != nil {
		return err
	}
	fs.Question, fs.QuestionByText, fs.Options = id, id == "", opts
	if id == "" {
		fs.Question = "text"
	}
	t.s.State = store.StateMCPConfig
	t.setFlow(fs)
	return nil
}

// answered handles the answer to a question the bot asked.
func (t *turn) answered(ctx context.Context, questionID, response string) error {
	fs := t.flow()
	if fs.Question == "" || (questionID != "" && questionID != fs.Question) {
		return t.sayKey(ctx, "UNEXPECTED_ANSWER")
	}
	for _, o := range fs.Options {
		if o.Text == strings.TrimSpace(response) {
			return t.choose(ctx, fs, o.Value)
		}
	}
	return t.sayKey(ctx, "CHOOSE_OPTION")
}

// answerByText matches a text to the options of a question sent as text (by number or text).
func (t *turn) answerByText(ctx context.Context, fs flowState, content string) (bool, error) {
	if n, err := strconv.Atoi(content); err == nil && n >= 1 && n <= len(fs.Options) {
		return true, t.choose(ctx, fs, fs.Options[n-1].Value)
	}
	for _, o := range fs.Options {
		if strings.EqualFold(o.Text, content) {
			return true, t.choose(ctx, fs, o.Value)
		}
	}
	return false, nil
}

// choose continues a flow with the value of the chosen option.
func (t *turn) choose(ctx context.Context, fs flowState, value string) error {
	fs.Question, fs.QuestionByText, fs.Options = "", false, nil
	switch fs.Kind {
	case kindApprovalConfirm, kindMyRequests, kindMyRequest, kindPending, kindPendingRequest:
		if t.e.appr == nil {
			return t.sayKey(ctx, "UNEXPECTED_ANSWER")
		}
		return t.chooseApproval(ctx, fs.Kind, fs, value)
	}
	switch {
	case fs.Kind == kindMCPConfig && fs.Step == stepServer:
		return t.serverChosen(ctx, value)
	case fs.Kind == kindMCPConfig && fs.Step == stepExisting:
		switch value {
		case choiceReconfigure:
			return t.startFields(ctx, fs.Server)
		case choiceDelete:
			t.endFlow()
			if err := t.e.pool.Forget(ctx, t.s.Identity, fs.Server); err != nil {
				return fmt.Errorf("delete credentials: %w", err)
			}
			return t.sayKey(ctx, "MCP_CONFIG_DELETED", "server", fs.Server)
		}
		return t.abortConfig(ctx)
	}
	return t.sayKey(ctx, "UNEXPECTED_ANSWER")
}

// serverChosen: OAuth servers get a sign-in link; configured servers offer reconfigure, delete
// or cancel; the others start with the first field.
func (t *turn) serverChosen(ctx context.Context, name string) error {
	srv := t.e.pack.Server(name)
	if srv == nil || !srv.UserControlled() {
		t.endFlow()
		return t.sayKey(ctx, "MCP_CONFIG_NO_SERVERS")
	}
	if srv.OAuth() {
		t.endFlow()
		u, err := t.e.oauth.Begin(ctx, t.s.Identity, srv.Name)
		if err != nil {
			t.e.log.WarnContext(ctx, "OAuth sign-in not started", slog.String("server", srv.Name), slog.Any("err", err))
			return t.sayKey(ctx, "MCP_CONFIG_OAUTH_FAILED", "server", srv.Name)
		}
		return t.sayKey(ctx, "MCP_CONFIG_OAUTH_LINK", "server", srv.Name, "url", u)
	}
	if st, err := t.e.pool.Status(ctx, t.s.Identity, srv.Name); err == nil && st != mcp.StatusNeedsAuthentication {
		return t.askFlow(ctx, flowState{Kind: kindMCPConfig, Step: stepExisting, Server: srv.Name},
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
		t.endFlow()
		return t.sayKey(ctx, "MCP_CONFIG_NO_SERVERS")
	}
	fs := flowState{Kind: kindMCPConfig, Step: stepField, Server: server}
	t.dropDraft(ctx, fs)
	t.s.State = store.StateMCPConfig
	t.setFlow(fs)
	return t.promptField(ctx, srv, 0)
}

func (t *turn) promptField(ctx context.Context, srv *packs.Server, i int) error {
	f := srv.UserConfig.Fields[i]
	label := f.Label.In(t.lang(), t.e.cat.Default())
	if label == "" {
		label = f.Name
	}
	key := "MCP_CONFIG_FIELD_PROMPT"
	if f.Secret() {
		key = "MCP_CONFIG_SECRET_PROMPT"
	}
	return t.sayKey(ctx, key, "field", label, "server", srv.Name)
}

// configValue takes the value of the current field: sealed into the draft; after the last
// field, the connection is tested and the credentials saved when it works.
func (t *turn) configValue(ctx context.Context, fs flowState, value string) error {
	srv := t.e.pack.Server(fs.Server)
	if srv == nil || srv.UserConfig == nil || fs.Field >= len(srv.UserConfig.Fields) {
		t.endFlow()
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
		t.setFlow(fs)
		return t.promptField(ctx, srv, fs.Field)
	}
	t.endFlow()
	// The test reaches the server with the user's secret: it is recorded first, so that an
	// event cut off during the test is never handled again (the user is told the check was
	// interrupted, and no later message is taken for a field's value).
	if err := t.journal.Begin(ctx, Step{Kind: StepCredentialTest, Server: srv.Name}); err != nil {
		return fmt.Errorf("record the credential test of %s: %w", srv.Name, err)
	}
	if err := t.sayKey(ctx, "MCP_CONFIG_TESTING", "server", srv.Name); err != nil {
		t.dropDraft(ctx, fs)
		return err
	}
	typed := make(map[string]secret.Value, len(values))
	for k, v := range values {
		typed[k] = secret.NewValue(v)
	}
	tools, err := t.e.pool.Configure(ctx, t.s.Identity, srv.Name, typed)
	t.dropDraft(ctx, fs) // saved as working credentials, or refused: the draft is done either way
	if err != nil {
		t.e.log.InfoContext(ctx, "MCP credentials refused", slog.String("connection", t.conn), slog.String("server", srv.Name),
			slog.String("reason", mcp.Classify(err)))
		return t.sayKey(ctx, "MCP_CONFIG_FAILURE", "server", srv.Name)
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
	t.dropDraft(ctx, t.flow())
	t.endFlow()
	return t.sayKey(ctx, "MCP_CONFIG_ABORTED")
}

func (t *turn) draftKey(fs flowState) store.CredentialKey {
	return store.CredentialKey{Identity: t.s.Identity, Server: fs.Server, Kind: store.KindDraft}
}

// loadDraft opens the values typed so far (none for the first field).
func (t *turn) loadDraft(ctx context.Context, fs flowState) (map[string]string, error) {
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
	plain, err := t.e.keyring.Open(k, row.Secret)
	if err != nil {
		return nil, fmt.Errorf("open configuration draft: %w", err)
	}
	if err := json.Unmarshal(plain, &values); err != nil {
		return nil, fmt.Errorf("read configuration draft: %w", err)
	}
	return values, nil
}

// saveDraft seals the values typed so far into the store.
func (t *turn) saveDraft(ctx context.Context, fs flowState, values map[string]string) error {
	if t.e.keyring == nil {
		return errors.New("save configuration draft: no encryption key")
	}
	plain, _ := json.Marshal(values) // a map of strings: cannot fail
	k := t.draftKey(fs)
	sealed, err := t.e.keyring.Seal(k, plain)
	if err != nil {
		return fmt.Errorf("seal configuration draft: %w", err)
	}
	if err := t.e.st.PutCredential(ctx, store.Credential{Identity: k.Identity, Server: k.Server, Kind: k.Kind, Secret: sealed}); err != nil {
		return fmt.Errorf("save configuration draft: %w", err)
	}
	return nil
}

// dropDraft deletes the draft of a configuration flow, if any.
func (t *turn) dropDraft(ctx context.Context, fs flowState) {
	if fs.Kind != kindMCPConfig || fs.Server == "" || t.s.Identity == "" {
		return
	}
	if err := t.e.st.DeleteCredentials(ctx, t.s.Identity, fs.Server, store.KindDraft); err != nil {
		t.e.log.WarnContext(ctx, "delete configuration draft", slog.String("server", fs.Server), slog.Any("err", err))
	}
}

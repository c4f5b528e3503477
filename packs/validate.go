package packs

import (
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Values a pack may use for enumerated fields.
var (
	Providers       = []string{"openai", "anthropic", "ollama"}
	Transports      = []string{TransportStreamableHTTP, TransportSSE, TransportStdio}
	AccessModes     = []string{AdminControlled, UserControlled}
	MenuActions     = []string{"authenticate", "logout", "mcp-config", "abort-config", "my-approval-requests", "pending-approvals", "prompts"}
	VisibleWhen     = []string{"always", "authenticated", "unauthenticated", "configuring", "notConfiguring", "hasApprovalRequests", "hasPendingApprovals", "hasPrompts"}
	Badges          = []string{"approvalRequestCount", "pendingApprovalCount"}
	CredentialForms = []string{"jsonld", "jwt"}
	FieldTypes      = []string{FieldText, FieldSecret}
	ReasoningEffort = []string{"minimal", "low", "medium", "high"}
)

var (
	languageCode = regexp.MustCompile(`^[a-z]{2,3}([-_][A-Za-z0-9]{2,8})?$`)
	serverName   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
)

// validator checks a decoded pack; every problem names the field path and where it was written.
type validator struct {
	p *Pack
	d *decoder
}

func (v *validator) errorf(path, format string, args ...any) {
	v.d.ps.add(Error, lookupPos(v.d, path), path, format, args...)
}

func (v *validator) warnf(path, format string, args ...any) {
	v.d.ps.add(Warning, lookupPos(v.d, path), path, format, args...)
}

func (v *validator) oneOf(path, value string, allowed []string, what string) bool {
	if slices.Contains(allowed, value) {
		return true
	}
	v.errorf(path, "unknown %s %q: use %s", what, value, strings.Join(allowed, ", "))
	return false
}

func validate(p *Pack, d *decoder) {
	v := &validator{p: p, d: d}
	v.metadata()
	v.llm()
	v.flows()
	names := make(map[string]int)
	for i := range p.MCP.Servers {
		path := indexPath("mcp.servers", i)
		s := &p.MCP.Servers[i]
		if j, dup := names[s.Name]; dup && s.Name != "" {
			v.errorf(joinPath(path, "name"), "duplicate server name %q (also mcp.servers[%d])", s.Name, j)
		}
		names[s.Name] = i
		v.server(path, s)
	}
}

func (v *validator) metadata() {
	m := &v.p.Metadata
	if !languageCode.MatchString(m.DefaultLanguage) {
		v.errorf("metadata.defaultLanguage", "%q is not a language code (en, es, pt-BR)", m.DefaultLanguage)
	}
	codes := make([]string, 0, len(v.p.Languages))
	for code := range v.p.Languages {
		codes = append(codes, code)
		if !languageCode.MatchString(code) {
			v.errorf(joinPath("languages", code), "%q is not a language code (en, es, pt-BR)", code)
		}
	}
	sort.Strings(codes)
	if len(codes) > 0 {
		if _, ok := v.p.Languages[m.DefaultLanguage]; !ok {
			v.warnf("metadata.defaultLanguage", "no languages.%s block: the default language uses built-in strings only (the pack has %s)",
				m.DefaultLanguage, strings.Join(codes, ", "))
		}
	}
}

func (v *validator) llm() {
	l := &v.p.LLM
	v.oneOf("llm.provider", l.Provider, Providers, "LLM provider")
	if l.Temperature < 0 || l.Temperature > 2 {
		v.errorf("llm.temperature", "must be between 0 and 2, not %g", l.Temperature)
	}
	if l.MaxTokens <= 0 {
		v.errorf("llm.maxTokens", "must be positive, not %d", l.MaxTokens)
	}
	if l.BaseURL != "" {
		v.httpURL("llm.baseUrl", l.BaseURL)
	}
	if l.ReasoningEffort != "" && !slices.Contains(ReasoningEffort, l.ReasoningEffort) {
		v.warnf("llm.reasoningEffort", "%q is not one of %s: passed to the provider as written", l.ReasoningEffort, strings.Join(ReasoningEffort, ", "))
	}
	if v.p.Memory.Window < 0 {
		v.errorf("memory.window", "must be 0 (no memory) or more, not %d", v.p.Memory.Window)
	}
}

func (v *validator) flows() {
	f := &v.p.Flows
	if f.Welcome.TemplateKey == "" {
		v.errorf("flows.welcome.templateKey", "must not be empty (default %s)", DefaultTemplateKey)
	}
	a := &f.Authentication
	const ap = "flows.authentication"
	if a.Required && !a.Enabled {
		v.errorf(ap+".required", "authentication is required but not enabled: set enabled: true or required: false")
	}
	if a.Enabled && a.UserIdentityAttribute == "" {
		v.errorf(ap+".userIdentityAttribute", "must name the credential attribute that identifies a user")
	}
	if a.Enabled && a.CredentialDefinitionID == "" && a.Credential == nil {
		v.warnf(ap, "no credential to ask for (credentialDefinitionId or credential): the authenticate menu item is hidden")
	}
	for i, u := range a.AdminUsers {
		if strings.TrimSpace(u) == "" {
			v.errorf(indexPath(ap+".adminUsers", i), "must not be empty")
		}
	}
	if c := a.Credential; c != nil {
		if c.Type == "" {
			v.errorf(ap+".credential.type", "must name the W3C credential type to request (e.g. EmployeeCredential)")
		}
		if len(c.Issuers) == 0 {
			v.warnf(ap+".credential.issuers", "no trusted issuers: every presented credential will be refused; list the issuer DIDs")
		}
		for i, iss := range c.Issuers {
			if !strings.HasPrefix(iss, "did:") {
				v.errorf(indexPath(ap+".credential.issuers", i), "%q is not a DID (did:key:…, did:web:…)", iss)
			}
		}
		if len(c.Formats) == 0 {
			v.errorf(ap+".credential.formats", "must list at least one of %s", strings.Join(CredentialForms, ", "))
		}
		for i, fm := range c.Formats {
			v.oneOf(indexPath(ap+".credential.formats", i), fm, CredentialForms, "credential format")
		}
	}
	ids := make(map[string]int)
	for i := range f.Menu.Items {
		it := &f.Menu.Items[i]
		path := indexPath("flows.menu.items", i)
		if it.ID == "" {
			v.errorf(joinPath(path, "id"), "a menu item needs an id")
		} else if j, dup := ids[it.ID]; dup {
			v.errorf(joinPath(path, "id"), "duplicate menu item id %q (also flows.menu.items[%d])", it.ID, j)
		}
		ids[it.ID] = i
		if it.Action != "" {
			v.oneOf(joinPath(path, "action"), it.Action, MenuActions, "menu action")
		}
		if it.VisibleWhen != "" {
			v.oneOf(joinPath(path, "visibleWhen"), it.VisibleWhen, VisibleWhen, "visibleWhen value")
		}
		if it.Badge != "" {
			v.oneOf(joinPath(path, "badge"), it.Badge, Badges, "badge")
		}
	}
}

func (v *validator) httpURL(path, raw string) {
	if _, unresolved := v.d.unresolved[path]; unresolved {
		return // already reported
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.errorf(path, "%q is not an http(s) URL", redactURL(raw))
	}
}

// redactURL drops the user information of a URL before it is shown.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		u.User = url.User("REDACTED")
		return u.String()
	}
	return raw
}

func (v *validator) server(path string, s *Server) {
	if s.Name == "" {
		v.errorf(joinPath(path, "name"), "a server needs a name (used by RBAC and in logs)")
	} else if !serverName.MatchString(s.Name) {
		v.errorf(joinPath(path, "name"), "%q: use letters, digits, '.', '_' and '-' only", s.Name)
	}
	switch s.Transport {
	case "":
		v.errorf(joinPath(path, "transport"), "missing: use streamable-http or sse with a url, or stdio with a command")
	case TransportStreamableHTTP, TransportSSE:
		if s.URL == "" {
			v.errorf(joinPath(path, "url"), "a %s server needs a url", s.Transport)
		} else {
			v.httpURL(joinPath(path, "url"), s.URL)
		}
	case TransportStdio:
		if s.Command == "" {
			v.errorf(joinPath(path, "command"), "a stdio server needs a command")
		}
		if len(s.Headers) > 0 {
			v.warnf(joinPath(path, "headers"), "ignored: a stdio server has no HTTP requests")
		}
	default:
		v.oneOf(joinPath(path, "transport"), s.Transport, Transports, "transport")
	}
	if v.oneOf(joinPath(path, "accessMode"), s.AccessMode, AccessModes, "access mode") {
		v.access(path, s)
	}
	if s.TimeoutMs <= 0 {
		v.errorf(joinPath(path, "timeoutMs"), "must be positive, not %d", s.TimeoutMs)
	}
	if s.MaxSessionIdleSeconds <= 0 {
		v.errorf(joinPath(path, "maxSessionIdleSeconds"), "must be positive, not %d", s.MaxSessionIdleSeconds)
	}
	for i, t := range s.Allowlist {
		if strings.TrimSpace(t) == "" {
			v.errorf(indexPath(joinPath(path, "allowlist"), i), "must not be empty")
		}
	}
	if s.ToolAccess != nil {
		v.toolAccess(joinPath(path, "toolAccess"), s)
	}
	if s.PromptAccess != nil {
		v.promptAccess(joinPath(path, "promptAccess"), s.PromptAccess)
	}
	if s.ResourceAccess != nil {
		v.resourceAccess(joinPath(path, "resourceAccess"), s)
	}
	if s.Sampling != nil && (s.Sampling.MaxTokens < 0 || s.Sampling.MaxTokens > 100_000) {
		v.errorf(joinPath(path, "sampling.maxTokens"), "must be between 1 and 100000 (0 or absent: %d), not %d", DefaultSamplingMaxTokens, s.Sampling.MaxTokens)
	}
}

// access checks what depends on the access mode: per-user configuration and OAuth.
func (v *validator) access(path string, s *Server) {
	if a := s.Authentication; a != nil {
		ap := joinPath(path, "authentication")
		switch a.Mode {
		case AuthOAuth2:
			if !s.UserControlled() {
				v.errorf(ap, "OAuth applies to user-controlled servers (each user signs in); set accessMode: user-controlled, "+
					"or mode: client_credentials for packbot to sign in as itself")
			}
			v.machineOnly(ap, a)
		case AuthClientCredentials:
			v.clientCredentials(path, s)
		case AuthWorkloadIdentity:
			v.workloadIdentity(path, s)
		default:
			v.errorf(joinPath(ap, "mode"), "unknown authentication mode %q: use oauth2 (each user signs in), client_credentials or workload_identity (packbot signs in as itself)", a.Mode)
		}
		if a.ClientMetadataURL != "" {
			if a.Mode != AuthOAuth2 {
				v.warnf(joinPath(ap, "clientMetadataUrl"), "ignored with mode %s: it applies to mode oauth2", a.Mode)
			} else {
				v.httpURL(joinPath(ap, "clientMetadataUrl"), a.ClientMetadataURL)
			}
		}
		if a.Issuer != "" {
			v.httpURL(joinPath(ap, "issuer"), a.Issuer)
		}
	}
	if !s.UserControlled() {
		if s.UserConfig != nil {
			v.warnf(joinPath(path, "userConfig"), "ignored on an admin-controlled server")
		}
		return
	}
	oauth := s.Authentication != nil
	if (s.UserConfig == nil || len(s.UserConfig.Fields) == 0) && !oauth {
		v.errorf(joinPath(path, "userConfig.fields"), "a user-controlled server needs userConfig.fields (or authentication.mode: oauth2) so users can give their credentials")
		return
	}
	if s.UserConfig == nil {
		return
	}
	names := make(map[string]bool)
	for i := range s.UserConfig.Fields {
		f := &s.UserConfig.Fields[i]
		fp := indexPath(joinPath(path, "userConfig.fields"), i)
		switch {
		case f.Name == "":
			v.errorf(joinPath(fp, "name"), "a field needs a name")
		case names[f.Name]:
			v.errorf(joinPath(fp, "name"), "duplicate field name %q", f.Name)
		}
		names[f.Name] = true
		v.oneOf(joinPath(fp, "type"), f.Type, FieldTypes, "field type")
		if f.Label.IsZero() {
			v.warnf(joinPath(fp, "label"), "no label: users are asked for %q", f.Name)
		}
		if f.HeaderTemplate != "" && !strings.Contains(f.HeaderTemplate, "{value}") {
			v.errorf(joinPath(fp, "headerTemplate"), "%q must contain {value}, where the user's value goes", f.HeaderTemplate)
		}
	}
}

func (v *validator) toolAccess(path string, s *Server) {
	ta := s.ToolAccess
	if ta.RBAC() {
		if ta.Default != "" && ta.Default != DefaultNone && ta.Default != DefaultAll {
			v.warnf(joinPath(path, "default"), "%q is not none or all: tools listed under no role are denied", ta.Default)
		}
		if len(ta.Public) > 0 || len(ta.AdminOnly) > 0 {
			v.warnf(path, "public and adminOnly belong to the legacy model and are ignored when roles is set")
		}
		for _, role := range ta.RoleNames() {
			for i, t := range ta.Roles[role] {
				tp := indexPath(joinPath(joinPath(path, "roles"), role), i)
				if strings.TrimSpace(t) == "" {
					v.errorf(tp, "must not be empty")
				} else if !s.Allowed(t) {
					v.warnf(tp, "%q is not in the server's allowlist: it is never offered", t)
				}
			}
		}
	} else {
		if ta.Default != "" && ta.Default != DefaultPublic && ta.Default != DefaultAdmin {
			v.warnf(joinPath(path, "default"), "%q is not public or admin: treated as admin (only the public list for non-admins)", ta.Default)
		}
		if len(ta.Approval) > 0 && !s.UserControlled() {
			v.warnf(joinPath(path, "approval"), "approval policies apply with toolAccess.roles only: ignored in the legacy model")
		}
	}
	if len(ta.Approval) > 0 && s.UserControlled() {
		v.errorf(joinPath(path, "approval"), "approval policies need an admin-controlled server: on a user-controlled server "+
			"the approved call would run with the approver's own credentials, not the requester's")
	}
	seen := make(map[string]int)
	for i := range ta.Approval {
		a := &ta.Approval[i]
		ap := indexPath(joinPath(path, "approval"), i)
		if len(a.Tools) == 0 {
			v.errorf(joinPath(ap, "tools"), "an approval policy must list the tools it gates")
		}
		if len(a.Approvers) == 0 {
			v.errorf(joinPath(ap, "approvers"), "an approval policy must list the roles that may approve")
		}
		if a.TimeoutMinutes <= 0 {
			v.errorf(joinPath(ap, "timeoutMinutes"), "must be positive, not %g", a.TimeoutMinutes)
		}
		if a.Quorum < 1 {
			v.errorf(joinPath(ap, "quorum"), "must be 1 or more, not %d", a.Quorum)
		}
		v.proof(ap, a)
		for j, t := range a.Tools {
			tp := indexPath(joinPath(ap, "tools"), j)
			if prev, dup := seen[t]; dup {
				v.warnf(tp, "%q is already gated by approval[%d], which applies", t, prev)
				continue
			}
			seen[t] = i
			if ta.RBAC() && ta.Default != DefaultAll && !grantedByRole(ta, t) {
				v.warnf(tp, "no role grants %q, so the policy never applies", t)
			}
		}
	}
}

func grantedByRole(ta *ToolAccess, tool string) bool {
	for _, tools := range ta.Roles {
		if slices.Contains(tools, tool) {
			return true
		}
	}
	return false
}

// clientCredentials checks a server on which packbot signs in as itself (client-credentials
// grant): an admin-controlled HTTP server, a client id, and the secret or key its token
// endpoint authentication method needs.
func (v *validator) clientCredentials(path string, s *Server) {
	a, ap := s.Authentication, joinPath(path, "authentication")
	if s.UserControlled() {
		v.errorf(joinPath(ap, "mode"), "client_credentials is packbot's own sign-in, for the shared session of an admin-controlled server; "+
			"set accessMode: admin-controlled, or mode: oauth2 so that each user signs in")
	}
	if s.Transport == TransportStdio {
		v.errorf(joinPath(ap, "mode"), "client_credentials needs an HTTP transport (streamable-http or sse); give a stdio server its credentials in env")
	}
	if strings.TrimSpace(a.ClientID) == "" {
		v.errorf(joinPath(ap, "clientId"), "client_credentials needs the clientId that the authorization server registered for packbot")
	}
	for name := range s.Headers {
		if strings.EqualFold(name, DefaultHeaderName) {
			v.warnf(joinPath(joinPath(path, "headers"), name), "replaced by the client_credentials access token: remove it")
		}
	}
	mp := joinPath(ap, "tokenEndpointAuthMethod")
	if !v.oneOf(mp, a.TokenEndpointAuthMethod, []string{ClientSecretBasic, ClientSecretPost, PrivateKeyJWT}, "token endpoint auth method") {
		return
	}
	if a.TokenEndpointAuthMethod != PrivateKeyJWT {
		if a.ClientSecret == "" {
			v.errorf(joinPath(ap, "clientSecret"), "%s needs clientSecret: write clientSecret: ${NAME} and keep the secret in the environment, "+
				"or use privateKeyFile with private_key_jwt", a.TokenEndpointAuthMethod)
		}
		if a.PrivateKeyFile != "" || a.KeyID != "" {
			v.warnf(mp, "privateKeyFile and keyId are ignored with %s: set tokenEndpointAuthMethod: private_key_jwt to sign with the key", a.TokenEndpointAuthMethod)
		}
		return
	}
	if a.ClientSecret != "" {
		v.warnf(joinPath(ap, "clientSecret"), "ignored with private_key_jwt, which signs with privateKeyFile: remove it")
	}
	if a.AssertionAudience != "" {
		v.oneOf(joinPath(ap, "assertionAudience"), a.AssertionAudience, []string{AudienceIssuer, AudienceTokenEndpoint}, "assertion audience")
	}
	kp := joinPath(ap, "privateKeyFile")
	if a.PrivateKeyFile == "" {
		v.errorf(kp, "private_key_jwt needs privateKeyFile: the PEM file of the private key packbot signs its assertions with (EC P-256 for ES256, RSA for RS256)")
		return
	}
	if _, unresolved := v.d.unresolved[kp]; !unresolved {
		if problem := checkKeyFile(a.PrivateKeyFile); problem != "" {
			v.errorf(kp, "%s", problem)
		}
	}
}

// workloadIdentity checks a server on which packbot signs in with its workload's JWT: an
// admin-controlled HTTP server and the file the platform writes the JWT to.
func (v *validator) workloadIdentity(path string, s *Server) {
	a, ap := s.Authentication, joinPath(path, "authentication")
	if s.UserControlled() || s.Transport == TransportStdio {
		v.errorf(joinPath(ap, "mode"), "workload_identity is packbot's own sign-in, for the shared session of an admin-controlled HTTP server")
	}
	if a.ClientSecret != "" || a.PrivateKeyFile != "" {
		v.warnf(ap, "clientSecret and privateKeyFile are ignored with workload_identity, which presents the workload's JWT (assertionFile)")
	}
	if strings.TrimSpace(a.AssertionFile) == "" {
		v.errorf(joinPath(ap, "assertionFile"), "workload_identity needs assertionFile: the file the platform writes the workload's JWT to (e.g. a projected service account token)")
	}
}

// machineOnly warns about client_credentials fields on a server where users sign in.
func (v *validator) machineOnly(ap string, a *ServerAuth) {
	for field, set := range map[string]bool{"tokenEndpointAuthMethod": a.TokenEndpointAuthMethod != "",
		"privateKeyFile": a.PrivateKeyFile != "", "keyId": a.KeyID != "", "assertionAudience": a.AssertionAudience != "",
		"assertionFile": a.AssertionFile != ""} {
		if set {
			v.warnf(joinPath(ap, field), "ignored with mode oauth2: it applies to mode client_credentials")
		}
	}
}

// maxKeyFile bounds what is read of a private key file.
const maxKeyFile = 64 << 10

// checkKeyFile returns what is wrong with a private key file, or "": it must be a readable
// regular file holding a PEM private key. The key itself is parsed by package mcp/oauth.
func checkKeyFile(path string) string {
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Sprintf("%v: give the path of the PEM private key (relative to the pack's folder)", err)
	case !info.Mode().IsRegular():
		return fmt.Sprintf("%s is not a regular file: give the path of the PEM private key", path)
	case info.Size() > maxKeyFile:
		return fmt.Sprintf("%s is %d bytes, too large for a PEM private key", path, info.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("%v: make the file readable by packbot", err)
	}
	defer clear(data)
	for rest := data; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return fmt.Sprintf("%s holds no PEM private key (want a -----BEGIN PRIVATE KEY----- block: PKCS#8, or SEC1 EC / PKCS#1 RSA)", path)
		}
		if strings.HasSuffix(block.Type, "PRIVATE KEY") {
			clear(block.Bytes)
			return ""
		}
	}
}

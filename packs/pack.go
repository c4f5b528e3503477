package packs

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Pack is a loaded, validated agent pack: everything a deployer says about one agent. Field
// names follow the Hologram agent-pack.yaml schema; the yaml tags are the keys in the file.
// A Pack is immutable once [Load] returns it.
type Pack struct {
	Metadata  Metadata            `yaml:"metadata"`
	Languages map[string]Language `yaml:"languages"`
	LLM       LLM                 `yaml:"llm"`
	Memory    Memory              `yaml:"memory"`
	Flows     Flows               `yaml:"flows"`
	MCP       MCP                 `yaml:"mcp"`

	// Unsupported holds top-level blocks that packbot keeps but does not act on (rag, tools,
	// imageGeneration, speechToText, vision, integrations, and any unknown key), decoded as
	// plain YAML values. Each produced a warning.
	Unsupported map[string]any `yaml:"-"`
	// Source is where the pack came from: a file path, or "embedded:<path>".
	Source string `yaml:"-"`
	// Warnings are the problems that did not stop the pack from loading.
	Warnings []Problem `yaml:"-"`
}

// Metadata describes the agent.
type Metadata struct {
	ID              string   `yaml:"id"`
	DisplayName     string   `yaml:"displayName"`
	Description     string   `yaml:"description"`
	Tags            []string `yaml:"tags"`
	DefaultLanguage string   `yaml:"defaultLanguage"`
}

// Language holds the texts of one language.
type Language struct {
	// GreetingMessage is sent by the welcome flow; welcomeMessage is accepted as an alias.
	GreetingMessage string `yaml:"greetingMessage" alias:"welcomeMessage"`
	// SystemPrompt is the persona in this language, appended to LLM.AgentPrompt.
	SystemPrompt string `yaml:"systemPrompt"`
	// Strings override built-in strings key by key.
	Strings map[string]string `yaml:"strings"`
}

// LLM configures the language model.
type LLM struct {
	Provider        string  `yaml:"provider"`
	Model           string  `yaml:"model"`
	Temperature     float64 `yaml:"temperature"`
	MaxTokens       int     `yaml:"maxTokens"`
	BaseURL         string  `yaml:"baseUrl" pack:"url"`
	ReasoningEffort string  `yaml:"reasoningEffort"`
	AgentPrompt     string  `yaml:"agentPrompt"`
}

// Memory configures conversation memory.
type Memory struct {
	// Window is how many turns the agent remembers.
	Window int `yaml:"window"`
}

// Flows configures the built-in conversations.
type Flows struct {
	Welcome        Welcome        `yaml:"welcome"`
	Authentication Authentication `yaml:"authentication"`
	Menu           Menu           `yaml:"menu"`
}

// Welcome configures the greeting.
type Welcome struct {
	Enabled bool `yaml:"enabled"`
	// SendOnProfile greets when the wallet's profile arrives (in its language) instead of on
	// connection (in the default language).
	SendOnProfile bool   `yaml:"sendOnProfile"`
	TemplateKey   string `yaml:"templateKey"`
}

// Authentication configures how users prove who they are and which roles they hold.
type Authentication struct {
	Enabled  bool `yaml:"enabled"`
	Required bool `yaml:"required"`
	// CredentialDefinitionID is the AnonCreds credential definition the vsagent channel asks for.
	CredentialDefinitionID string `yaml:"credentialDefinitionId"`
	// IssuerServiceDID is where a user without a suitable credential can get one.
	IssuerServiceDID      string   `yaml:"issuerServiceDid"`
	UserIdentityAttribute string   `yaml:"userIdentityAttribute"`
	RolesAttribute        string   `yaml:"rolesAttribute"`
	DefaultRole           string   `yaml:"defaultRole"`
	AdminUsers            []string `yaml:"adminUsers"`
	// AdminAvatars is the legacy admin list, matched on display name.
	AdminAvatars []string `yaml:"adminAvatars"`
	// Credential is what the embedded DIDComm channel asks for (packbot extension).
	Credential *CredentialRequest `yaml:"credential"`
}

// CredentialRequest describes the W3C credential the embedded DIDComm channel requests.
type CredentialRequest struct {
	Type    string   `yaml:"type"`
	Issuers []string `yaml:"issuers"`
	Formats []string `yaml:"formats"`
	Purpose string   `yaml:"purpose"`
}

// Menu configures the contextual menu.
type Menu struct {
	Items []MenuItem `yaml:"items"`
}

// MenuItem is one entry of the contextual menu.
type MenuItem struct {
	ID          string `yaml:"id"`
	LabelKey    string `yaml:"labelKey"`
	Label       Text   `yaml:"label"`
	Action      string `yaml:"action"`
	VisibleWhen string `yaml:"visibleWhen"`
	Badge       string `yaml:"badge"`
}

// MCP lists the MCP servers.
type MCP struct {
	Servers []Server `yaml:"servers"`
}

// Transports.
const (
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
	TransportStdio          = "stdio"
)

// Access modes.
const (
	AdminControlled = "admin-controlled"
	UserControlled  = "user-controlled"
)

// Server is one MCP server the agent uses.
type Server struct {
	Name      string `yaml:"name"`
	Transport string `yaml:"transport"`
	URL       string `yaml:"url" pack:"url"`
	Command   string `yaml:"command" pack:"strict"`
	// Args is an array, or a string holding a JSON array.
	Args StringList        `yaml:"args" pack:"strict"`
	Env  map[string]string `yaml:"env" pack:"secret"`
	// Headers are sent on every request of every HTTP transport.
	Headers    map[string]string `yaml:"headers" pack:"secret"`
	AccessMode string            `yaml:"accessMode"`
	UserConfig *UserConfig       `yaml:"userConfig"`
	ToolAccess *ToolAccess       `yaml:"toolAccess"`
	// PromptAccess and ResourceAccess (packbot extensions, context.go) say who may use the
	// server's prompts and read its resources (skills included).
	PromptAccess   *PromptAccess   `yaml:"promptAccess"`
	ResourceAccess *ResourceAccess `yaml:"resourceAccess"`

	// packbot extensions
	Enabled               bool        `yaml:"enabled"`
	TimeoutMs             int         `yaml:"timeoutMs"`
	MaxSessionIdleSeconds int         `yaml:"maxSessionIdleSeconds"`
	Allowlist             []string    `yaml:"allowlist"`
	Instructions          string      `yaml:"instructions"`
	Authentication        *ServerAuth `yaml:"authentication"`
	// Sampling lets the server have the pack's LLM answer prompts during calls (MCP sampling);
	// off unless enabled.
	Sampling *Sampling `yaml:"sampling"`
}

// DefaultSamplingMaxTokens bounds a sampling answer when the pack gives no maxTokens.
const DefaultSamplingMaxTokens = 1000

// Sampling is a server's permission to use the pack's LLM (without tools).
type Sampling struct {
	Enabled bool `yaml:"enabled"`
	// MaxTokens bounds each answer (the server's own, smaller, request wins).
	MaxTokens int `yaml:"maxTokens"`
}

// SamplingAllowed reports whether the server may sample, and the token limit.
func (s *Server) SamplingAllowed() (int, bool) {
	if s.Sampling == nil || !s.Sampling.Enabled {
		return 0, false
	}
	if s.Sampling.MaxTokens <= 0 {
		return DefaultSamplingMaxTokens, true
	}
	return s.Sampling.MaxTokens, true
}

// UserControlled reports whether each user brings their own credentials to this server.
func (s *Server) UserControlled() bool { return s.AccessMode == UserControlled }

// OAuth reports whether users sign in to this server with OAuth 2.1.
func (s *Server) OAuth() bool { return s.Authentication != nil && s.Authentication.Mode == AuthOAuth2 }

// ClientCredentials reports whether packbot itself gets OAuth 2.1 tokens for this
// (admin-controlled) server with the client-credentials grant.
func (s *Server) ClientCredentials() bool {
	return s.Authentication != nil && s.Authentication.Mode == AuthClientCredentials
}

// MachineAuth reports whether packbot signs in to this (admin-controlled) server as itself:
// the client-credentials grant, or its workload's identity (mode workload_identity).
func (s *Server) MachineAuth() bool {
	return s.ClientCredentials() || (s.Authentication != nil && s.Authentication.Mode == AuthWorkloadIdentity)
}

// Allowed reports whether the server's allowlist (if any) admits tool.
func (s *Server) Allowed(tool string) bool {
	return len(s.Allowlist) == 0 || slices.Contains(s.Allowlist, tool)
}

// UserConfig is the shape of the per-user configuration flow.
type UserConfig struct {
	Fields []UserField `yaml:"fields"`
}

// Field types.
const (
	FieldText   = "text"
	FieldSecret = "secret"
)

// UserField is one value a user types to configure a user-controlled server.
type UserField struct {
	Name  string `yaml:"name"`
	Type  string `yaml:"type"`
	Label Text   `yaml:"label"`
	// HeaderTemplate turns the value into a header ("Bearer {value}").
	HeaderTemplate string `yaml:"headerTemplate"`
	// HeaderName is the header the template fills (default Authorization).
	HeaderName string `yaml:"headerName"`
}

// Secret reports whether the field's value must never be logged, remembered or echoed.
func (f *UserField) Secret() bool { return f.Type == FieldSecret }

// Tool access defaults.
const (
	DefaultNone   = "none"
	DefaultAll    = "all"
	DefaultPublic = "public"
	DefaultAdmin  = "admin"
)

// ToolAccess says who may call which tools of a server. With Roles present it is the RBAC
// model; without, the legacy model (Default public|admin, Public, AdminOnly).
type ToolAccess struct {
	Default   string   `yaml:"default"`
	Public    []string `yaml:"public"`
	AdminOnly []string `yaml:"adminOnly"`
	// Roles maps a role to the tools it grants. Non-nil (even empty) selects the RBAC model.
	Roles    map[string][]string `yaml:"roles"`
	Approval []ApprovalPolicy    `yaml:"approval"`
}

// RBAC reports whether the role-based model applies.
func (t *ToolAccess) RBAC() bool { return t.Roles != nil }

// RoleNames returns the roles of the RBAC model, sorted.
func (t *ToolAccess) RoleNames() []string {
	names := make([]string, 0, len(t.Roles))
	for r := range t.Roles {
		names = append(names, r)
	}
	sort.Strings(names)
	return names
}

// PolicyFor returns the first approval policy listing tool, or nil.
func (t *ToolAccess) PolicyFor(tool string) *ApprovalPolicy {
	for i := range t.Approval {
		if slices.Contains(t.Approval[i].Tools, tool) {
			return &t.Approval[i]
		}
	}
	return nil
}

// ApprovalPolicy gates tools behind approval by holders of approver roles.
type ApprovalPolicy struct {
	Tools     []string `yaml:"tools"`
	Approvers []string `yaml:"approvers"`
	// TimeoutMinutes after which a pending request expires; fractions are allowed.
	TimeoutMinutes float64 `yaml:"timeoutMinutes"`
	// Quorum is how many distinct approvers must approve (packbot extension).
	Quorum int `yaml:"quorum"`
	// AllowSelfApproval lets a requester who holds an approver role run the tool at once.
	AllowSelfApproval bool `yaml:"allowSelfApproval"`

	// The fields below are packbot extensions (docs/approvals-accountability.md). Their JSON
	// names are omitted when unset, so that the fingerprint of a request under a policy without
	// them (approvals.Fingerprint) stays what it was.

	// Proof is ProofFresh when approvers prove themselves at the moment they approve: a new
	// presentation of the credential they log in with, whose identity is theirs and whose roles
	// still hold an approver role. "" (the default): their login is enough.
	Proof string `yaml:"proof" json:",omitempty"`
	// ProofMaxAge is how long after Approve the presentation may arrive, as a duration ("5m",
	// "90s"; default DefaultProofMaxAge). Only with Proof.
	ProofMaxAge string `yaml:"proofMaxAge" json:",omitempty"`
	// Receipt, when false, gives the requester no receipt of an approved execution (default:
	// a receipt, a credential signed by the bot).
	Receipt *bool `yaml:"receipt" json:",omitempty"`
}

// ProofFresh is the [ApprovalPolicy.Proof] that makes approvers prove themselves when they
// approve.
const ProofFresh = "fresh"

// DefaultProofMaxAge is how long a fresh proof may take when a policy does not say.
const DefaultProofMaxAge = 5 * time.Minute

// FreshProof reports whether approvers of p must prove themselves when they approve, and how
// long the presentation may take. A pack that loaded has a valid ProofMaxAge.
func (p *ApprovalPolicy) FreshProof() (maxAge time.Duration, ok bool) {
	if p == nil || p.Proof != ProofFresh {
		return 0, false
	}
	d, err := time.ParseDuration(p.ProofMaxAge)
	if err != nil || d <= 0 {
		d = DefaultProofMaxAge
	}
	return d, true
}

// Receipts reports whether an approved execution under p gives the requester a receipt.
func (p *ApprovalPolicy) Receipts() bool { return p != nil && (p.Receipt == nil || *p.Receipt) }

// Authentication modes of a server (packbot extension).
const (
	// AuthOAuth2: each user signs in with OAuth 2.1 (user-controlled servers).
	AuthOAuth2 = "oauth2"
	// AuthClientCredentials: packbot signs in as itself with the OAuth 2.1 client-credentials
	// grant, for the shared session of an admin-controlled server.
	AuthClientCredentials = "client_credentials"
	// AuthWorkloadIdentity: packbot signs in as itself with the JWT its platform issues to the
	// workload (Kubernetes service account, cloud workload identity), exchanged for an access
	// token with the RFC 7523 jwt-bearer grant (MCP workload identity federation, SEP-1933).
	AuthWorkloadIdentity = "workload_identity"
)

// Audiences of a private_key_jwt client assertion (ServerAuth.AssertionAudience).
const (
	// AudienceIssuer: the authorization server's issuer identifier, as RFC 7523bis requires
	// (the default).
	AudienceIssuer = "issuer"
	// AudienceTokenEndpoint: the token endpoint's URL, for authorization servers that say they
	// still want the audience RFC 7523 first allowed.
	AudienceTokenEndpoint = "token_endpoint"
)

// How packbot authenticates at the token endpoint in client_credentials mode (RFC 7591 §2
// names; private_key_jwt is RFC 7523's JWT assertion).
const (
	ClientSecretBasic = "client_secret_basic"
	ClientSecretPost  = "client_secret_post"
	PrivateKeyJWT     = "private_key_jwt"
)

// ServerAuth configures OAuth 2.1 for a server (packbot extension): users' sign-in on a
// user-controlled server (mode oauth2), or packbot's own client-credentials grant on an
// admin-controlled one (mode client_credentials).
type ServerAuth struct {
	Mode         string   `yaml:"mode"`
	ClientID     string   `yaml:"clientId"`
	ClientSecret string   `yaml:"clientSecret" pack:"secret"`
	Scopes       []string `yaml:"scopes"`
	// Issuer, optional, is the authorization server the pack trusts for this server: its
	// metadata must list it, and the server's 401 may then point at protected-resource
	// metadata on the issuer's origin as well as on the server's own. In client_credentials
	// mode it is also where the token endpoint is looked up when the server publishes no
	// protected-resource metadata.
	Issuer string `yaml:"issuer" pack:"url"`

	// TokenEndpointAuthMethod (client_credentials only) is how packbot authenticates at the
	// token endpoint: client_secret_basic, client_secret_post or private_key_jwt. Default:
	// private_key_jwt when PrivateKeyFile is set, else client_secret_basic.
	TokenEndpointAuthMethod string `yaml:"tokenEndpointAuthMethod"`
	// PrivateKeyFile (private_key_jwt only) is the PEM file of the private key that signs the
	// client assertions: an EC P-256 key signs ES256, an RSA key (2048 bits or more) RS256. A
	// relative path is relative to the folder of the file it is written in (the working
	// directory for MCP_SERVERS_CONFIG and the embedded pack); [Load] makes it so.
	PrivateKeyFile string `yaml:"privateKeyFile" pack:"strict"`
	// KeyID (private_key_jwt only, optional) is the kid put in the assertions' header, for
	// authorization servers that hold several keys of the client.
	KeyID string `yaml:"keyId"`
	// AssertionAudience (private_key_jwt only) is the aud of the client assertions: issuer (the
	// default, RFC 7523bis) or token_endpoint, for an authorization server that says it wants
	// its token endpoint's URL there.
	AssertionAudience string `yaml:"assertionAudience"`
	// AssertionFile (workload_identity only) is the file holding the JWT the platform issues to
	// packbot's workload, read again for every token request (platforms rotate it). A relative
	// path is relative to the pack file, as PrivateKeyFile.
	AssertionFile string `yaml:"assertionFile" pack:"strict"`
	// ClientMetadataURL (oauth2, optional) is the URL of a Client ID Metadata Document that
	// describes packbot's client at this server's authorization server: used as client_id,
	// instead of dynamic registration, where the authorization server supports such documents.
	// Its redirect_uris must include packbot's callback (for mcp smoke:
	// http://127.0.0.1/callback, any port).
	ClientMetadataURL string `yaml:"clientMetadataUrl" pack:"url"`
}

// Text is a string that may be given per language: either a plain string, or a map from
// language code to string.
type Text struct {
	Plain  string
	ByLang map[string]string
}

// IsZero reports whether no text was given.
func (t Text) IsZero() bool { return t.Plain == "" && len(t.ByLang) == 0 }

// In returns the text for lang, else for fallback, else the plain text, else any language's
// text (the alphabetically first), else "".
func (t Text) In(lang, fallback string) string {
	for _, l := range []string{lang, baseLanguage(lang), fallback} {
		if s, ok := t.ByLang[l]; ok && l != "" {
			return s
		}
	}
	if t.Plain != "" {
		return t.Plain
	}
	keys := make([]string, 0, len(t.ByLang))
	for k := range t.ByLang {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		return t.ByLang[keys[0]]
	}
	return ""
}

func baseLanguage(lang string) string {
	if i := strings.IndexAny(lang, "-_"); i > 0 {
		return lang[:i]
	}
	return lang
}

// StringList is a list of strings that a pack may write as a YAML sequence or as a string
// holding a JSON array (Hologram's `args`).
type StringList []string

// Server returns the server named name, or nil.
func (p *Pack) Server(name string) *Server {
	for i := range p.MCP.Servers {
		if p.MCP.Servers[i].Name == name {
			return &p.MCP.Servers[i]
		}
	}
	return nil
}

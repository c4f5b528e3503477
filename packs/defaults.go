package packs

// Defaults of agent-pack.md. Values that a pack may leave out are filled before decoding (so a
// key that is present overrides them); values that depend on other fields are filled by
// [fillDerived] after decoding and environment overrides.
const (
	DefaultLanguage        = "en"
	DefaultProvider        = "openai"
	DefaultOpenAIModel     = "gpt-4o-mini"
	DefaultAnthropicModel  = "claude-3-5-haiku-latest"
	DefaultOllamaModel     = "llama3.1"
	DefaultTemperature     = 0.3
	DefaultMaxTokens       = 512
	DefaultMemoryWindow    = 8
	DefaultTemplateKey     = "greetingMessage"
	DefaultIdentityAttr    = "name"
	DefaultRole            = "user"
	DefaultTimeoutMs       = 30000
	DefaultMaxSessionIdle  = 1200
	DefaultApprovalMinutes = 60
	DefaultHeaderName      = "Authorization"
	GuestRole              = "guest"
)

// defaulter is implemented by types whose zero value is not their default; the decoder calls
// setDefaults on every value it allocates before filling it from the file.
type defaulter interface{ setDefaults() }

func (p *Pack) setDefaults() {
	p.Metadata.DefaultLanguage = DefaultLanguage
	p.LLM.Provider = DefaultProvider
	p.LLM.Temperature = DefaultTemperature
	p.LLM.MaxTokens = DefaultMaxTokens
	p.Memory.Window = DefaultMemoryWindow
	p.Flows.Welcome = Welcome{Enabled: true, SendOnProfile: true, TemplateKey: DefaultTemplateKey}
	p.Flows.Authentication.Enabled = true
	p.Flows.Authentication.UserIdentityAttribute = DefaultIdentityAttr
	p.Flows.Authentication.DefaultRole = DefaultRole
}

func (s *Server) setDefaults() {
	s.AccessMode = AdminControlled
	s.Enabled = true
	s.TimeoutMs = DefaultTimeoutMs
	s.MaxSessionIdleSeconds = DefaultMaxSessionIdle
}

func (a *ApprovalPolicy) setDefaults() {
	a.TimeoutMinutes = DefaultApprovalMinutes
	a.Quorum = 1
	a.AllowSelfApproval = true
}

func (f *UserField) setDefaults() { f.Type = FieldText }

func (c *CredentialRequest) setDefaults() { c.Formats = []string{"jsonld", "jwt"} }

// defaultMenu is the menu of a pack without flows.menu.items.
func defaultMenu() []MenuItem {
	return []MenuItem{
		{ID: "authenticate", LabelKey: "CREDENTIAL", Action: "authenticate", VisibleWhen: "unauthenticated"},
		{ID: "logout", LabelKey: "LOGOUT", Action: "logout", VisibleWhen: "authenticated"},
	}
}

// fillDerived sets the defaults that depend on other fields.
func fillDerived(p *Pack, present func(path string) bool) {
	fillModel(p)
	if !present("flows.menu.items") {
		p.Flows.Menu.Items = defaultMenu()
	}
	for i := range p.Flows.Menu.Items {
		it := &p.Flows.Menu.Items[i]
		if it.Action == "" {
			it.Action = it.ID
		}
		if it.LabelKey == "" && it.Label.IsZero() {
			it.LabelKey = it.ID
		}
	}
	for i := range p.MCP.Servers {
		s := &p.MCP.Servers[i]
		if s.Transport == "" {
			switch {
			case s.URL != "":
				s.Transport = TransportStreamableHTTP
			case s.Command != "":
				s.Transport = TransportStdio
			}
		}
		if a := s.Authentication; a != nil && a.Mode == AuthClientCredentials && a.TokenEndpointAuthMethod == "" {
			a.TokenEndpointAuthMethod = ClientSecretBasic
			if a.PrivateKeyFile != "" {
				a.TokenEndpointAuthMethod = PrivateKeyJWT
			}
		}
		if s.UserConfig != nil {
			for j := range s.UserConfig.Fields {
				f := &s.UserConfig.Fields[j]
				if f.HeaderTemplate != "" && f.HeaderName == "" {
					f.HeaderName = DefaultHeaderName
				}
			}
		}
	}
}

// fillModel sets the default model of the pack's provider when the pack names none.
func fillModel(p *Pack) {
	if p.LLM.Model != "" {
		return
	}
	switch p.LLM.Provider {
	case "anthropic":
		p.LLM.Model = DefaultAnthropicModel
	case "ollama":
		p.LLM.Model = DefaultOllamaModel
	default:
		p.LLM.Model = DefaultOpenAIModel
	}
}

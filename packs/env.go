package packs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Env looks up an environment variable, like [os.LookupEnv]. Packs never read the process
// environment themselves: callers pass os.LookupEnv, a [MapEnv], or the result of [WithDotEnv].
type Env func(name string) (string, bool)

// MapEnv is an Env over a map.
func MapEnv(m map[string]string) Env {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// With returns an Env in which the variables of over take precedence over e.
func (e Env) With(over map[string]string) Env {
	return func(name string) (string, bool) {
		if v, ok := over[name]; ok {
			return v, true
		}
		return e(name)
	}
}

// get returns a variable's value when it is set and not empty.
func (e Env) get(name string) (string, bool) {
	if e == nil {
		return "", false
	}
	v, ok := e(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", false
	}
	return v, true
}

// WithDotEnv reads the .env file at path (a missing file is not an error) and returns an Env in
// which base wins: a variable already set in base, even to "", is not overridden by the file.
// This differs from the Hologram reference, whose .env overrides the process environment; the
// process environment is the more specific, deliberate setting.
func WithDotEnv(path string, base Env) (Env, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return base, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	vars, err := ParseDotEnv(path, data)
	if err != nil {
		return nil, err
	}
	return func(name string) (string, bool) {
		if v, ok := base(name); ok {
			return v, true
		}
		v, ok := vars[name]
		return v, ok
	}, nil
}

// ParseDotEnv parses .env syntax: NAME=value lines, optional `export `, # comments, values in
// single quotes (literal) or double quotes (\n, \t, \", \\ escapes), and trailing ` # comments`
// after unquoted values. A malformed line is an error naming file:line.
func ParseDotEnv(file string, data []byte) (map[string]string, error) {
	vars := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		name, val, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok || !varName.MatchString(name) {
			return nil, fmt.Errorf("%s:%d: want NAME=value", file, n)
		}
		v, err := dotEnvValue(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", file, n, name, err)
		}
		vars[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	return vars, nil
}

func dotEnvValue(v string) (string, error) {
	switch {
	case strings.HasPrefix(v, "'"):
		end := strings.IndexByte(v[1:], '\'')
		if end < 0 {
			return "", errors.New("unterminated single quote")
		}
		return v[1 : 1+end], nil
	case strings.HasPrefix(v, `"`):
		var b strings.Builder
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '"':
				return b.String(), nil
			case c == '\\' && i+1 < len(v):
				i++
				switch v[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				default:
					b.WriteByte(v[i])
				}
			default:
				b.WriteByte(c)
			}
		}
		return "", errors.New("unterminated double quote")
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v), nil
}

// ParseBool accepts true/1/yes/on and false/0/no/off, in any case.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean (true/1/yes or false/0/no)", s)
}

// SplitCSV splits a comma-separated list, trimming entries and dropping empty ones.
func SplitCSV(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// envOverride is one environment variable that overrides a pack field.
type envOverride struct {
	name  string
	path  string
	apply func(p *Pack, v string) error
}

// overrides are the Hologram environment variables; when set and non-empty they win over the
// pack. CREDENTIAL_DEFINITION_ID and MCP_SERVERS_CONFIG are handled in Load.
var overrides = []envOverride{
	{"LLM_PROVIDER", "llm.provider", func(p *Pack, v string) error { p.LLM.Provider = v; return nil }},
	{"OPENAI_MODEL", "llm.model", func(p *Pack, v string) error { p.LLM.Model = v; return nil }},
	{"OPENAI_TEMPERATURE", "llm.temperature", func(p *Pack, v string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		p.LLM.Temperature = f
		return nil
	}},
	{"OPENAI_MAX_TOKENS", "llm.maxTokens", func(p *Pack, v string) error { return setInt(&p.LLM.MaxTokens, v) }},
	{"OPENAI_BASE_URL", "llm.baseUrl", func(p *Pack, v string) error { p.LLM.BaseURL = v; return nil }},
	{"OPENAI_REASONING_EFFORT", "llm.reasoningEffort", func(p *Pack, v string) error { p.LLM.ReasoningEffort = v; return nil }},
	{"AGENT_PROMPT", "llm.agentPrompt", func(p *Pack, v string) error { p.LLM.AgentPrompt = v; return nil }},
	{"AUTH_REQUIRED", "flows.authentication.required", func(p *Pack, v string) error {
		b, err := ParseBool(v)
		p.Flows.Authentication.Required = b
		return err
	}},
	{"USER_IDENTITY_ATTRIBUTE", "flows.authentication.userIdentityAttribute", func(p *Pack, v string) error {
		p.Flows.Authentication.UserIdentityAttribute = v
		return nil
	}},
	{"ROLES_ATTRIBUTE", "flows.authentication.rolesAttribute", func(p *Pack, v string) error {
		p.Flows.Authentication.RolesAttribute = v
		return nil
	}},
	{"DEFAULT_ROLE", "flows.authentication.defaultRole", func(p *Pack, v string) error {
		p.Flows.Authentication.DefaultRole = v
		return nil
	}},
	{"ADMIN_USERS", "flows.authentication.adminUsers", func(p *Pack, v string) error {
		p.Flows.Authentication.AdminUsers = SplitCSV(v)
		return nil
	}},
	{"ADMIN_AVATARS", "flows.authentication.adminAvatars", func(p *Pack, v string) error {
		p.Flows.Authentication.AdminAvatars = SplitCSV(v)
		return nil
	}},
	{"AGENT_MEMORY_WINDOW", "memory.window", func(p *Pack, v string) error { return setInt(&p.Memory.Window, v) }},
}

func setInt(dst *int, v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	*dst = n
	return nil
}

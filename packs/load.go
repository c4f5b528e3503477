package packs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Environment variables that locate and replace parts of a pack.
const (
	EnvPackPath       = "AGENT_PACK_PATH"
	EnvServersConfig  = "MCP_SERVERS_CONFIG"
	EnvCredentialDef  = "CREDENTIAL_DEFINITION_ID"
	DefaultPackFolder = "./agent-packs"
)

// PackFileNames are the names looked for in a pack folder, in order.
var PackFileNames = []string{"agent-pack.yaml", "agent-pack.yml", "agent-pack.json"}

// unsupportedBlocks are Hologram top-level blocks packbot accepts and ignores.
var unsupportedBlocks = map[string]bool{
	"rag": true, "tools": true, "imageGeneration": true, "speechToText": true, "vision": true, "integrations": true,
}

// Options tells [Load] where the pack is and which environment to use.
type Options struct {
	// Path is a pack file, or a folder holding agent-pack.yaml, .yml or .json (the --pack flag).
	// Empty: AGENT_PACK_PATH; if that is unset too, ./agent-packs when it exists, otherwise the
	// embedded demo pack.
	Path string
	// Env supplies ${NAME} placeholders and the environment overrides. nil means an empty
	// environment; pass os.LookupEnv (or [WithDotEnv]'s result) for the real one.
	Env Env
}

// Load finds, reads, expands, decodes and validates a pack. When the pack has errors it returns
// an [*InvalidError] holding all of them; warnings are in the returned pack's Warnings.
func Load(opts Options) (*Pack, error) {
	env := opts.Env
	if env == nil {
		env = MapEnv(nil)
	}
	source, data, err := Locate(opts.Path, env)
	if err != nil {
		return nil, err
	}
	return Parse(source, data, env)
}

// Locate returns the name and content of the pack that path (or AGENT_PACK_PATH, or the
// defaults) designates.
func Locate(path string, env Env) (source string, data []byte, err error) {
	explicit := path != ""
	if !explicit {
		if v, ok := env.get(EnvPackPath); ok {
			path, explicit = v, true
		} else {
			path = DefaultPackFolder
		}
	}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return "embedded:" + demoPackName, DemoPack(), nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("load pack: %w", err)
	}
	file := path
	if info.IsDir() {
		file = ""
		for _, name := range PackFileNames {
			candidate := filepath.Join(path, name)
			if _, err := os.Stat(candidate); err == nil {
				file = candidate
				break
			}
		}
		if file == "" {
			return "", nil, fmt.Errorf("load pack: folder %s holds none of %s", path, strings.Join(PackFileNames, ", "))
		}
	}
	data, err = os.ReadFile(file)
	if err != nil {
		return "", nil, fmt.Errorf("load pack: %w", err)
	}
	return file, data, nil
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// Parse decodes and validates pack data read from source (a name used in problems).
func Parse(source string, data []byte, env Env) (*Pack, error) {
	if env == nil {
		env = MapEnv(nil)
	}
	ps := &problems{}
	d := &decoder{file: source, env: env, ps: ps, index: make(map[string]Pos), unresolved: make(map[string][]string)}
	p := &Pack{Source: source}
	p.setDefaults()

	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		ps.add(Error, syntaxPos(source, err), "", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		return nil, finish(p, ps)
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		ps.add(Error, Pos{File: source}, "", "the pack is empty")
		return nil, finish(p, ps)
	}
	root := doc.Content[0]
	d.decodeStruct(root, reflect.ValueOf(p).Elem(), "", func(k, val *yaml.Node) {
		var v any
		_ = val.Decode(&v) // a node that parsed always decodes into any
		if p.Unsupported == nil {
			p.Unsupported = make(map[string]any)
		}
		p.Unsupported[k.Value] = v
		if unsupportedBlocks[k.Value] {
			d.warnf(k, k.Value, "not supported by packbot yet: accepted and ignored")
		} else {
			d.warnf(k, k.Value, "unknown top-level key: kept and ignored")
		}
	})
	if raw, ok := env.get(EnvServersConfig); ok {
		decodeServersConfig(d, p, raw)
	}
	applyOverrides(d, p, env)
	fillDerived(p, func(path string) bool { _, ok := d.index[path]; return ok })
	resolveFiles(d, p)
	resolveUnset(d, p)
	validate(p, d)
	return p, finish(p, ps)
}

// finish splits problems into the pack's warnings and, when there are errors, an InvalidError.
func finish(p *Pack, ps *problems) error {
	errs, warns := ps.split()
	p.Warnings = warns
	if len(errs) > 0 {
		return &InvalidError{Source: p.Source, Problems: errs, Warnings: warns}
	}
	return nil
}

func syntaxPos(source string, err error) Pos {
	pos := Pos{File: source}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		pos.Line, _ = strconv.Atoi(m[1])
	}
	return pos
}

// decodeServersConfig replaces mcp.servers with the JSON array in MCP_SERVERS_CONFIG. Invalid
// JSON is an error (the reference silently used an empty list).
func decodeServersConfig(d *decoder, p *Pack, raw string) {
	src := "$" + EnvServersConfig
	var probe []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &probe); err != nil {
		d.ps.add(Error, Pos{File: src}, "mcp.servers", "%s must be a JSON array of server objects: %v", EnvServersConfig, err)
		return
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil || len(doc.Content) == 0 {
		// Valid JSON that the YAML parser refuses (rare: e.g. tabs); positions are lost.
		var v any
		_ = json.Unmarshal([]byte(raw), &v)
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{}}}
		if err := doc.Content[0].Encode(v); err != nil {
			d.ps.add(Error, Pos{File: src}, "mcp.servers", "%s: %v", EnvServersConfig, err)
			return
		}
	}
	for path := range d.index {
		if path == "mcp.servers" || strings.HasPrefix(path, "mcp.servers[") || strings.HasPrefix(path, "mcp.servers.") {
			delete(d.index, path)
		}
	}
	for path := range d.unresolved {
		if strings.HasPrefix(path, "mcp.servers") {
			delete(d.unresolved, path)
		}
	}
	p.MCP.Servers = nil
	file := d.file
	d.file = src
	d.decode(doc.Content[0], reflect.ValueOf(&p.MCP.Servers).Elem(), "mcp.servers", classPlain)
	d.file = file
}

var onlyPlaceholder = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

// applyOverrides applies the Hologram environment variables; env wins when set and non-empty.
func applyOverrides(d *decoder, p *Pack, env Env) {
	packProvider, packModel := p.LLM.Provider, p.LLM.Model
	for _, o := range overrides {
		v, ok := env.get(o.name)
		if !ok {
			continue
		}
		pos := Pos{File: "$" + o.name}
		if err := o.apply(p, v); err != nil {
			d.ps.add(Error, pos, o.path, "%s: %v", o.name, err)
		}
		d.index[o.path] = pos
	}
	// A provider chosen by the environment with no model: the pack's model names a model of
	// the pack's provider (gpt-4o-mini is no Ollama model), so the new provider's default is
	// used instead, and the operator is told.
	if _, modelSet := env.get("OPENAI_MODEL"); !modelSet && packModel != "" && p.LLM.Provider != packProvider &&
		slices.Contains(Providers, p.LLM.Provider) {
		p.LLM.Model = ""
		fillModel(p)
		d.ps.add(Warning, Pos{File: "$LLM_PROVIDER"}, "llm.model",
			"LLM_PROVIDER=%s replaces the pack's provider %s, whose model %q is not one of %s's: %s's default model %q is used; set OPENAI_MODEL to choose another",
			p.LLM.Provider, packProvider, packModel, p.LLM.Provider, p.LLM.Provider, p.LLM.Model)
		d.index["llm.model"] = Pos{File: "$LLM_PROVIDER"}
	}
	a := &p.Flows.Authentication
	if v, ok := env.get(EnvCredentialDef); ok && (a.CredentialDefinitionID == "" || onlyPlaceholder.MatchString(a.CredentialDefinitionID)) {
		a.CredentialDefinitionID = v
		d.index["flows.authentication.credentialDefinitionId"] = Pos{File: "$" + EnvCredentialDef}
	}
}

// resolveUnset turns unset variables in URL, secret and strict fields into errors — except in the
// headers of a user-controlled server, where such a header is simply not sent (those servers get
// their credentials per user), as in the reference.
func resolveUnset(d *decoder, p *Pack) {
	for i := range p.MCP.Servers {
		s := &p.MCP.Servers[i]
		if !s.UserControlled() {
			continue
		}
		for name := range s.Headers {
			path := joinPath(joinPath(indexPath("mcp.servers", i), "headers"), name)
			if _, ok := d.unresolved[path]; ok {
				delete(s.Headers, name)
				delete(d.unresolved, path)
			}
		}
	}
	for path, vars := range d.unresolved {
		d.ps.add(Error, lookupPos(d, path), path, "%s not set: set it, or remove the placeholder (an unset variable in a URL, a secret or a command is an error)",
			describeVars(vars))
	}
}

// resolveFiles makes the relative file paths of the pack relative to the folder of the file
// they were written in, so that a pack means the same whatever the working directory. A path
// from MCP_SERVERS_CONFIG or the embedded pack stays relative to the working directory.
func resolveFiles(d *decoder, p *Pack) {
	for i := range p.MCP.Servers {
		a := p.MCP.Servers[i].Authentication
		if a == nil {
			continue
		}
		for field, f := range map[string]*string{"privateKeyFile": &a.PrivateKeyFile, "assertionFile": &a.AssertionFile} {
			if *f == "" || filepath.IsAbs(*f) {
				continue
			}
			path := joinPath(joinPath(indexPath("mcp.servers", i), "authentication"), field)
			if _, unset := d.unresolved[path]; unset {
				continue
			}
			file := lookupPos(d, path).File
			if file == "" || strings.HasPrefix(file, "$") || strings.HasPrefix(file, "embedded:") {
				continue
			}
			*f = filepath.Join(filepath.Dir(file), *f)
		}
	}
}

// lookupPos returns the position of path, or of its nearest recorded ancestor.
func lookupPos(d *decoder, path string) Pos {
	for p := path; p != ""; {
		if pos, ok := d.index[p]; ok {
			return pos
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return Pos{File: d.file}
}

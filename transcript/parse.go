package transcript

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Kind is what a step does.
type Kind int

// The kinds of step; the README of the scenarios gives the syntax of each.
const (
	Connect                Kind = iota // connect NAME lang=L claims…
	Send                               // NAME> text
	Select                             // NAME: select ID
	Present                            // NAME: present
	Decline                            // NAME: decline
	Answer                             // NAME: answer MSG
	Profile                            // NAME: profile LANG
	ExpectText                         // NAME< MSG
	ExpectContains                     // NAME<~ MSG && MSG…
	ExpectProof                        // NAME< proof
	ExpectQuestion                     // NAME? MSG | OPTION…
	ExpectMenu                         // NAME menu: ID ID[n]…
	LLMCall                            // llm: call TOOL {json}
	LLMSay                             // llm: say "text"
	LLMTools                           // llm: tools A B…
	LLMResult                          // llm: result NAME MSG
	Clock                              // clock: +31m
	Calls                              // calls: tool=n…
	LLMSystem                          // llm: system "text"
	Audit                              // audit: identity tool decision/outcome
	ExpectQuestionContains             // NAME?~ MSG && MSG… | OPTION…
	Type                               // NAME: type MSG
	LLMCapture                         // llm: capture NAME=$.path
	LLMMaxTokens                       // llm: max-tokens N
	ToolErrors                         // errors: tool=n…
	LogsLack                           // logs: never "text"
	LLMMessage                         // llm: message "text"
	LLMLacks                           // llm: lacks "text"
	ResourceUpdate                     // update: URI "text"
	ServerRemove                       // remove: prompt NAME | remove: resource URI
	Hold                               // NAME: hold claim=value…
	Receipt                            // receipt: NAME TOOL OUTCOME [proved=N]
)

// GreetingKey names the pack's greeting in a transcript; its argument name= is the user's name.
const GreetingKey = "GREETING"

// Script is one parsed transcript.
type Script struct {
	// Name is the file's name, used in error messages and as the subtest's name.
	Name string
	// Doc is the comment block at the top of the file: what the scenario pins.
	Doc   string
	Steps []Step
	// ElicitTimeout is how long the bot's questions for a server wait (world: elicit-timeout=);
	// zero: the bot's default.
	ElicitTimeout time.Duration
}

// Step is one line of a transcript (a login line gives several steps with its line number).
type Step struct {
	Line   int
	Kind   Kind
	Wallet string
	// Text is the text sent (Send), the option id (Select), the language (Profile, Connect),
	// the model's text (LLMSay), the tool's JSON arguments (LLMCall), the variable's name
	// (LLMCapture), the text the log never holds (LogsLack), the text looked for in the model's
	// request (LLMSystem, LLMMessage, LLMLacks) or the resource's URI (ResourceUpdate). In Send
	// and LLMCall, $name is a captured value.
	Text string
	// Tool is the tool the model calls (LLMCall).
	Tool string
	// Msgs are the expected messages: one for ExpectText, Answer, Type and LLMResult, each part
	// for ExpectContains, the question's text then its options for ExpectQuestion, the options
	// for ExpectQuestionContains.
	Msgs []Message
	// Parts are what the question's text contains (ExpectQuestionContains).
	Parts  []Message
	Menu   []MenuItem
	Claims map[string]string
	// Names are the tools offered (LLMTools), the decision and outcome (Audit), the JSON path
	// of the captured value (LLMCapture) or the resource's new text (ResourceUpdate).
	Names []string
	// Advance is how far the approvals' clock moves (Clock).
	Advance time.Duration
	// Counts are the expected executions (Calls) or tool errors (ToolErrors) by tool; N is
	// the token limit (LLMMaxTokens).
	Counts map[string]int
	N      int
}

// Message is an expected message: an i18n key with arguments, or a literal text.
type Message struct {
	Key string
	// Literal is the text itself, for text the scenario scripted (the model's answers).
	Literal   string
	IsLiteral bool
	Args      []Arg
	// Suffix is text the bot adds after the key's text, written "#…" after the arguments: the
	// request reference of an approval list's options ("#*").
	Suffix string
}

// Arg is one argument of a key; the value "*" matches anything.
type Arg struct{ Name, Value string }

// Wildcard is the argument value that matches any text.
const Wildcard = "*"

// MenuItem is one item of an expected menu; Badge 0 means no badge.
type MenuItem struct {
	ID    string
	Badge int
}

var (
	nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	keyRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// msgKeyRE is a message key: upper case first, as the catalogs write them.
	msgKeyRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)
	itemRE   = regexp.MustCompile(`^([a-z0-9][a-z0-9_-]*)(?:\[([0-9]{1,4})\])?$`)
	// actorRE splits "ana>", "ana<~", "ana?", "ana?~" and "ana:" lines.
	actorRE = regexp.MustCompile(`^([a-z][a-z0-9_-]*)(>|<~|<|\?~|\?|:)(?:\s+|$)(.*)$`)
	// varRE is a reference to a captured value.
	varRE = regexp.MustCompile(`\$[a-z][a-z0-9_]*`)
	// pathRE is the JSON path of a captured value: $.a.b.
	pathRE = regexp.MustCompile(`^\$(\.[A-Za-z_][A-Za-z0-9_]*)+$`)
)

// Parse reads a transcript. name is the file name used in errors, which all carry file:line and
// are reported together.
func Parse(name string, src []byte) (*Script, error) {
	s := &Script{Name: name}
	p := &parser{s: s, wallets: map[string]bool{}, vars: map[string]bool{}}
	var errs []error
	inDoc := true
	for i, raw := range strings.Split(string(src), "\n") {
		line := strings.TrimSpace(strings.TrimSuffix(raw, "\r"))
		if strings.HasPrefix(line, "#") {
			if inDoc {
				s.Doc += strings.TrimSpace(strings.TrimPrefix(line, "#")) + "\n"
			}
			continue
		}
		if line == "" {
			if s.Doc != "" {
				inDoc = false
			}
			continue
		}
		inDoc = false
		if err := p.line(i+1, line); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", name, i+1, err))
		}
	}
	if len(errs) == 0 && len(s.Steps) == 0 {
		errs = append(errs, fmt.Errorf("%s: no steps", name))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

type parser struct {
	s       *Script
	wallets map[string]bool
	// vars are the values captured so far.
	vars map[string]bool
}

// uses checks that every $name in text was captured before.
func (p *parser) uses(text string) error {
	for _, v := range varRE.FindAllString(text, -1) {
		if !p.vars[v[1:]] {
			return fmt.Errorf("%s is used before llm: capture %s=…", v, v[1:])
		}
	}
	return nil
}

// counts reads "tool=n tool=n…" of a calls: or errors: step.
func counts(step, rest string) (map[string]int, error) {
	c := map[string]int{}
	for _, f := range strings.Fields(rest) {
		tool, v, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 || tool == "" {
			return nil, fmt.Errorf("%s want tool=count, got %q", step, f)
		}
		c[tool] = n
	}
	if len(c) == 0 {
		return nil, fmt.Errorf("%s want at least one tool=count", step)
	}
	return c, nil
}

// queuedInTime refuses an llm: call or say right after a wallet's message: the bot may ask the
// model before the runner reaches the next line, and would get the default echo. The model's
// reply goes before the message that asks for it.
func (p *parser) queuedInTime(verb string) error {
	if n := len(p.s.Steps); n > 0 {
		switch last := p.s.Steps[n-1]; last.Kind {
		case Send, Type, Answer, Select:
			return fmt.Errorf("llm: %s after %s's message on line %d: put it before that message (the bot may ask the model first)", verb, last.Wallet, last.Line)
		}
	}
	return nil
}

func (p *parser) add(st Step) { p.s.Steps = append(p.s.Steps, st) }

func (p *parser) line(n int, line string) error {
	head, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch head {
	case "connect", "login":
		return p.connect(n, head == "login", rest)
	case "llm:":
		return p.llm(n, rest)
	case "clock:":
		d, err := time.ParseDuration(strings.TrimPrefix(rest, "+"))
		if err != nil || d <= 0 || !strings.HasPrefix(rest, "+") {
			return fmt.Errorf("clock: want a positive duration such as +31m, got %q", rest)
		}
		p.add(Step{Line: n, Kind: Clock, Advance: d})
		return nil
	case "audit:":
		f := strings.Fields(rest)
		if len(f) != 3 || !strings.Contains(f[2], "/") {
			return fmt.Errorf("audit: want identity tool decision/outcome, got %q", rest)
		}
		p.add(Step{Line: n, Kind: Audit, Text: f[0], Tool: f[1], Names: strings.SplitN(f[2], "/", 2)})
		return nil
	case "calls:", "errors:":
		c, err := counts(head, rest)
		if err != nil {
			return err
		}
		kind := Calls
		if head == "errors:" {
			kind = ToolErrors
		}
		p.add(Step{Line: n, Kind: kind, Counts: c})
		return nil
	case "logs:":
		never, lit, _ := strings.Cut(rest, " ")
		s, err := strconv.Unquote(strings.TrimSpace(lit))
		if never != "never" || err != nil || s == "" {
			return fmt.Errorf("logs: want never \"text\", got %q", rest)
		}
		p.add(Step{Line: n, Kind: LogsLack, Text: s})
		return nil
	case "world:":
		return p.world(rest)
	case "remove:":
		what, name, _ := strings.Cut(rest, " ")
		if (what != "prompt" && what != "resource") || strings.TrimSpace(name) == "" {
			return fmt.Errorf("remove: want prompt NAME or resource URI, got %q", rest)
		}
		p.add(Step{Line: n, Kind: ServerRemove, Tool: what, Text: strings.TrimSpace(name)})
		return nil
	case "update:":
		uri, lit, _ := strings.Cut(rest, " ")
		text, err := strconv.Unquote(strings.TrimSpace(lit))
		if uri == "" || err != nil {
			return fmt.Errorf("update: want URI \"text\", got %q", rest)
		}
		p.add(Step{Line: n, Kind: ResourceUpdate, Text: uri, Names: []string{text}})
		return nil
	case "receipt:":
		return p.receipt(n, rest)
	}
	if m, ok := strings.CutPrefix(rest, "menu:"); ok && nameRE.MatchString(head) {
		if err := p.known(head); err != nil {
			return err
		}
		st := Step{Line: n, Kind: ExpectMenu, Wallet: head}
		for _, f := range strings.Fields(m) {
			sub := itemRE.FindStringSubmatch(f)
			if sub == nil {
				return fmt.Errorf("menu item %q: want id or id[badge]", f)
			}
			b, _ := strconv.Atoi(sub[2])
			st.Menu = append(st.Menu, MenuItem{ID: sub[1], Badge: b})
		}
		p.add(st)
		return nil
	}
	sub := actorRE.FindStringSubmatch(line)
	if sub == nil {
		return fmt.Errorf("unknown step %q: want connect, login, world:, update:, remove:, llm:, clock:, calls:, errors:, audit:, logs:, receipt:, or a wallet name with >, <, <~, ?, ?~, : (or \"menu:\") after it", head)
	}
	who, op, arg := sub[1], sub[2], strings.TrimSpace(sub[3])
	if err := p.known(who); err != nil {
		return err
	}
	switch op {
	case ">":
		if arg == "" {
			return errors.New("nothing to send")
		}
		if err := p.uses(arg); err != nil {
			return err
		}
		p.add(Step{Line: n, Kind: Send, Wallet: who, Text: arg})
	case "<":
		if arg == "proof" {
			p.add(Step{Line: n, Kind: ExpectProof, Wallet: who})
			return nil
		}
		m, err := parseMessage(arg)
		if err != nil {
			return err
		}
		p.add(Step{Line: n, Kind: ExpectText, Wallet: who, Msgs: []Message{m}})
	case "<~", "?":
		sep, kind := "&&", ExpectContains
		if op == "?" {
			sep, kind = "|", ExpectQuestion
		}
		st := Step{Line: n, Kind: kind, Wallet: who}
		var err error
		if st.Msgs, err = parseMessages(arg, sep); err != nil {
			return err
		}
		p.add(st)
	case "?~":
		parts := splitOutside(arg, "|")
		st := Step{Line: n, Kind: ExpectQuestionContains, Wallet: who}
		var err error
		if st.Parts, err = parseMessages(parts[0], "&&"); err != nil {
			return err
		}
		for _, o := range parts[1:] {
			m, err := parseMessage(strings.TrimSpace(o))
			if err != nil {
				return err
			}
			st.Msgs = append(st.Msgs, m)
		}
		p.add(st)
	case ":":
		return p.action(n, who, arg)
	}
	return nil
}

func (p *parser) known(who string) error {
	if !p.wallets[who] {
		return fmt.Errorf("wallet %q is used before connect", who)
	}
	return nil
}

func (p *parser) connect(n int, login bool, rest string) error {
	toks, err := tokens(rest)
	if err != nil {
		return err
	}
	if len(toks) == 0 || !nameRE.MatchString(toks[0]) {
		return errors.New("connect: want a wallet name (lower case) first")
	}
	who := toks[0]
	if p.wallets[who] {
		return fmt.Errorf("wallet %q connects twice", who)
	}
	st := Step{Line: n, Kind: Connect, Wallet: who, Claims: map[string]string{}}
	for _, t := range toks[1:] {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return fmt.Errorf("connect: want claim=value, got %q", t)
		}
		v, err := unquote(v)
		if err != nil {
			return fmt.Errorf("connect: claim %s: %w", k, err)
		}
		if k == "lang" {
			st.Text = v
			continue
		}
		st.Claims[k] = v
	}
	if st.Text == "" {
		return errors.New("connect: want lang=")
	}
	p.wallets[who] = true
	p.add(st)
	if !login {
		return nil
	}
	if st.Claims["name"] == "" {
		return errors.New("login: want a name= claim (the success message names the user)")
	}
	p.add(Step{Line: n, Kind: ExpectText, Wallet: who, Msgs: []Message{{Key: GreetingKey}}})
	p.add(Step{Line: n, Kind: Select, Wallet: who, Text: "authenticate"})
	p.add(Step{Line: n, Kind: ExpectProof, Wallet: who})
	p.add(Step{Line: n, Kind: Present, Wallet: who})
	p.add(Step{Line: n, Kind: ExpectText, Wallet: who, Msgs: []Message{{Key: "AUTH_SUCCESS_NAME", Args: []Arg{{"name", st.Claims["name"]}}}}})
	return nil
}

func (p *parser) action(n int, who, arg string) error {
	verb, rest, _ := strings.Cut(arg, " ")
	rest = strings.TrimSpace(rest)
	st := Step{Line: n, Wallet: who}
	switch verb {
	case "select":
		if !itemRE.MatchString(rest) || strings.Contains(rest, "[") {
			return fmt.Errorf("select: want a menu item id, got %q", rest)
		}
		st.Kind, st.Text = Select, rest
	case "present", "decline":
		if rest != "" {
			return fmt.Errorf("%s takes no argument", verb)
		}
		st.Kind = Present
		if verb == "decline" {
			st.Kind = Decline
		}
	case "answer", "type":
		m, err := parseMessage(rest)
		if err != nil {
			return err
		}
		st.Kind, st.Msgs = Answer, []Message{m}
		if verb == "type" {
			st.Kind = Type
		}
	case "profile":
		if rest == "" || strings.ContainsAny(rest, " \t") {
			return fmt.Errorf("profile: want a language, got %q", rest)
		}
		st.Kind, st.Text = Profile, rest
	case "hold":
		claims, err := claimList("hold", rest)
		if err != nil {
			return err
		}
		st.Kind, st.Claims = Hold, claims
	default:
		return fmt.Errorf("unknown action %q: want select, present, decline, answer, type, profile or hold", verb)
	}
	p.add(st)
	return nil
}

func (p *parser) llm(n int, arg string) error {
	verb, rest, _ := strings.Cut(arg, " ")
	rest = strings.TrimSpace(rest)
	if verb == "call" || verb == "say" {
		if err := p.queuedInTime(verb); err != nil {
			return err
		}
	}
	switch verb {
	case "call":
		tool, args, _ := strings.Cut(rest, " ")
		args = strings.TrimSpace(args)
		if !keyRE.MatchString(tool) {
			return fmt.Errorf("llm: call: want a tool name, got %q", tool)
		}
		if args == "" {
			args = "{}"
		}
		if err := p.uses(args); err != nil {
			return err
		}
		p.add(Step{Line: n, Kind: LLMCall, Tool: tool, Text: args})
	case "say":
		s, err := strconv.Unquote(rest)
		if err != nil {
			return fmt.Errorf("llm: say: want a quoted text, got %q", rest)
		}
		p.add(Step{Line: n, Kind: LLMSay, Text: s})
	case "tools":
		p.add(Step{Line: n, Kind: LLMTools, Names: strings.Fields(rest)})
	case "system", "message", "lacks":
		s, err := strconv.Unquote(rest)
		if err != nil {
			return fmt.Errorf("llm: %s: want a quoted text, got %q", verb, rest)
		}
		kind := map[string]Kind{"system": LLMSystem, "message": LLMMessage, "lacks": LLMLacks}[verb]
		p.add(Step{Line: n, Kind: kind, Text: s})
	case "result":
		who, m, _ := strings.Cut(rest, " ")
		if err := p.known(who); err != nil {
			return err
		}
		msg, err := parseMessage(strings.TrimSpace(m))
		if err != nil {
			return err
		}
		p.add(Step{Line: n, Kind: LLMResult, Wallet: who, Msgs: []Message{msg}})
	case "capture":
		name, path, ok := strings.Cut(rest, "=")
		if !ok || !nameRE.MatchString(name) || strings.Contains(name, "-") || !pathRE.MatchString(path) {
			return fmt.Errorf("llm: capture: want name=$.field.field, got %q", rest)
		}
		p.vars[name] = true
		p.add(Step{Line: n, Kind: LLMCapture, Text: name, Names: strings.Split(strings.TrimPrefix(path, "$."), ".")})
	case "max-tokens":
		v, err := strconv.Atoi(rest)
		if err != nil || v <= 0 {
			return fmt.Errorf("llm: max-tokens: want a positive number, got %q", rest)
		}
		p.add(Step{Line: n, Kind: LLMMaxTokens, N: v})
	default:
		return fmt.Errorf("unknown llm step %q: want call, say, tools, system, message, lacks, result, capture or max-tokens", verb)
	}
	return nil
}

// world reads the settings of the scenario's bot; they come before any step.
func (p *parser) world(rest string) error {
	if len(p.s.Steps) > 0 {
		return errors.New("world: comes before the first step")
	}
	for _, f := range strings.Fields(rest) {
		k, v, _ := strings.Cut(f, "=")
		d, err := time.ParseDuration(v)
		if k != "elicit-timeout" || err != nil || d <= 0 {
			return fmt.Errorf("world: want elicit-timeout=DURATION, got %q", f)
		}
		p.s.ElicitTimeout = d
	}
	if p.s.ElicitTimeout == 0 {
		return errors.New("world: want elicit-timeout=DURATION")
	}
	return nil
}

// parseMessages reads messages separated by sep outside quotes.
func parseMessages(s, sep string) ([]Message, error) {
	var out []Message
	for _, part := range splitOutside(s, sep) {
		m, err := parseMessage(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// parseMessage reads `KEY a=b c="x y"`, a quoted literal or a back-quoted one (raw: for JSON).
func parseMessage(s string) (Message, error) {
	if strings.HasPrefix(s, `"`) || strings.HasPrefix(s, "`") {
		lit, err := strconv.Unquote(s)
		if err != nil {
			return Message{}, fmt.Errorf("literal %s: %w", s, err)
		}
		return Message{Literal: lit, IsLiteral: true}, nil
	}
	toks, err := tokens(s)
	if err != nil {
		return Message{}, err
	}
	if len(toks) == 0 || !msgKeyRE.MatchString(toks[0]) {
		return Message{}, fmt.Errorf("want a message key or a quoted text, got %q", s)
	}
	m := Message{Key: toks[0]}
	for i, t := range toks[1:] {
		if strings.HasPrefix(t, "#") && i == len(toks)-2 {
			m.Suffix = t
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok || !keyRE.MatchString(k) {
			return Message{}, fmt.Errorf("%s: want name=value, got %q", m.Key, t)
		}
		v, err := unquote(v)
		if err != nil {
			return Message{}, fmt.Errorf("%s: argument %s: %w", m.Key, k, err)
		}
		m.Args = append(m.Args, Arg{k, v})
	}
	return m, nil
}

func unquote(v string) (string, error) {
	if strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "`") {
		return strconv.Unquote(v)
	}
	return v, nil
}

// tokens splits s at spaces outside double quotes (a backslash escapes inside them) and back
// quotes.
func tokens(s string) ([]string, error) {
	var out []string
	var b strings.Builder
	inQ, inRaw, esc := false, false, false
	for _, r := range s {
		switch {
		case esc:
			esc = false
		case inRaw:
			inRaw = r != '`'
		case inQ && r == '\\':
			esc = true
		case !inQ && r == '`':
			inRaw = true
		case r == '"':
			inQ = !inQ
		case !inQ && (r == ' ' || r == '\t'):
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
			continue
		}
		b.WriteRune(r)
	}
	if inQ || inRaw {
		return nil, fmt.Errorf("unclosed quote in %q", s)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out, nil
}

// splitOutside splits s at sep where sep is outside double quotes and back quotes.
func splitOutside(s, sep string) []string {
	var out []string
	inQ, inRaw, esc, start := false, false, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case inRaw:
			inRaw = c != '`'
		case inQ && c == '\\':
			esc = true
		case !inQ && c == '`':
			inRaw = true
		case c == '"':
			inQ = !inQ
		case !inQ && strings.HasPrefix(s[i:], sep):
			out = append(out, s[start:i])
			start = i + len(sep)
			i += len(sep) - 1
		}
	}
	return append(out, s[start:])
}

// claimList reads "claim=value…" (values quoted when they hold spaces).
func claimList(step, rest string) (map[string]string, error) {
	toks, err := tokens(rest)
	if err != nil {
		return nil, err
	}
	claims := map[string]string{}
	for _, t := range toks {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" || k == "lang" {
			return nil, fmt.Errorf("%s: want claim=value, got %q", step, t)
		}
		if claims[k], err = unquote(v); err != nil {
			return nil, fmt.Errorf("%s: claim %s: %w", step, k, err)
		}
	}
	if len(claims) == 0 {
		return nil, fmt.Errorf("%s: want at least one claim=value", step)
	}
	return claims, nil
}

// receipt reads "receipt: NAME TOOL OUTCOME [proved=N]": the wallet's next receipt is of TOOL
// with OUTCOME (executed, failed), and N of its votes carry a proof digest.
func (p *parser) receipt(n int, rest string) error {
	f := strings.Fields(rest)
	if len(f) < 3 || len(f) > 4 || !keyRE.MatchString(f[1]) {
		return fmt.Errorf("receipt: want NAME TOOL OUTCOME [proved=N], got %q", rest)
	}
	if err := p.known(f[0]); err != nil {
		return err
	}
	st := Step{Line: n, Kind: Receipt, Wallet: f[0], Tool: f[1], Text: f[2], N: -1}
	if len(f) == 4 {
		v, ok := strings.CutPrefix(f[3], "proved=")
		k, err := strconv.Atoi(v)
		if !ok || err != nil || k < 0 {
			return fmt.Errorf("receipt: want proved=N, got %q", f[3])
		}
		st.N = k
	}
	p.add(st)
	return nil
}

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
	Connect        Kind = iota // connect NAME lang=L claims…
	Send                       // NAME> text
	Select                     // NAME: select ID
	Present                    // NAME: present
	Decline                    // NAME: decline
	Answer                     // NAME: answer MSG
	Profile                    // NAME: profile LANG
	ExpectText                 // NAME< MSG
	ExpectContains             // NAME<~ MSG && MSG…
	ExpectProof                // NAME< proof
	ExpectQuestion             // NAME? MSG | OPTION…
	ExpectMenu                 // NAME menu: ID ID[n]…
	LLMCall                    // llm: call TOOL {json}
	LLMSay                     // llm: say "text"
	LLMTools                   // llm: tools A B…
	LLMResult                  // llm: result NAME MSG
	Clock                      // clock: +31m
	Calls                      // calls: tool=n…
	LLMSystem                  // llm: system "text"
	Audit                      // audit: identity tool decision/outcome
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
}

// Step is one line of a transcript (a login line gives several steps with its line number).
type Step struct {
	Line   int
	Kind   Kind
	Wallet string
	// Text is the text sent (Send), the option id (Select), the language (Profile, Connect),
	// the model's text (LLMSay) or the tool's JSON arguments (LLMCall).
	Text string
	// Tool is the tool the model calls (LLMCall).
	Tool string
	// Msgs are the expected messages: one for ExpectText, Answer and LLMResult, each part for
	// ExpectContains, the question's text then its options for ExpectQuestion.
	Msgs   []Message
	Menu   []MenuItem
	Claims map[string]string
	// Names are the tools offered (LLMTools).
	Names []string
	// Advance is how far the approvals' clock moves (Clock).
	Advance time.Duration
	// Counts are the expected executions by tool (Calls).
	Counts map[string]int
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
	// actorRE splits "ana>", "ana<~", "ana?" and "ana:" lines.
	actorRE = regexp.MustCompile(`^([a-z][a-z0-9_-]*)(>|<~|<|\?|:)(?:\s+|$)(.*)$`)
)

// Parse reads a transcript. name is the file name used in errors, which all carry file:line and
// are reported together.
func Parse(name string, src []byte) (*Script, error) {
	s := &Script{Name: name}
	p := &parser{s: s, wallets: map[string]bool{}}
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
	case "calls:":
		counts := map[string]int{}
		for _, f := range strings.Fields(rest) {
			tool, v, ok := strings.Cut(f, "=")
			c, err := strconv.Atoi(v)
			if !ok || err != nil || c < 0 || tool == "" {
				return fmt.Errorf("calls: want tool=count, got %q", f)
			}
			counts[tool] = c
		}
		if len(counts) == 0 {
			return errors.New("calls: want at least one tool=count")
		}
		p.add(Step{Line: n, Kind: Calls, Counts: counts})
		return nil
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
		return fmt.Errorf("unknown step %q: want connect, login, llm:, clock:, calls:, audit:, or a wallet name with >, <, <~, ?, : (or \"menu:\") after it", head)
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
		for _, part := range splitOutside(arg, sep) {
			m, err := parseMessage(strings.TrimSpace(part))
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
	case "answer":
		m, err := parseMessage(rest)
		if err != nil {
			return err
		}
		st.Kind, st.Msgs = Answer, []Message{m}
	case "profile":
		if rest == "" || strings.ContainsAny(rest, " \t") {
			return fmt.Errorf("profile: want a language, got %q", rest)
		}
		st.Kind, st.Text = Profile, rest
	default:
		return fmt.Errorf("unknown action %q: want select, present, decline, answer or profile", verb)
	}
	p.add(st)
	return nil
}

func (p *parser) llm(n int, arg string) error {
	verb, rest, _ := strings.Cut(arg, " ")
	rest = strings.TrimSpace(rest)
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
		p.add(Step{Line: n, Kind: LLMCall, Tool: tool, Text: args})
	case "say":
		s, err := strconv.Unquote(rest)
		if err != nil {
			return fmt.Errorf("llm: say: want a quoted text, got %q", rest)
		}
		p.add(Step{Line: n, Kind: LLMSay, Text: s})
	case "tools":
		p.add(Step{Line: n, Kind: LLMTools, Names: strings.Fields(rest)})
	case "system":
		s, err := strconv.Unquote(rest)
		if err != nil {
			return fmt.Errorf("llm: system: want a quoted text, got %q", rest)
		}
		p.add(Step{Line: n, Kind: LLMSystem, Text: s})
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
	default:
		return fmt.Errorf("unknown llm step %q: want call, say, tools, system or result", verb)
	}
	return nil
}

// parseMessage reads `KEY a=b c="x y"` or a quoted literal.
func parseMessage(s string) (Message, error) {
	if strings.HasPrefix(s, `"`) {
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
	if strings.HasPrefix(v, `"`) {
		return strconv.Unquote(v)
	}
	return v, nil
}

// tokens splits s at spaces outside double quotes (a backslash escapes inside them).
func tokens(s string) ([]string, error) {
	var out []string
	var b strings.Builder
	inQ, esc := false, false
	for _, r := range s {
		switch {
		case esc:
			esc = false
		case inQ && r == '\\':
			esc = true
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
	if inQ {
		return nil, fmt.Errorf("unclosed quote in %q", s)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out, nil
}

// splitOutside splits s at sep where sep is outside double quotes.
func splitOutside(s, sep string) []string {
	var out []string
	inQ, esc, start := false, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case inQ && c == '\\':
			esc = true
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

package flows

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/packbot/packbot/mcp"
)

// kindContextArgs is the dialog that asks, one at a time, the arguments of a prompt (required
// ones first, optional ones skippable) or the variables of a resource template, offering the
// server's completions as options. The user may also type any value; /cancel (or Cancel) stops.
const kindContextArgs = "context-args"

// contextArgs: asking argument Order[Index] of Prompt (or variable of Template) of Server; Args
// holds the values given so far.
type contextArgs struct {
	question
	Server   string            `json:"server"`
	Prompt   string            `json:"prompt,omitempty"`
	Template string            `json:"template,omitempty"`
	Title    string            `json:"title"`
	Order    []string          `json:"order"`
	Index    int               `json:"index,omitempty"`
	Args     map[string]string `json:"args,omitempty"`
}

func (*contextArgs) kind() string { return kindContextArgs }

// set gives the current argument its value.
func (d *contextArgs) set(v string) {
	if d.Args == nil {
		d.Args = map[string]string{}
	}
	d.Args[d.Order[d.Index]] = v
}

// Option values of an argument's question (a completion's value is "v:" and the value).
const (
	argSkip   = "skip"
	argCancel = "cancel"
	argValue  = "v:"
)

// Bounds of the argument dialog.
const (
	maxArgValue    = 2000 // characters of one typed value
	maxSuggestions = 8    // completions offered as options
)

// argSpec is one argument (or template variable) as the dialog asks it.
type argSpec struct {
	name, label, description string
	required                 bool
}

// startArgs asks the arguments in order, then finishes (at once when there is none to ask).
func (t *turn) startArgs(ctx context.Context, d *contextArgs) error {
	if d.Args == nil {
		d.Args = map[string]string{}
	}
	if len(d.Order) == 0 {
		return t.finishArgs(ctx, d)
	}
	return t.askArg(ctx, d)
}

// spec returns what the dialog's current argument is, from the server's listing (found false:
// the prompt or template is gone).
func (t *turn) spec(surf mcp.Surface, d *contextArgs) (argSpec, bool) {
	name := d.Order[d.Index]
	if d.Prompt != "" {
		p, ok := surf.Prompt(d.Prompt)
		if !ok {
			return argSpec{}, false
		}
		i := slices.IndexFunc(p.Arguments, func(a mcp.PromptArgument) bool { return a.Name == name })
		if i < 0 {
			return argSpec{name: name, label: name}, true
		}
		a := p.Arguments[i]
		return argSpec{name: a.Name, label: a.Label(), description: a.Description, required: a.Required}, true
	}
	if _, ok := surf.Template(d.Template); !ok {
		return argSpec{}, false
	}
	return argSpec{name: name, label: name, required: true}, true
}

// askArg asks the dialog's current argument, with the server's completions as options.
func (t *turn) askArg(ctx context.Context, d *contextArgs) error {
	srv := t.e.pack.Server(d.Server)
	if srv == nil {
		t.endDialog()
		return t.sayKey(ctx, "PROMPT_GONE", "prompt", d.Title, "server", d.Server)
	}
	surf, why := t.surface(ctx, srv)
	if why != "" {
		t.endDialog()
		return t.say(ctx, why)
	}
	a, ok := t.spec(surf, d)
	if !ok {
		t.endDialog()
		return t.sayKey(ctx, "PROMPT_GONE", "prompt", d.Title, "server", d.Server)
	}
	skip, cancel := t.tr("CONTEXT_ARG_SKIP"), t.tr("CANCEL")
	var opts []option
	if surf.Completions {
		ref := mcp.CompletionRef{Prompt: d.Prompt, URITemplate: d.Template}
		values, err := t.e.ctxsrc.Complete(ctx, t.s.Identity, d.Server, ref, a.name, "", d.Args)
		if err != nil {
			t.e.log.WarnContext(ctx, "MCP completion", "server", d.Server, "err", err) // asked without suggestions
		}
		for _, v := range values {
			if len(opts) == maxSuggestions {
				break
			}
			if v != skip && v != cancel {
				opts = append(opts, option{Text: v, Value: argValue + v})
			}
		}
	}
	if !a.required {
		opts = append(opts, option{Text: skip, Value: argSkip})
	}
	opts = append(opts, option{Text: cancel, Value: argCancel})
	text := t.tr("CONTEXT_ARG", "name", d.Title, "argument", a.label)
	if desc := firstLine(a.description); desc != "" {
		text += "\n" + desc
	}
	hint := "CONTEXT_ARG_REQUIRED"
	if !a.required {
		hint = "CONTEXT_ARG_OPTIONAL"
	}
	return t.askDialog(ctx, d, text+"\n"+t.tr(hint), opts)
}

// argChosen takes a chosen option: a completion, Skip or Cancel.
func (t *turn) argChosen(ctx context.Context, d *contextArgs, value string) error {
	switch {
	case value == argCancel:
		t.endDialog()
		return t.sayKey(ctx, "CONTEXT_ARGS_CANCELLED")
	case value == argSkip:
		return t.nextArg(ctx, d)
	case strings.HasPrefix(value, argValue):
		d.set(strings.TrimPrefix(value, argValue))
		return t.nextArg(ctx, d)
	}
	return t.sayKey(ctx, "CHOOSE_OPTION")
}

// argTyped takes a typed value (an option's text picks the option; /cancel stops).
func (t *turn) argTyped(ctx context.Context, d *contextArgs, text string) error {
	if strings.EqualFold(text, "/cancel") {
		return t.argChosen(ctx, d, argCancel)
	}
	for _, o := range d.open().Options {
		if strings.EqualFold(o.Text, text) {
			*d.open() = question{}
			return t.argChosen(ctx, d, o.Value)
		}
	}
	if n := utf8.RuneCountInString(text); n > maxArgValue {
		return t.sayKey(ctx, "CONTEXT_ARG_TOO_LONG", "limit", strconv.Itoa(maxArgValue))
	}
	*d.open() = question{}
	d.set(text)
	return t.nextArg(ctx, d)
}

// nextArg asks the next argument, or finishes.
func (t *turn) nextArg(ctx context.Context, d *contextArgs) error {
	d.Index++
	if d.Index < len(d.Order) {
		return t.askArg(ctx, d)
	}
	return t.finishArgs(ctx, d)
}

// finishArgs runs the prompt, or attaches the resource the template expands to.
func (t *turn) finishArgs(ctx context.Context, d *contextArgs) error {
	t.endDialog()
	if d.Prompt != "" {
		return t.runPrompt(ctx, d.Server, d.Prompt, d.Args)
	}
	uri, err := mcp.ExpandTemplate(d.Template, d.Args)
	if err != nil {
		return t.sayKey(ctx, "RESOURCE_UNKNOWN", "resource", d.Template)
	}
	return t.attach(ctx, d.Server, uri, d.Title+" ("+uri+")", attachResource)
}

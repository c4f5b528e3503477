package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/packbot/packbot/mcp"
)

// smokeContextOptions are the smoke test's flags for the server's prompts and resources, which
// it always lists: --get-prompt gets one (with --args), --read reads one.
type smokeContextOptions struct {
	getPrompt string
	read      string
}

func (o *smokeContextOptions) bind(f *pflag.FlagSet) {
	f.StringVar(&o.getPrompt, "get-prompt", "", "prompt to get after listing, with --args as its arguments (a JSON object of strings)")
	f.StringVar(&o.read, "read", "", "resource URI to read after listing")
}

// options turns the flags into the smoke test's; args is --args, which --get-prompt shares with
// --call.
func (o *smokeContextOptions) options(call, args string) (mcp.SmokeContext, error) {
	sc := mcp.SmokeContext{GetPrompt: o.getPrompt, Read: o.read}
	if o.getPrompt == "" {
		return sc, nil
	}
	if call != "" {
		return sc, fmt.Errorf("--call and --get-prompt both take --args: give one of them")
	}
	if err := json.Unmarshal([]byte(args), &sc.PromptArgs); err != nil {
		return sc, fmt.Errorf("--args %q: a prompt's arguments are a JSON object of strings: %w", args, err)
	}
	return sc, nil
}

// printSmokeContext prints the prompts (with their arguments, * marking required ones),
// resources, templates and skills, and the prompt got or the resource read.
func printSmokeContext(w io.Writer, rep *mcp.SmokeReport) {
	if rep == nil || rep.Context == nil {
		return
	}
	s := rep.Context.Surface
	fmt.Fprintf(w, "%d prompt(s), %d resource(s), %d template(s), %d skill(s); completions %s, subscriptions %s\n",
		len(s.Prompts), len(s.Resources), len(s.Templates), len(s.Skills), yesNo(s.Completions), yesNo(s.Subscribe))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range s.Prompts {
		args := make([]string, len(p.Arguments))
		for i, a := range p.Arguments {
			args[i] = a.Name
			if a.Required {
				args[i] += "*"
			}
		}
		fmt.Fprintf(tw, "  prompt %s\t(%s)\t%s\n", p.Name, strings.Join(args, ", "), oneLine(p.Description, 60))
	}
	for _, r := range s.Resources {
		fmt.Fprintf(tw, "  resource %s\t%s\t%s\n", r.URI, r.MIMEType, oneLine(r.Label(), 60))
	}
	for _, t := range s.Templates {
		fmt.Fprintf(tw, "  template %s\t%s\t%s\n", t.URITemplate, t.MIMEType, oneLine(t.Label(), 60))
	}
	for _, k := range s.Skills {
		fmt.Fprintf(tw, "  skill %s\t%s\t%s\n", k.Name, k.URI, oneLine(k.Description, 60))
	}
	_ = tw.Flush()
	if p := rep.Context.Prompt; p != nil {
		fmt.Fprintf(w, "prompt: %d message(s)\n", len(p.Messages))
		for _, m := range p.Messages {
			text := m.Text
			if r := m.Resource; r != nil {
				text = contentsLine(*r)
			}
			fmt.Fprintf(w, "  %s: %s\n", m.Role, text)
		}
	}
	for _, c := range rep.Context.Contents {
		fmt.Fprintf(w, "read: %s\n", contentsLine(c))
		if !c.Binary {
			fmt.Fprintln(w, c.Text)
		}
	}
}

// contentsLine describes resource contents in one line.
func contentsLine(c mcp.ResourceContents) string {
	kind := "text"
	if c.Binary {
		kind = "binary"
	}
	return fmt.Sprintf("[resource %s, %s %s, %d bytes]", c.URI, kind, c.MIMEType, c.Size)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

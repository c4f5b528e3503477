package main

import (
	"context"
	"fmt"
	"io"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/packs/namecheck"
)

// checkPackNames lists the tools of each enabled admin-controlled server of p (as mcp smoke
// does, with packbot's own token where the server takes one) and prints a problem for each name
// a rule uses that the server does not list, naming the rule's field and the server's closest
// tool: an error for a rule that restricts access (an approval policy; adminOnly in the legacy
// model), on which serve offers none of that server's tools; a warning otherwise. A server that
// cannot be listed now, or a user-controlled one, is said to be unchecked (serve checks it when
// it first lists its tools). With restrictingOnly, only the servers that have a rule restricting
// access by name are contacted (pack apply: only those can stop a pack). It returns the number
// of errors.
func checkPackNames(ctx context.Context, a *app, p *packs.Pack, w io.Writer, restrictingOnly bool) (int, error) {
	machine, err := machineFor(a, p)
	if err != nil {
		return 0, err
	}
	errs := 0
	for i := range p.MCP.Servers {
		s := p.MCP.Servers[i]
		path := fmt.Sprintf("mcp.servers[%d]", i)
		switch {
		case !s.Enabled, restrictingOnly && !namecheck.Restricts(&s):
			continue
		case s.UserControlled():
			fmt.Fprintf(w, "%s: note: %s: names not checked against %s: user-controlled (serve checks them when a user's session first lists its tools)\n", p.Source, path, s.Name)
			continue
		}
		rep, err := mcp.Smoke(ctx, s, mcp.SmokeOptions{Logger: a.logger, Machine: machineOrNil(machine)})
		if err != nil {
			fmt.Fprintf(w, "%s: note: %s: names not checked against %s: could not list its tools: %s\n", p.Source, path, s.Name, oneLine(smokeReason(err, s), 300))
			continue
		}
		for _, f := range namecheck.Check(&s, rep.Offered()) {
			pr := packs.Problem{Severity: packs.Warning, Pos: packs.Pos{File: p.Source}, Path: path + "." + f.Field, Message: findingMessage(f)}
			if f.Blocking {
				pr.Severity = packs.Error
				errs++
			}
			fmt.Fprintln(w, pr)
		}
	}
	return errs, nil
}

// findingMessage says what is wrong with a name, without the field (the problem's path has it).
func findingMessage(f namecheck.Finding) string {
	msg := fmt.Sprintf("%s %q is not a %s of MCP server %s", f.Kind, f.Name, f.Kind, f.Server)
	if f.Closest != "" {
		msg += fmt.Sprintf(" (closest: %s)", f.Closest)
	}
	if f.Blocking {
		msg += "; this rule restricts access, so serve offers none of the server's tools until the name is fixed"
	}
	return msg
}

// refuseUnknownNames is pack apply's check of the pack's names against the servers with rules
// that restrict access by name (approval policies): with an error among them nothing is applied
// (exit status 1). The other servers' names are validate --connect's and doctor's to report.
func refuseUnknownNames(ctx context.Context, a *app, p *packs.Pack, source string) error {
	n, err := checkPackNames(ctx, a, p, a.stdout, true)
	if err != nil {
		return err
	}
	if n > 0 {
		fmt.Fprintf(a.stdout, "%s: %d rule(s) name tools their server does not have: not applied\n", source, n)
		return exitError{code: 1}
	}
	return nil
}

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/packbot/packbot/rbac"
)

// explainContext fills the prompts and resources of one server's explain output: the ones the
// pack's promptAccess and resourceAccess name (those the caller may not use only with all), and
// the decision for those they do not name.
func explainContext(s *explainServer, r rbac.ServerReport, all bool) {
	s.Prompts, s.Resources = []explainTool{}, []explainTool{}
	for _, p := range r.Prompts {
		if p.Decision.Effect != rbac.Deny || all {
			s.Prompts = append(s.Prompts, toExplainTool(p.Tool, p.Decision))
		}
	}
	for _, res := range r.Resources {
		if res.Decision.Effect != rbac.Deny || all {
			s.Resources = append(s.Resources, toExplainTool(res.Tool, res.Decision))
		}
	}
	s.OtherPrompts, s.OtherResources = toExplainTool("", r.OtherPrompts), toExplainTool("", r.OtherResources)
}

// printContext prints a server's prompts and resources, beside its tools.
func printContext(w io.Writer, s explainServer) {
	for _, p := range s.Prompts {
		fmt.Fprintf(w, "  %s\tprompt %s\t%s\n", strings.ToUpper(p.Effect), p.Tool, p.Reason)
	}
	fmt.Fprintf(w, "  other prompts the server offers: %s (%s)\n", strings.ToUpper(s.OtherPrompts.Effect), s.OtherPrompts.Reason)
	for _, r := range s.Resources {
		fmt.Fprintf(w, "  %s\tresource %s\t%s\n", strings.ToUpper(r.Effect), r.Tool, r.Reason)
	}
	fmt.Fprintf(w, "  other resources and skills the server offers: %s (%s)\n", strings.ToUpper(s.OtherResources.Effect), s.OtherResources.Reason)
}

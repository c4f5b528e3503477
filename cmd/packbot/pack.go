package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/mcp/oauth"
	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
)

func newPackCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pack",
		Short: "Check an agent pack, explain what each role may do, swap it into the running bot",
		Long: `Commands for agent packs (agent-pack.yaml).

PATH is a pack file or a folder holding agent-pack.yaml, .yml or .json. Without PATH the pack
is found as 'serve' finds it: AGENT_PACK_PATH, then ./agent-packs, then the embedded demo pack.
${NAME} placeholders are expanded from the environment and .env, exactly as 'serve' does.`,
	}
	cmd.AddCommand(newPackValidateCmd(a), newPackExplainCmd(a), newPackApplyCmd(a), newPackStatusCmd(a))
	return cmd
}

func newPackValidateCmd(a *app) *cobra.Command {
	var ch channelOptions
	var connect bool
	cmd := &cobra.Command{
		Use:   "validate [PATH]",
		Short: "Report every problem of a pack at once, with file:line and field path",
		Long: `Report every problem of a pack at once, with file:line and field path, including what
the wallet channel the pack would run on cannot do (the channel is chosen as 'serve' chooses
it: --channel, PACKBOT_CHANNEL, vsagent when VS_AGENT_ADMIN_URL is set, else didcomm).

With --connect it also lists the tools of each enabled admin-controlled server (as 'mcp smoke'
does) and reports every tool a rule names that its server does not have, with the server's
closest tool: an error for an approval policy (serve would offer none of that server's tools:
the real tool would run ungated), a warning for a role's list or the allowlist.`,
		Example: `  packbot pack validate packs/wise-corporate
  WISE_MCP_URL=https://wise.example/mcp packbot pack validate ./agent-pack.yaml
  packbot pack validate --channel vsagent ./hologram-pack
  packbot pack validate --connect packs/wise-corporate`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPackValidate(cmd.Context(), a, firstArg(args), ch.resolve(a), connect)
		},
	}
	cmd.Flags().StringVar(&ch.kind, "channel", "", "the wallet channel to check the pack for: didcomm or vsagent (default as serve)")
	cmd.Flags().BoolVar(&connect, "connect", false, "also check the tools the rules name against each admin-controlled server's list")
	return cmd
}

func firstArg(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return ""
}

// loadPack loads a pack and prints its problems; an invalid pack returns exitError{1}.
func (a *app) loadPack(path string, w io.Writer) (*packs.Pack, error) {
	_, _, p, err := a.readPack(path, w)
	return p, err
}

// printInvalid prints the problems of an invalid pack, one per line, and a summary.
func printInvalid(w io.Writer, inv *packs.InvalidError) {
	for _, pr := range inv.Problems {
		fmt.Fprintln(w, pr)
	}
	for _, pr := range inv.Warnings {
		fmt.Fprintln(w, pr)
	}
	fmt.Fprintf(w, "%s: invalid: %d error(s), %d warning(s)\n", inv.Source, len(inv.Problems), len(inv.Warnings))
}

func runPackValidate(ctx context.Context, a *app, path, channelKind string, connect bool) error {
	p, err := a.loadPack(path, a.stdout)
	if err != nil {
		return err
	}
	if problem := channelProblem(p, channelKind); problem != "" {
		for _, w := range p.Warnings {
			fmt.Fprintln(a.stdout, w)
		}
		fmt.Fprintln(a.stdout, problem)
		fmt.Fprintf(a.stdout, "%s: invalid on the %s channel: 1 error(s), %d warning(s)\n", p.Source, channelKind, len(p.Warnings))
		return exitError{code: 1}
	}
	for _, w := range p.Warnings {
		fmt.Fprintln(a.stdout, w)
	}
	if connect {
		n, err := checkPackNames(ctx, a, p, a.stdout, false)
		if err != nil {
			return err
		}
		if n > 0 {
			fmt.Fprintf(a.stdout, "%s: invalid against its MCP servers: %d error(s)\n", p.Source, n)
			return exitError{code: 1}
		}
	}
	_, err = fmt.Fprintf(a.stdout, "%s: ok: %d MCP server(s), %d language(s), %d warning(s)\n",
		p.Source, len(p.MCP.Servers), len(p.Languages), len(p.Warnings))
	return err
}

type explainOptions struct {
	roles    []string
	identity string
	name     string
	all      bool
	json     bool
	connect  bool
}

func newPackExplainCmd(a *app) *cobra.Command {
	var o explainOptions
	cmd := &cobra.Command{
		Use:   "explain [PATH]",
		Short: "Print, per MCP server, the tools, prompts and resources a caller gets and which tools need approval by whom",
		Long: `Explain applies the pack's access rules (docs/agent-pack.md, "Access rules") to one caller: for each MCP
server, the tools the pack names that the caller may use, which of them need approval and by
which roles (or run at once because the caller may approve them), and what happens to tools the
pack does not name; and the prompts and resources (skills included) its promptAccess and
resourceAccess let the caller use. Without --roles, --identity and --name the caller is an unauthenticated
guest (role "guest").`,
		Example: `  packbot pack explain packs/wise-corporate --roles employee,finance
  packbot pack explain packs/wise-corporate --identity cto@acme.corp
  packbot pack explain packs/wise-corporate --roles guest --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPackExplain(cmd.Context(), a, firstArg(args), o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.roles, "roles", nil, "the caller's roles, comma-separated (the credential's roles attribute)")
	f.StringVar(&o.identity, "identity", "", "the caller's identity (userIdentityAttribute), matched against adminUsers")
	f.StringVar(&o.name, "name", "", "the caller's display name, matched against the legacy adminAvatars")
	f.BoolVar(&o.all, "all", false, "also list the named tools the caller does not get, with the reason")
	f.BoolVar(&o.json, "json", false, "print JSON instead of text")
	f.BoolVar(&o.connect, "connect", false, "also connect to each enabled admin-controlled server and list the tools it offers that packbot does not, with the reason")
	return cmd
}

// explainTool is one line of explain output, also its JSON shape.
type explainTool struct {
	Tool           string   `json:"tool"`
	Effect         string   `json:"effect"`
	Reason         string   `json:"reason"`
	Approvers      []string `json:"approvers,omitempty"`
	Quorum         int      `json:"quorum,omitempty"`
	TimeoutMinutes float64  `json:"timeoutMinutes,omitempty"`
	SelfApprove    bool     `json:"selfApprove,omitempty"`
}

type explainServer struct {
	Name       string        `json:"name"`
	Transport  string        `json:"transport"`
	AccessMode string        `json:"accessMode"`
	Enabled    bool          `json:"enabled"`
	Tools      []explainTool `json:"tools"`
	Others     explainTool   `json:"others"`
	// Prompts and Resources are the prompts and resources (skills included) the pack names for
	// the server, OtherPrompts and OtherResources the decision for the others (pack_context.go).
	Prompts        []explainTool `json:"prompts"`
	Resources      []explainTool `json:"resources"`
	OtherPrompts   explainTool   `json:"otherPrompts"`
	OtherResources explainTool   `json:"otherResources"`
	// NotOffered (with --connect) are the tools the server lists that packbot does not offer.
	NotOffered []explainTool `json:"notOffered,omitempty"`
	// Connect (with --connect) says why the server could not be listed, or was not contacted.
	Connect string `json:"connect,omitempty"`
}

type explainOutput struct {
	Pack          string          `json:"pack"`
	Source        string          `json:"source"`
	Authenticated bool            `json:"authenticated"`
	Admin         bool            `json:"admin"`
	Roles         []string        `json:"roles"`
	GuestsBlocked bool            `json:"guestsBlocked"`
	Servers       []explainServer `json:"servers"`
}

func runPackExplain(ctx context.Context, a *app, path string, o explainOptions) error {
	p, err := a.loadPack(path, a.stderr)
	if err != nil {
		return err
	}
	roles := rbac.ParseRoles(o.roles)
	c := rbac.Caller{Identity: o.identity, DisplayName: o.name, Roles: roles}
	// Naming the guest role alone, or nothing at all, describes an unauthenticated caller.
	c.Authenticated = o.identity != "" || o.name != "" || !(len(roles) == 0 || (len(roles) == 1 && roles[0] == packs.GuestRole))
	e := rbac.New(p)
	var machine *oauth.Machine
	if o.connect {
		if machine, err = machineFor(a, p); err != nil {
			return err
		}
	}
	out := explainOutput{
		Pack: p.Metadata.ID, Source: p.Source, Authenticated: c.Authenticated, Admin: e.IsAdmin(c), Roles: e.Roles(c),
		GuestsBlocked: !c.Authenticated && p.Flows.Authentication.Required,
	}
	for _, r := range e.Explain(c) {
		s := explainServer{Name: r.Server.Name, Transport: r.Server.Transport, AccessMode: r.Server.AccessMode,
			Enabled: r.Server.Enabled, Tools: []explainTool{}, Others: toExplainTool("", r.Others)}
		for _, t := range r.Tools {
			if t.Decision.Effect != rbac.Deny || o.all {
				s.Tools = append(s.Tools, toExplainTool(t.Tool, t.Decision))
			}
		}
		sort.SliceStable(s.Tools, func(i, j int) bool { return effectRank(s.Tools[i].Effect) < effectRank(s.Tools[j].Effect) })
		explainContext(&s, r, o.all)
		if o.connect {
			s.NotOffered, s.Connect = notOffered(ctx, a, *r.Server, machine)
		}
		out.Servers = append(out.Servers, s)
	}
	if o.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return printExplain(a.stdout, out)
}

// notOffered lists the tools a server offers that packbot leaves out, with the reason (or why
// the server was not listed).
func notOffered(ctx context.Context, a *app, s packs.Server, machine *oauth.Machine) ([]explainTool, string) {
	switch {
	case !s.Enabled:
		return nil, ""
	case s.UserControlled():
		return nil, "not contacted: user-controlled (try packbot mcp smoke with a user's --header)"
	}
	rep, err := mcp.Smoke(ctx, s, mcp.SmokeOptions{Logger: a.logger, Machine: machineOrNil(machine)})
	if err != nil {
		return nil, "could not list its tools: " + smokeReason(err, s)
	}
	out := make([]explainTool, 0, len(rep.LeftOut))
	for _, l := range rep.LeftOut {
		out = append(out, explainTool{Tool: l.Name, Effect: "not-offered", Reason: l.Reason})
	}
	return out, ""
}

func toExplainTool(name string, d rbac.Decision) explainTool {
	t := explainTool{Tool: name, Effect: d.Effect.String(), Reason: d.Reason, SelfApprove: d.SelfApprove}
	if d.Policy != nil {
		t.Approvers, t.Quorum, t.TimeoutMinutes = d.Policy.Approvers, d.Policy.Quorum, d.Policy.TimeoutMinutes
	}
	return t
}

func effectRank(e string) int {
	switch e {
	case "allow":
		return 0
	case "approval":
		return 1
	}
	return 2
}

func printExplain(w io.Writer, out explainOutput) error {
	who := "guest (not authenticated), role guest"
	if out.Authenticated {
		who = "authenticated, roles " + orNone(out.Roles)
	}
	if out.Admin {
		who += "; admin (adminUsers): every tool, no approval"
	}
	fmt.Fprintf(w, "pack %s (%s)\ncaller: %s\n", out.Pack, out.Source, who)
	if out.GuestsBlocked {
		fmt.Fprintln(w, "note: authentication is required by this pack, so a guest cannot chat at all")
	}
	for _, s := range out.Servers {
		state := ""
		if !s.Enabled {
			state = ", disabled"
		}
		fmt.Fprintf(w, "\nserver %s (%s, %s%s)\n", s.Name, s.Transport, s.AccessMode, state)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		if len(s.Tools) == 0 {
			fmt.Fprintln(tw, "  (no tool named in the pack is available)")
		}
		for _, t := range s.Tools {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", strings.ToUpper(t.Effect), t.Tool, describeTool(t, out.Roles))
		}
		fmt.Fprintf(tw, "  other tools the server offers: %s (%s)\n", strings.ToUpper(s.Others.Effect), s.Others.Reason)
		printContext(tw, s)
		for _, t := range s.NotOffered {
			fmt.Fprintf(tw, "  NOT OFFERED\t%s\t%s\n", t.Tool, t.Reason)
		}
		if s.Connect != "" {
			fmt.Fprintf(tw, "  (%s)\n", s.Connect)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func describeTool(t explainTool, roles []string) string {
	if t.Effect != "approval" {
		return t.Reason
	}
	if t.SelfApprove {
		var held []string
		for _, r := range t.Approvers {
			if slices.Contains(roles, r) {
				held = append(held, r)
			}
		}
		return "self-approved: the caller holds " + strings.Join(held, ", ") + " (approvers: " + strings.Join(t.Approvers, " or ") + "), runs at once"
	}
	d := "needs approval from " + strings.Join(t.Approvers, " or ")
	if t.Quorum > 1 {
		d += fmt.Sprintf(" (%d distinct approvers)", t.Quorum)
	}
	return d + fmt.Sprintf(", expires after %g min", t.TimeoutMinutes)
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "(none)"
	}
	return strings.Join(list, ", ")
}

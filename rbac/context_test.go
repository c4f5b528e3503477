package rbac_test

import (
	"testing"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/rbac"
)

const contextPack = `
flows:
  authentication:
    adminUsers: [root@acme.corp]
mcp:
  servers:
    - name: hr
      url: http://mcp.invalid/mcp
      promptAccess:
        roles:
          hr: [review_prepared_write, plan_safe_lookup]
          guest: [public_help]
      resourceAccess:
        roles:
          hr: ["hollyhr://guides/*", "hollyhr://operations/{operation}"]
          auditor: [hollyhr://policies/data-handling]
    - name: open
      url: http://mcp.invalid/mcp
      promptAccess: {default: all, roles: {manager: [secret_prompt]}}
      resourceAccess: {default: all}
    - name: bare
      url: http://mcp.invalid/mcp
    - name: off
      url: http://mcp.invalid/mcp
      enabled: false
      promptAccess: {default: all}
`

func TestContextDecisions(t *testing.T) {
	p, err := packs.Parse("t.yaml", []byte(contextPack), packs.MapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	e := rbac.New(p)
	hr := rbac.Caller{Identity: "ana@acme.corp", Roles: []string{"hr"}, Authenticated: true}
	emp := rbac.Caller{Identity: "bob@acme.corp", Roles: []string{"employee"}, Authenticated: true}
	admin := rbac.Caller{Identity: "root@acme.corp", Authenticated: true}
	guest := rbac.Caller{}
	prompts := []struct {
		c            rbac.Caller
		server, name string
		want         rbac.Effect
	}{
		{hr, "hr", "review_prepared_write", rbac.Allow},
		{emp, "hr", "review_prepared_write", rbac.Deny}, // listed under other roles only
		{emp, "hr", "unlisted", rbac.Deny},              // default none
		{guest, "hr", "public_help", rbac.Allow},        // the guest role
		{admin, "hr", "anything", rbac.Allow},           // admins may use every prompt
		{admin, "bare", "anything", rbac.Allow},         // ... of a server without rules too
		{hr, "bare", "anything", rbac.Deny},             // no promptAccess: none for users
		{emp, "open", "anything", rbac.Allow},           // default all
		{guest, "open", "anything", rbac.Deny},          // ... for authenticated users only
		{emp, "open", "secret_prompt", rbac.Deny},       // granted to other roles only
		{admin, "off", "anything", rbac.Deny},           // disabled server
		{admin, "nope", "anything", rbac.Deny},          // unknown server
		{hr, "hr", "", rbac.Deny},                       // nothing named
	}
	for _, tt := range prompts {
		if got := e.DecidePrompt(tt.c, tt.server, tt.name); got.Effect != tt.want {
			t.Errorf("DecidePrompt(%v, %s, %s) = %v (%s), want %v", tt.c.Roles, tt.server, tt.name, got.Effect, got.Reason, tt.want)
		}
	}
	resources := []struct {
		c           rbac.Caller
		server, uri string
		want        rbac.Effect
	}{
		{hr, "hr", "hollyhr://guides/safe-write-workflow", rbac.Allow},
		{hr, "hr", "hollyhr://operations/update_person", rbac.Allow},
		{hr, "hr", "hollyhr://operations/update_person/extra", rbac.Deny},
		{hr, "hr", "hollyhr://policies/data-handling", rbac.Deny},
		{rbac.Caller{Identity: "a", Roles: []string{"auditor"}, Authenticated: true}, "hr", "hollyhr://policies/data-handling", rbac.Allow},
		{admin, "hr", "hollyhr://reference/openapi", rbac.Allow},
		{hr, "bare", "x://y", rbac.Deny},
		{emp, "open", "x://y", rbac.Allow},
	}
	for _, tt := range resources {
		if got := e.DecideResource(tt.c, tt.server, tt.uri); got.Effect != tt.want {
			t.Errorf("DecideResource(%v, %s, %s) = %v (%s), want %v", tt.c.Roles, tt.server, tt.uri, got.Effect, got.Reason, tt.want)
		}
	}
	if d := e.DecideTemplate(hr, "hr", "hollyhr://operations/{operation}"); d.Effect != rbac.Allow {
		t.Errorf("template granted by name: %v", d)
	}
	if d := e.DecideTemplate(hr, "hr", "hollyhr://guides/{name}"); d.Effect != rbac.Allow {
		t.Errorf("template under a granted prefix: %v", d)
	}
	if d := e.DecideTemplate(hr, "hr", "hollyhr://people/{id}"); d.Effect != rbac.Deny {
		t.Errorf("template nobody names: %v", d)
	}
}

func TestExplainContext(t *testing.T) {
	p, err := packs.Parse("t.yaml", []byte(contextPack), packs.MapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	reps := rbac.New(p).Explain(rbac.Caller{Identity: "ana", Roles: []string{"hr"}, Authenticated: true})
	hr := reps[0]
	if len(hr.Prompts) != 3 || hr.Prompts[0].Tool != "plan_safe_lookup" || hr.Prompts[0].Decision.Effect != rbac.Allow ||
		hr.Prompts[1].Tool != "public_help" || hr.Prompts[1].Decision.Effect != rbac.Deny {
		t.Errorf("prompts = %+v", hr.Prompts)
	}
	if len(hr.Resources) != 3 || hr.Resources[0].Tool != "hollyhr://guides/*" || hr.Resources[0].Decision.Effect != rbac.Allow ||
		hr.Resources[2].Tool != "hollyhr://policies/data-handling" || hr.Resources[2].Decision.Effect != rbac.Deny {
		t.Errorf("resources = %+v", hr.Resources)
	}
	if hr.OtherPrompts.Effect != rbac.Deny || hr.OtherResources.Effect != rbac.Deny {
		t.Errorf("others = %v %v", hr.OtherPrompts, hr.OtherResources)
	}
	if open := reps[1]; open.OtherPrompts.Effect != rbac.Allow || open.OtherResources.Effect != rbac.Allow {
		t.Errorf("default all: others = %v %v", open.OtherPrompts, open.OtherResources)
	}
}

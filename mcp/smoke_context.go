package mcp

import (
	"context"
	"fmt"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/packbot/packbot/packs/namecheck"
)

// SmokeContext asks a smoke test for the rest of the server's surface: its prompts (with their
// arguments), resources, templates and skills are always listed; GetPrompt gets one prompt with
// PromptArgs; Read reads one resource.
type SmokeContext struct {
	GetPrompt  string
	PromptArgs map[string]string
	Read       string
}

// SmokeSurface is what a smoke test saw of the surface besides tools.
type SmokeSurface struct {
	Surface Surface
	// Prompt and Contents are the prompt got and the resource read, when asked.
	Prompt   *PromptResult
	Contents []ResourceContents
}

// Offered is what the smoke test saw the server offer, for checking the names a pack's rules
// use: its tools, and its prompts and resources (URIs, templates, skills) when they were listed.
func (r *SmokeReport) Offered() namecheck.Offered {
	o := namecheck.Offered{namecheck.Tool: r.ToolNames}
	if r.Context != nil {
		o[namecheck.Prompt], o[namecheck.Resource] = r.Context.Surface.names()
	}
	return o
}

// smokeContext lists the session's prompts, resources, templates and skills, and gets the prompt
// or reads the resource asked, timing each step into rep.
func smokeContext(ctx context.Context, now func() time.Time, c *conn, sess *mcpsdk.ClientSession, o SmokeContext, rep *SmokeReport) error {
	step := func(name string, start time.Time) {
		rep.Steps = append(rep.Steps, SmokeStep{Name: name, Took: now().Sub(start)})
	}
	rep.Context = &SmokeSurface{}
	start := now()
	lctx, cancel := context.WithTimeout(ctx, c.timeout())
	surf, err := c.listSurface(lctx, sess)
	cancel()
	step("list prompts, resources and templates", start)
	rep.Context.Surface = surf
	if err != nil {
		return fmt.Errorf("list prompts and resources: %w", err)
	}
	if o.GetPrompt != "" {
		start = now()
		gctx, cancel := context.WithTimeout(ctx, c.timeout())
		res, err := sess.GetPrompt(gctx, &mcpsdk.GetPromptParams{Name: o.GetPrompt, Arguments: o.PromptArgs})
		step("get prompt "+o.GetPrompt, start)
		if err != nil {
			err = classify(gctx, err, &c.obs)
			cancel()
			return fmt.Errorf("get prompt %s: %w", o.GetPrompt, err)
		}
		cancel()
		pr := toPromptResult(res)
		rep.Context.Prompt = &pr
	}
	if o.Read != "" {
		start = now()
		rctx, cancel := context.WithTimeout(ctx, c.timeout())
		res, err := sess.ReadResource(rctx, &mcpsdk.ReadResourceParams{URI: o.Read})
		step("read "+o.Read, start)
		if err != nil {
			err = classify(rctx, err, &c.obs)
			cancel()
			return fmt.Errorf("read %s: %w", o.Read, err)
		}
		cancel()
		rep.Context.Contents = toContents(res.Contents)
	}
	return nil
}

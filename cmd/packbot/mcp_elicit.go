package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"

	"github.com/packbot/packbot/mcp"
)

// What mcp smoke answers the server's questions (--elicit) when nobody can be asked.
const (
	elicitDecline  = "decline"
	elicitDefaults = "defaults"
)

// smokeAsker answers what a server asks during mcp smoke's call: on a terminal (and without
// --elicit) it asks the person field by field; otherwise it declines, or accepts the form's
// defaults (--elicit defaults). It implements [mcp.Asker]; mcp calls it on the session's
// goroutine while the call waits, one question at a time.
type smokeAsker struct {
	mode string // elicitDecline, elicitDefaults, or "" to ask on the terminal
	in   *bufio.Reader
	out  io.Writer
	// failure, when set, fails the smoke test: --elicit defaults met a required field without a
	// default (the server was told the form was declined).
	failure error
}

// newSmokeAsker asks on the terminal when stdin is one and --elicit is not given.
func newSmokeAsker(a *app, mode string) *smokeAsker {
	s := &smokeAsker{mode: mode, out: a.stderr}
	if mode == "" {
		s.mode = elicitDecline
		if in := os.Stdin; isatty.IsTerminal(in.Fd()) || isatty.IsCygwinTerminal(in.Fd()) {
			s.mode, s.in = "", bufio.NewReader(in)
		}
	}
	return s
}

// Elicit answers one question of the server.
func (s *smokeAsker) Elicit(_ context.Context, e mcp.Elicitation) (mcp.ElicitResult, error) {
	fmt.Fprintf(s.out, "\nThe server %s asks (during %s): %s\n", e.Server, e.Tool, oneLine(e.Message, 500))
	switch {
	case s.mode == elicitDefaults && e.Mode == mcp.ElicitForm:
		return s.defaults(e)
	case s.mode != "":
		fmt.Fprintf(s.out, "declined (--elicit %s)\n", s.mode)
		return mcp.ElicitResult{Action: mcp.ActionDecline}, nil
	case e.Mode == mcp.ElicitURL:
		fmt.Fprintf(s.out, "It asks you to open: %s\n", e.URL)
		return s.decide("Opened it and done? [a]ccept, [d]ecline, [c]ancel (a): ")
	}
	res, err := s.decide("[a]nswer, [d]ecline, [c]ancel (a): ")
	if err != nil || res.Action != mcp.ActionAccept {
		return res, err
	}
	content := make(map[string]any, len(e.Fields))
	for _, f := range e.Fields {
		v, ok, err := s.field(f)
		if err != nil {
			return mcp.ElicitResult{}, err
		}
		if ok {
			content[f.Name] = v
		}
	}
	return mcp.ElicitResult{Action: mcp.ActionAccept, Content: content}, nil
}

// defaults accepts the form filled with its defaults (--elicit defaults), or declines it when a
// required field has none, which fails the smoke test.
func (s *smokeAsker) defaults(e mcp.Elicitation) (mcp.ElicitResult, error) {
	content := make(map[string]any, len(e.Fields))
	var missing []string
	for _, f := range e.Fields {
		switch {
		case f.Default != nil:
			content[f.Name] = f.Default
		case f.Required:
			missing = append(missing, f.Name)
		}
	}
	if len(missing) > 0 {
		s.failure = fmt.Errorf("--elicit defaults: the server's form has required field(s) without a default: %s (it was declined; answer on a terminal instead)",
			strings.Join(missing, ", "))
		fmt.Fprintln(s.out, "declined: required field(s) without a default:", strings.Join(missing, ", "))
		return mcp.ElicitResult{Action: mcp.ActionDecline}, nil
	}
	fmt.Fprintf(s.out, "accepted with the form's defaults (--elicit defaults): %d field(s)\n", len(content))
	return mcp.ElicitResult{Action: mcp.ActionAccept, Content: content}, nil
}

// decide reads accept, decline or cancel (Enter: accept).
func (s *smokeAsker) decide(prompt string) (mcp.ElicitResult, error) {
	for {
		line, err := s.line(prompt)
		if err != nil {
			return mcp.ElicitResult{}, err
		}
		switch strings.ToLower(line) {
		case "", "a", "accept", "answer", "y", "yes":
			return mcp.ElicitResult{Action: mcp.ActionAccept}, nil
		case "d", "decline", "n", "no":
			return mcp.ElicitResult{Action: mcp.ActionDecline}, nil
		case "c", "cancel":
			return mcp.ElicitResult{Action: mcp.ActionCancel}, nil
		}
	}
}

// field asks one field until the answer fits it. Enter keeps the default, or skips an optional
// field without one; ok is false when skipped.
func (s *smokeAsker) field(f mcp.ElicitField) (v any, ok bool, err error) {
	if f.Description != "" {
		fmt.Fprintf(s.out, "  %s\n", oneLine(f.Description, 200))
	}
	for {
		line, err := s.line(fieldPrompt(f))
		switch {
		case err != nil:
			return nil, false, err
		case line == "" && f.Default != nil:
			return f.Default, true, nil
		case line == "" && !f.Required:
			return nil, false, nil
		case line == "":
			fmt.Fprintln(s.out, "  required")
			continue
		}
		v, err := f.Parse(line)
		var fe *mcp.FieldError
		if errors.As(err, &fe) {
			fmt.Fprintf(s.out, "  %v\n", fe)
			continue
		}
		return v, err == nil, err
	}
}

// fieldPrompt is "Label (type, choices) [default]: ".
func fieldPrompt(f mcp.ElicitField) string {
	var b strings.Builder
	b.WriteString(f.Label())
	what := f.Type
	if len(f.Enum) > 0 {
		what = strings.Join(f.EnumTitles, " | ")
		if f.Type == mcp.FieldArray {
			what = "some of, comma-separated: " + what
		}
	}
	if !f.Required {
		what += ", optional"
	}
	fmt.Fprintf(&b, " (%s)", what)
	if f.Default != nil {
		fmt.Fprintf(&b, " [%s]", f.FormatValue(f.Default))
	}
	b.WriteString(": ")
	return b.String()
}

// line prints prompt and reads one line of the person's answer.
func (s *smokeAsker) line(prompt string) (string, error) {
	fmt.Fprint(s.out, prompt)
	line, err := s.in.ReadString('\n')
	if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
		return "", fmt.Errorf("read the answer from the terminal: %w", err)
	}
	return strings.TrimSpace(line), nil
}

// Progress shows a progress notification of the call.
func (s *smokeAsker) Progress(_ context.Context, p mcp.Progress) {
	switch {
	case p.Total > 0:
		fmt.Fprintf(s.out, "progress %g/%g %s\n", p.Progress, p.Total, p.Message)
	default:
		fmt.Fprintf(s.out, "progress %g %s\n", p.Progress, p.Message)
	}
}

// Sampled never happens: smoke has no language model, so it does not declare sampling.
func (s *smokeAsker) Sampled(context.Context, string) {}

// Interface guard.
var _ mcp.Asker = (*smokeAsker)(nil)

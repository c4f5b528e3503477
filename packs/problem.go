package packs

import (
	"fmt"
	"sort"
	"strings"
)

// Severity of a [Problem].
type Severity int

const (
	// Error problems make the pack invalid.
	Error Severity = iota
	// Warning problems are reported and the pack still loads.
	Warning
)

// Pos is where a value was written: a file and a 1-based line and column, or an environment
// variable (File is "$NAME", Line 0).
type Pos struct {
	File   string
	Line   int
	Column int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Column == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// Problem is one thing wrong with a pack, with where it was written and the field path
// (mcp.servers[0].headers.Authorization).
type Problem struct {
	Severity Severity
	Pos      Pos
	Path     string
	Message  string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Pos.String())
	b.WriteString(": ")
	if p.Severity == Warning {
		b.WriteString("warning: ")
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// InvalidError is returned by [Load] when a pack has errors: all of them, in file order, each
// with its position and field path.
type InvalidError struct {
	Source   string
	Problems []Problem // errors only; warnings are in Warnings
	Warnings []Problem
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid agent pack %s: %d problem(s)", e.Source, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// problems collects problems while a pack is loaded.
type problems struct {
	list []Problem
}

func (ps *problems) add(sev Severity, pos Pos, path, format string, args ...any) {
	ps.list = append(ps.list, Problem{Severity: sev, Pos: pos, Path: path, Message: fmt.Sprintf(format, args...)})
}

// split returns errors and warnings, each sorted by position.
func (ps *problems) split() (errs, warns []Problem) {
	sorted := append([]Problem(nil), ps.list...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i].Pos, sorted[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	for _, p := range sorted {
		if p.Severity == Error {
			errs = append(errs, p)
		} else {
			warns = append(warns, p)
		}
	}
	return errs, warns
}

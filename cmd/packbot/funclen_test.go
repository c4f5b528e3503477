package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a non-test function of this package may be (issue 23): a longer
// one does several things, which get names of their own.
const maxFuncLines = 80

// TestFunctionsShort: no non-test function (or function literal) of cmd/packbot or of bot (the
// pipeline) is longer than maxFuncLines lines, its signature and closing brace included; the
// longest is logged.
func TestFunctionsShort(t *testing.T) {
	var files []string
	for _, pattern := range []string{"*.go", "../../bot/*.go"} {
		fs, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	fset := token.NewFileSet()
	longest, longestName := 0, ""
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			var name string
			switch d := n.(type) {
			case *ast.FuncDecl:
				name = d.Name.Name
			case *ast.FuncLit:
				name = "func literal"
			default:
				return true
			}
			from, to := fset.Position(n.Pos()), fset.Position(n.End())
			lines := to.Line - from.Line + 1
			if lines > longest {
				longest, longestName = lines, from.String()+" "+name
			}
			if lines > maxFuncLines {
				t.Errorf("%s %s: %d lines, more than %d: split it into steps with names", from, name, lines, maxFuncLines)
			}
			return true
		})
	}
	t.Logf("longest: %s, %d lines", longestName, longest)
}

package mcp

import (
	"fmt"

	"github.com/yosida95/uritemplate/v3"
)

// templateVariables returns the variable names of an RFC 6570 template, in order.
func templateVariables(tmpl string) ([]string, error) {
	t, err := uritemplate.New(tmpl)
	if err != nil {
		return nil, fmt.Errorf("URI template: %w", err)
	}
	return t.Varnames(), nil
}

// matchTemplate reports whether uri is an expansion of tmpl.
func matchTemplate(tmpl, uri string) bool {
	t, err := uritemplate.New(tmpl)
	if err != nil {
		return false
	}
	return t.Regexp().MatchString(uri)
}

// ExpandTemplate expands a resource template with the values given for its variables (a
// variable without a value is left out, as RFC 6570 says).
func ExpandTemplate(tmpl string, values map[string]string) (string, error) {
	t, err := uritemplate.New(tmpl)
	if err != nil {
		return "", fmt.Errorf("URI template: %w", err)
	}
	vals := uritemplate.Values{}
	for k, v := range values {
		vals.Set(k, uritemplate.String(v))
	}
	uri, err := t.Expand(vals)
	if err != nil {
		return "", fmt.Errorf("expand %s: %w", tmpl, err)
	}
	return uri, nil
}

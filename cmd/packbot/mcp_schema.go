package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/packs"
)

// printSchema shows the full input and output schema of the tool named name (--schema), as the
// server gave them.
func printSchema(w io.Writer, rep *mcp.SmokeReport, name string) {
	if name == "" {
		return
	}
	for _, t := range rep.Tools {
		if t.Name != name {
			continue
		}
		fmt.Fprintf(w, "\ntool %s\n", t.Name)
		if t.Title != "" {
			fmt.Fprintf(w, "title: %s\n", t.Title)
		}
		if t.Description != "" {
			fmt.Fprintf(w, "description: %s\n", t.Description)
		}
		fmt.Fprintf(w, "input schema:\n%s\n", indentJSON(t.InputSchema))
		if len(t.OutputSchema) > 0 {
			fmt.Fprintf(w, "output schema:\n%s\n", indentJSON(t.OutputSchema))
		} else {
			fmt.Fprintln(w, "output schema: none (the tool declares no structured result)")
		}
		return
	}
}

func indentJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "  ", "  ") != nil {
		return "  " + string(raw)
	}
	return "  " + b.String()
}

// smokeJSON is the JSON report of mcp smoke --json.
type smokeJSON struct {
	Server        string           `json:"server"`
	Transport     string           `json:"transport"`
	Target        string           `json:"target"`
	Protocol      string           `json:"protocol,omitempty"`
	ServerName    string           `json:"serverName,omitempty"`
	ServerVersion string           `json:"serverVersion,omitempty"`
	Steps         []smokeStepJSON  `json:"steps"`
	Listed        int              `json:"listed"`
	Tools         []smokeToolJSON  `json:"tools"`
	NotOffered    []mcp.LeftOut    `json:"notOffered,omitempty"`
	Call          *smokeResultJSON `json:"call,omitempty"`
	Error         string           `json:"error,omitempty"`
}

type smokeStepJSON struct {
	Name string  `json:"name"`
	Ms   float64 `json:"ms"`
}

type smokeToolJSON struct {
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  json.RawMessage  `json:"inputSchema"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *mcp.Annotations `json:"annotations,omitempty"`
}

type smokeResultJSON struct {
	IsError    bool            `json:"isError"`
	Text       string          `json:"text"`
	Structured json.RawMessage `json:"structured,omitempty"`
	Ms         float64         `json:"ms"`
}

// printSmokeJSON writes the report (as far as the test got) and the failure, if any.
func printSmokeJSON(w io.Writer, s packs.Server, rep *mcp.SmokeReport, err error) error {
	out := smokeJSON{Server: s.Name, Transport: s.Transport, Target: target(s), Steps: []smokeStepJSON{}, Tools: []smokeToolJSON{}}
	if err != nil {
		out.Error = smokeReason(err, s)
	}
	if rep != nil {
		out.Protocol, out.ServerName, out.ServerVersion, out.Listed = rep.Protocol, rep.ServerName, rep.ServerVersion, rep.Listed
		for _, st := range rep.Steps {
			out.Steps = append(out.Steps, smokeStepJSON{Name: st.Name, Ms: ms(st.Took)})
		}
		for _, t := range rep.Tools {
			out.Tools = append(out.Tools, smokeToolJSON{Name: t.Name, Title: t.Title, Description: t.Description,
				InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations})
		}
		out.NotOffered = rep.LeftOut
		if c := rep.Call; c != nil {
			out.Call = &smokeResultJSON{IsError: c.IsError, Text: c.Text, Structured: c.Structured, Ms: ms(c.Elapsed)}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

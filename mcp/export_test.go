package mcp

import "time"

// Sweep closes idle per-user sessions as of now (Run does it every 30 seconds).
func (p *Pool) Sweep(now time.Time) int { return p.sweep(now) }

// ParseFields reads a form elicitation's requested schema.
var ParseFields = parseFields

// CheckElicitURL accepts the links a URL elicitation may send a person.
var CheckElicitURL = checkElicitURL

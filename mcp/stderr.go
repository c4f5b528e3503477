package mcp

import (
	"bytes"
	"io"
	"log/slog"
	"sync"
)

// stderrFor returns where a stdio server's stderr goes.
func (p *Pool) stderrFor(server string) io.Writer {
	if p.stderr != nil {
		return p.stderr
	}
	return &lineLogger{log: p.log.With("server", server)}
}

// maxStderrLine bounds one logged line of a stdio server's stderr.
const maxStderrLine = 4096

// lineLogger logs what a stdio server writes to stderr, one record per line.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			room := maxStderrLine - len(l.buf)
			l.buf = append(l.buf, b[:min(len(b), max(room, 0))]...)
			break
		}
		line := append(l.buf, b[:min(i, max(maxStderrLine-len(l.buf), 0))]...)
		if len(line) > 0 {
			l.log.Info("MCP server stderr", "line", string(line))
		}
		l.buf = l.buf[:0]
		b = b[i+1:]
	}
	return n, nil
}

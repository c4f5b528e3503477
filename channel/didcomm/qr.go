package didcomm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"rsc.io/qr"
)

// serveInvitation answers GET /invitation with the bot's invitation: JSON by default,
// ?format=url for the URL, ?format=png for a QR code.
func (c *Channel) serveInvitation(w http.ResponseWriter, r *http.Request) {
	inv, err := c.a.invitation(r.Context())
	if err != nil {
		c.log.ErrorContext(r.Context(), "didcomm invitation", "err", err)
		http.Error(w, "invitation unavailable", http.StatusServiceUnavailable)
		return
	}
	u, err := c.Invitation(r.Context())
	if err != nil {
		http.Error(w, "invitation unavailable", http.StatusServiceUnavailable)
		return
	}
	switch r.URL.Query().Get("format") {
	case "", "json":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(inv)
	case "url":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, u)
	case "png":
		code, err := qr.Encode(u, qr.M)
		if err != nil {
			http.Error(w, "invitation too long for a QR code", http.StatusInternalServerError)
			return
		}
		code.Scale = 6
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(code.PNG())
	default:
		http.Error(w, "format must be json, url or png", http.StatusBadRequest)
	}
}

// WriteQR draws text as a QR code in a terminal, two modules per character cell, with a quiet
// zone, dark modules as spaces on a light background so that phones read it on dark terminals.
func WriteQR(w io.Writer, text string) error {
	code, err := qr.Encode(text, qr.L)
	if err != nil {
		return fmt.Errorf("qr: %w", err)
	}
	const quiet = 2
	n := code.Size
	dark := func(x, y int) bool {
		return x >= 0 && y >= 0 && x < n && y < n && code.Black(x, y)
	}
	var b strings.Builder
	for y := -quiet; y < n+quiet; y += 2 {
		for x := -quiet; x < n+quiet; x++ {
			top, bottom := dark(x, y), dark(x, y+1)
			switch {
			case top && bottom:
				b.WriteString(" ")
			case top:
				b.WriteString("▄")
			case bottom:
				b.WriteString("▀")
			default:
				b.WriteString("█")
			}
		}
		b.WriteString("\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

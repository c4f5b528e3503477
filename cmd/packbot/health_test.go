package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHealth: packbot health exits 0 when /readyz answers 200, 1 with the reason when it
// answers otherwise or nothing listens; the default URL is the admin (else HTTP) address, an
// unspecified host asked on loopback.
func TestHealth(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || !ready.Load() {
			http.Error(w, "store: unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	port := addr[strings.LastIndex(addr, ":"):]

	for _, env := range []map[string]string{
		{"PACKBOT_ADMIN_ADDR": addr, "PACKBOT_HTTP_ADDR": freeAddr(t)},
		{"PACKBOT_HTTP_ADDR": "0.0.0.0" + port},
	} {
		if code, out, errOut := cli(t, env, "health"); code != 0 || !strings.Contains(out, "ready") {
			t.Errorf("%v: exit %d\n%s%s", env, code, out, errOut)
		}
	}
	ready.Store(false)
	if code, _, errOut := cli(t, map[string]string{"PACKBOT_HTTP_ADDR": addr}, "health"); code != 1 || !strings.Contains(errOut, "HTTP 503") {
		t.Errorf("not ready: exit %d, %q", code, errOut)
	}
	if code, _, errOut := cli(t, nil, "health", "--url", "http://"+freeAddr(t)+"/readyz"); code != 1 || !strings.Contains(errOut, "health http://") {
		t.Errorf("nothing listening: exit %d, %q", code, errOut)
	}
}

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestServeRefusesMalformedSettings: every malformed setting stops serve before it serves,
// with exit status 1 and a message naming the variable, the problem and the fix.
func TestServeRefusesMalformedSettings(t *testing.T) {
	const key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	for _, c := range []struct {
		name string
		env  map[string]string
		want []string // in the message
	}{
		{"key not hex", map[string]string{"MCP_CONFIG_ENCRYPTION_KEY": "not-a-key"},
			[]string{"MCP_CONFIG_ENCRYPTION_KEY", "packbot keys gen"}},
		{"key too short", map[string]string{"MCP_CONFIG_ENCRYPTION_KEY": "0011"},
			[]string{"MCP_CONFIG_ENCRYPTION_KEY", "64 hexadecimal characters"}},
		{"old key", map[string]string{"MCP_CONFIG_ENCRYPTION_KEY": key, "MCP_CONFIG_ENCRYPTION_KEYS_OLD": key + ",zz"},
			[]string{"MCP_CONFIG_ENCRYPTION_KEYS_OLD entry 2", "packbot keys gen"}},
		{"public URL without scheme", map[string]string{"PACKBOT_PUBLIC_URL": "foo"},
			[]string{"PACKBOT_PUBLIC_URL", "https://bot.example.com"}},
		{"public URL of another scheme", map[string]string{"PACKBOT_PUBLIC_URL": "ftp://bot.example.com"},
			[]string{"PACKBOT_PUBLIC_URL", "absolute http(s) URL"}},
		{"public URL with a password", map[string]string{"PACKBOT_PUBLIC_URL": "https://bot:hunter2-secret@bot.example.com"},
			[]string{"PACKBOT_PUBLIC_URL", "user info", "xxxxx"}},
		{"approval sweep", map[string]string{"PACKBOT_APPROVAL_SWEEP": "soon"},
			[]string{"PACKBOT_APPROVAL_SWEEP", "want a positive duration such as 15s"}},
		{"elicitation timeout", map[string]string{"PACKBOT_ELICITATION_TIMEOUT": "-5s"},
			[]string{"PACKBOT_ELICITATION_TIMEOUT", "want a positive duration"}},
		{"pack watch", map[string]string{"PACKBOT_PACK_WATCH": "often"},
			[]string{"PACKBOT_PACK_WATCH", "want a positive duration"}},
		{"body limit", map[string]string{"PACKBOT_MAX_BODY_BYTES": "lots"},
			[]string{"PACKBOT_MAX_BODY_BYTES", "positive number of bytes"}},
		{"channel", map[string]string{"PACKBOT_CHANNEL": "carrier-pigeon"},
			[]string{"PACKBOT_CHANNEL", "didcomm or vsagent"}},
		{"provider", map[string]string{"LLM_PROVIDER": "gpt"},
			[]string{"LLM_PROVIDER", "openai"}},
		{"temperature", map[string]string{"OPENAI_TEMPERATURE": "hot"},
			[]string{"OPENAI_TEMPERATURE", "not a number"}},
		{"webhook secret too short", map[string]string{"PACKBOT_WEBHOOK_SECRET": "kurz"},
			[]string{"PACKBOT_WEBHOOK_SECRET", "at least 16", "openssl rand -hex 24"}},
		{"webhook secret not URL-safe", map[string]string{"PACKBOT_WEBHOOK_SECRET": "geheim/geheim/geheim"},
			[]string{"PACKBOT_WEBHOOK_SECRET", "letters, digits", "EVENTS_BASE_URL"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"PACKBOT_DATA_DIR": t.TempDir()}
			for k, v := range c.env {
				env[k] = v
			}
			// A refused setting returns at once; the deadline only bounds a serve that started.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, []string{"serve", "--http", "127.0.0.1:0"}, &stdout, &stderr, func(k string) (string, bool) {
				v, ok := env[k]
				return v, ok
			})
			out := stderr.String()
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("stderr lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "hunter2") || strings.Contains(out, "not-a-key") {
				t.Errorf("stderr repeats a secret:\n%s", out)
			}
		})
	}
}

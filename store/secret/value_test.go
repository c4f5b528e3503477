package secret_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/packbot/packbot/store/secret"
)

const token = "ghp_s3cr3t"

// wantRedacted fails when out shows the secret.
func wantRedacted(t *testing.T, how, out, secretText string) {
	t.Helper()
	if strings.Contains(out, secretText) {
		t.Errorf("%s shows the secret: %s", how, out)
	}
}

func TestValueRedacts(t *testing.T) {
	v := secret.NewValue(token)
	if v.Reveal() != token {
		t.Fatalf("Reveal = %q", v.Reveal())
	}
	type form struct {
		Server string
		Token  secret.Value
	}
	f := form{Server: "github", Token: v}
	// fmt cannot call methods on unexported fields: the pointer inside Value is what protects it.
	hidden := struct{ token secret.Value }{v}
	for _, verb := range []string{"%v", "%s", "%#v", "%+v", "%q", "%x"} {
		wantRedacted(t, verb, fmt.Sprintf(verb, v), token)
		wantRedacted(t, verb+" of a struct", fmt.Sprintf(verb, f), token)
		wantRedacted(t, verb+" of a pointer", fmt.Sprintf(verb, &f), token)
		wantRedacted(t, verb+" of an unexported field", fmt.Sprintf(verb, hidden), token)
	}
	if got := fmt.Sprint(v); got != secret.Redacted {
		t.Errorf("Sprint = %q, want %q", got, secret.Redacted)
	}

	for name, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(newHandler(&buf))
		log.Info("saved", "token", v, slog.Any("any", v), slog.Group("form", "token", v))
		log.With("token", v).Info("with")
		wantRedacted(t, "slog "+name, buf.String(), token)
		if !strings.Contains(buf.String(), secret.Redacted) {
			t.Errorf("slog %s: %s does not say %s", name, buf.String(), secret.Redacted)
		}
	}

	b, err := json.Marshal(map[string]any{"token": v, "form": f})
	if err != nil {
		t.Fatal(err)
	}
	wantRedacted(t, "json.Marshal", string(b), token)
	if got, _ := json.Marshal(v); string(got) != `"`+secret.Redacted+`"` {
		t.Errorf("json.Marshal = %s", got)
	}
}

func TestKeyShowsOnlyID(t *testing.T) {
	k := mustKey(t, hexA)
	if k.String() != "key:"+k.ID() {
		t.Errorf("String = %q, want key:%s", k, k.ID())
	}
	type config struct{ Key secret.Key }
	hidden := struct{ key secret.Key }{k}
	for _, verb := range []string{"%v", "%+v", "%#v", "%d", "%x"} {
		out := fmt.Sprintf(verb, hidden)
		wantRedacted(t, verb+" of an unexported field", out, hexA)
		// hexA is 00 01 02 …: its bytes printed in decimal would read "0 1 2 3 4 5".
		if strings.Contains(out, strings.Trim(fmt.Sprint(keyBytes(t, hexA)[:6]), "[]")) {
			t.Errorf("%s of an unexported field shows key bytes: %s", verb, out)
		}
	}
	for _, verb := range []string{"%v", "%s", "%#v", "%+v"} {
		for what, arg := range map[string]any{"key": k, "struct": config{k}, "pointer": &config{k}} {
			out := fmt.Sprintf(verb, arg)
			wantRedacted(t, verb+" of a "+what, out, hexA)
			if !strings.Contains(out, k.ID()) {
				t.Errorf("%s of a %s = %s: want the key id", verb, what, out)
			}
		}
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("loaded", "key", k)
	wantRedacted(t, "slog", buf.String(), hexA)
	b, _ := json.Marshal(config{k})
	wantRedacted(t, "json.Marshal", string(b), hexA)
}

func keyBytes(t *testing.T, h string) []byte {
	t.Helper()
	b, err := hex.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestZeroValue(t *testing.T) {
	var v secret.Value
	if !v.IsZero() || v.Reveal() != "" || secret.NewValue("x").IsZero() {
		t.Fatal("zero value")
	}
}

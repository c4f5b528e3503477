package vsagent

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// MinSecretLen is the shortest webhook secret [New] accepts.
const MinSecretLen = 16

// hooksPrefix is the path under which the webhooks are mounted with the secret as a path
// segment: EVENTS_BASE_URL=http://packbot:8080/hooks/<secret> makes the VS Agent post to
// /hooks/<secret>/message-received.
const hooksPrefix = "/hooks/{secret}/"

// CheckWebhookSecret refuses a [Config.WebhookSecret] that is too short, or that could not
// stand unescaped in a URL's path and user info (the VS Agent's EVENTS_BASE_URL carries it).
func CheckWebhookSecret(s string) error {
	if len(s) < MinSecretLen {
		return fmt.Errorf("the webhook secret has %d characters, want at least %d", len(s), MinSecretLen)
	}
	for _, r := range s {
		if !urlSafe(r) {
			return errors.New("the webhook secret may hold only letters, digits, '-', '_', '.' and '~'")
		}
	}
	return nil
}

func urlSafe(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-_.~", r)
}

// authorized reports whether r carries the webhook secret: as the path segment after /hooks/,
// as a bearer token, or as the password of basic authentication (what node-fetch sends for an
// EVENTS_BASE_URL with user info). Without a secret every request is.
func (c *Channel) authorized(r *http.Request) bool {
	if c.secret == nil {
		return true
	}
	ok := false
	if v := r.PathValue("secret"); v != "" {
		ok = c.isSecret(v)
	}
	if scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " "); found && strings.EqualFold(scheme, "Bearer") {
		ok = c.isSecret(strings.TrimSpace(token)) || ok
	}
	if _, password, found := r.BasicAuth(); found {
		ok = c.isSecret(password) || ok
	}
	return ok
}

// isSecret compares v with the secret in constant time (of their digests: the length of
// neither shows).
func (c *Channel) isSecret(v string) bool {
	h := sha256.Sum256([]byte(v))
	return subtle.ConstantTimeCompare(h[:], c.secret) == 1
}

// rejectLog lets at most one line per key (a route's rejections, a route's ignored types) through
// per interval; the next line says how many were suppressed meanwhile. Its keys are fixed: it
// does not grow.
type rejectLog struct {
	every time.Duration

	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
}

// admit reports whether a line for route may be written at now, and how many were suppressed
// since the last one written.
func (l *rejectLog) admit(route string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, seen := l.last[route]; seen && now.Sub(last) < l.every && now.Sub(last) >= 0 {
		l.suppressed[route]++
		return false, 0
	}
	suppressed = l.suppressed[route]
	l.last[route] = now
	delete(l.suppressed, route)
	return true, suppressed
}

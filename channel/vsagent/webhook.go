package vsagent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/internal/logid"
)

// Mount registers the VS Agent's webhooks on mux (the bot's own server): POST /message-received,
// POST /connection-state-updated and POST /message-state-updated, and, with a
// [Config.WebhookSecret], the same under /hooks/{secret}/. Other methods on those paths are
// answered 405. Mount the mux under the path the VS Agent's EVENTS_BASE_URL names.
//
// Each webhook is answered as soon as the handler has accepted its event (committed it to the
// bot's inbox):
//   - 200: delivered, or valid but nothing for the bot (other connection states, message states,
//     receipts, and message types this channel does not support, which are logged: the VS Agent
//     never retries, so a 4xx would only hide them from its own logs as well);
//   - 401: a secret is configured and the webhook does not carry it (checked first: nothing of
//     the request is read, nothing delivered);
//   - 400: malformed JSON, a missing connectionId or a missing required field, answered with a
//     fixed message (the reason, which never quotes the body, is logged);
//   - 405: not a POST; 413: body over [Config.MaxBodyBytes];
//   - 503: the handler did not accept the event (the bot's store is unreachable); Run has
//     returned, or did not start within [StartWait] of the webhook's arrival (a webhook that
//     arrives between Mount and Run waits for Run: the VS Agent never retries).
//
// Rejections are logged at most once per route and second, with the number of lines suppressed
// meanwhile; logs name the route, never the request's path (it may hold the secret).
func (c *Channel) Mount(mux *http.ServeMux) {
	for _, route := range []string{routeMessageReceived, routeConnectionState, routeMessageState} {
		h := c.webhook(route)
		mux.Handle(http.MethodPost+" /"+route, h)
		mux.Handle("/"+route, h) // any other method: 405, logged
		if c.secret != nil {
			mux.Handle(http.MethodPost+" "+hooksPrefix+route, h)
			mux.Handle(hooksPrefix+route, h)
		}
	}
}

// badBody answers every webhook whose body cannot be decoded: the reason is logged only.
const badBody = "bad webhook body"

// webhook returns the handler of one route.
func (c *Channel) webhook(route string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if !c.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="packbot webhooks"`)
			c.reject(ctx, w, r, route, http.StatusUnauthorized, "unauthorized", "unauthorized")
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			c.reject(ctx, w, r, route, http.StatusMethodNotAllowed, "method not allowed", "method not allowed")
			return
		}
		if !c.waitRunning(ctx) {
			c.reject(ctx, w, r, route, http.StatusServiceUnavailable, "channel not running", "channel not running")
			return
		}
		body, status, reason := c.readBody(w, r)
		if status != 0 {
			c.reject(ctx, w, r, route, status, reason, reason)
			return
		}
		d, err := decodeWebhook(route, body)
		if err != nil {
			reason := "bad webhook"
			var b *badInput
			if errors.As(err, &b) {
				reason = b.reason
			}
			c.reject(ctx, w, r, route, http.StatusBadRequest, badBody, reason)
			return
		}
		if d.Event == nil {
			if d.Unsupported {
				// As rejections: at most one line per route and interval (anyone may post types).
				if ok, suppressed := c.rejects.admit("ignored "+route, c.now()); ok {
					c.log.InfoContext(ctx, "webhook ignored", "route", route, "type", d.Type, "conn", logid.Conn(d.Conn), "note", d.Note,
						"suppressed", suppressed)
				}
			} else {
				c.log.DebugContext(ctx, "webhook ignored", "route", route, "type", d.Type, "conn", d.Conn, "note", d.Note)
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		if err := c.deliver(d.ID, d.Event); err != nil { // Run returned meanwhile, or the bot could not accept it
			reason, attrs := "channel not running", []any(nil)
			if !errors.Is(err, errNotRunning) {
				reason, attrs = "event not accepted", []any{"type", d.Type, "conn", logid.Conn(d.Conn), "err", err}
			}
			c.reject(ctx, w, r, route, http.StatusServiceUnavailable, reason, reason, attrs...)
			return
		}
		c.log.DebugContext(ctx, "webhook", "route", route, "type", d.Type, "conn", d.Conn, "bytes", len(body))
		w.WriteHeader(http.StatusOK)
	}
}

// readBody reads a webhook body within the size limit; a non-zero status says why it could
// not.
func (c *Channel) readBody(w http.ResponseWriter, r *http.Request) (body []byte, status int, reason string) {
	if r.ContentLength > c.maxBody {
		return nil, http.StatusRequestEntityTooLarge, "body too large"
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, c.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge, "body too large"
		}
		return nil, http.StatusBadRequest, "body unreadable"
	}
	return body, 0, ""
}

// reject answers a webhook with status and the fixed message answer, and logs reason (which
// quotes nothing of the body) with attrs, at most once per route and [rejectLogInterval].
func (c *Channel) reject(ctx context.Context, w http.ResponseWriter, r *http.Request, route string, status int, answer, reason string, attrs ...any) {
	http.Error(w, answer, status)
	ok, suppressed := c.rejects.admit(route, c.now())
	if !ok {
		return
	}
	args := append([]any{"route", route, "status", status, "reason", reason, "remote", r.RemoteAddr, "bytes", r.ContentLength}, attrs...)
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	c.log.WarnContext(ctx, "webhook rejected", args...)
}

// Interface guards.
var _ channel.HTTPMounter = (*Channel)(nil)

// StartWait bounds how long a webhook that arrives before Run waits for it.
const StartWait = 10 * time.Second

// waitRunning reports whether Run is delivering, waiting for it to start (at most StartWait, or
// until the request ends) when it has not yet.
func (c *Channel) waitRunning(ctx context.Context) bool {
	switch c.state.Load() {
	case stateRunning:
		return true
	case stateStopped:
		return false
	}
	t := time.NewTimer(StartWait)
	defer t.Stop()
	select {
	case <-c.running:
		return c.accepting()
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

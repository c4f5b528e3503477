package vsagent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packbot/packbot/channel"
)

// DefaultMaxBodyBytes bounds a webhook body when [Config.MaxBodyBytes] is zero.
const DefaultMaxBodyBytes = 1 << 20

// defaultTimeout bounds one admin API call when the caller brings no [http.Client]; the
// caller's ctx can only shorten it.
const defaultTimeout = 30 * time.Second

// ErrClosed is returned by the Send methods after Run has returned.
var ErrClosed = errors.New("vsagent: channel stopped")

// Config configures a [Channel].
type Config struct {
	// AdminURL is the VS Agent's admin API base URL (http or https), e.g. "http://vs-agent:3000";
	// messages go to AdminURL + "/v1/message". Required.
	AdminURL string
	// HTTPClient posts to the admin API; nil means a client with a 30 s timeout.
	HTTPClient *http.Client
	// MaxBodyBytes bounds a webhook body; larger ones are answered 413. Zero means
	// [DefaultMaxBodyBytes]. Wallets may send profile pictures as data URLs inside the profile
	// message: raise it if yours send large ones.
	MaxBodyBytes int64
	// Logger receives the channel's logs; nil discards them. Message contents are never logged.
	Logger *slog.Logger
	// Now stamps outbound messages and paces the logging of rejected webhooks; nil means
	// time.Now.
	Now func() time.Time
	// WebhookSecret, when set, is required of every webhook: as the path segment of
	// /hooks/<secret>/<route> (the VS Agent's EVENTS_BASE_URL=http://bot/hooks/<secret>), as
	// "Authorization: Bearer <secret>", or as the password of basic authentication
	// (EVENTS_BASE_URL=http://vs:<secret>@bot). A webhook without it is answered 401 and changes
	// nothing. At least [MinSecretLen] characters, letters, digits, '-', '_', '.' and '~' only.
	// Empty: webhooks are not authenticated (keep them on a private network).
	WebhookSecret string
}

// rejectLogInterval: at most one log line per route and interval for rejected webhooks.
const rejectLogInterval = time.Second

// Run states.
const (
	stateNew int32 = iota
	stateRunning
	stateStopped
)

// Channel is a VS Agent wallet channel. Its methods are safe for concurrent use. The Send
// methods may be called before Run (the admin API does not need it) and fail with [ErrClosed]
// after Run returns. Webhooks are answered 503 until Run is called and after it returns.
type Channel struct {
	endpoint string // AdminURL + "/v1/message"
	admin    string // AdminURL, without a trailing slash
	client   *http.Client
	maxBody  int64
	log      *slog.Logger
	now      func() time.Time
	secret   []byte // SHA-256 of Config.WebhookSecret; nil: webhooks are not authenticated
	rejects  rejectLog

	// state goes new → running → stopped and is read without a lock (sends, webhook admission).
	// Deliveries hold mu for reading while they check it and call the handler, so that once Run
	// has stored stopped and taken mu for writing, no delivery is in flight or to come. Sends
	// never take mu, so a handler that sends synchronously cannot lock it recursively.
	state   atomic.Int32
	mu      sync.RWMutex
	handler channel.Handler
	runCtx  context.Context // Run's ctx: the lifetime of the channel, handed to the handler
	running chan struct{}   // closed when Run starts delivering

	locks connLocks // one delivery at a time per connection
}

// New returns a channel for the VS Agent at cfg.AdminURL. It does no I/O.
func New(cfg Config) (*Channel, error) {
	endpoint, err := messageEndpoint(cfg.AdminURL)
	if err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("vsagent: MaxBodyBytes %d is negative", cfg.MaxBodyBytes)
	}
	c := &Channel{
		endpoint: endpoint,
		admin:    strings.TrimSuffix(endpoint, "/v1/message"),
		client:   cfg.HTTPClient,
		maxBody:  cfg.MaxBodyBytes,
		log:      cfg.Logger,
		now:      cfg.Now,
		rejects:  rejectLog{every: rejectLogInterval, last: map[string]time.Time{}, suppressed: map[string]int{}},
		running:  make(chan struct{}),
		locks:    connLocks{m: make(map[string]*connLock)},
	}
	if cfg.WebhookSecret != "" {
		if err := CheckWebhookSecret(cfg.WebhookSecret); err != nil {
			return nil, fmt.Errorf("vsagent: %w", err)
		}
		h := sha256.Sum256([]byte(cfg.WebhookSecret))
		c.secret = h[:]
	}
	if c.client == nil {
		// One connection per concurrent post is kept alive: the default two per host make most
		// posts open a new TCP connection under load.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 256
		c.client = &http.Client{Timeout: defaultTimeout, Transport: tr}
	}
	if c.maxBody == 0 {
		c.maxBody = DefaultMaxBodyBytes
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// messageEndpoint validates the admin base URL and returns the message endpoint.
func messageEndpoint(admin string) (string, error) {
	if admin == "" {
		return "", errors.New("vsagent: AdminURL is required")
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", fmt.Errorf("vsagent: AdminURL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("vsagent: AdminURL %q: scheme must be http or https", admin)
	case u.Host == "":
		return "", fmt.Errorf("vsagent: AdminURL %q has no host", admin)
	case u.User != nil:
		return "", errors.New("vsagent: AdminURL must not carry credentials")
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("vsagent: AdminURL %q must not have a query or fragment", admin)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/v1/message"
	u.RawPath = ""
	return u.String(), nil
}

// Name is "vsagent".
func (c *Channel) Name() string { return "vsagent" }

// Close implements channel.Channel: it closes the admin API client's idle connections (the VS
// Agent itself runs elsewhere).
func (c *Channel) Close() error {
	c.client.CloseIdleConnections()
	return nil
}

// Run delivers webhook events to h until ctx is done, then returns nil once no delivery is in
// flight; from then on webhooks are answered 503 and sends fail. It may be called once.
func (c *Channel) Run(ctx context.Context, h channel.Handler) error {
	if h == nil {
		return errors.New("vsagent: Run needs a handler")
	}
	c.mu.Lock()
	if c.state.Load() != stateNew {
		c.mu.Unlock()
		return errors.New("vsagent: Run called twice")
	}
	c.handler, c.runCtx = h, ctx
	c.state.Store(stateRunning)
	close(c.running)
	c.mu.Unlock()
	c.log.InfoContext(ctx, "vsagent channel running", "admin", c.endpoint)

	<-ctx.Done()

	c.state.Store(stateStopped) // new webhooks: 503
	c.mu.Lock()                 // waits for the deliveries in flight
	c.handler, c.runCtx = nil, nil
	c.mu.Unlock()
	c.log.InfoContext(ctx, "vsagent channel stopped")
	return nil
}

// stopped reports whether Run has returned (or is returning).
func (c *Channel) stopped() bool { return c.state.Load() == stateStopped }

// accepting reports whether Run is delivering events.
func (c *Channel) accepting() bool { return c.state.Load() == stateRunning }

// deliver hands e to the handler, after the earlier events of its connection, and returns the
// handler's error (the event was not accepted). It returns errNotRunning when Run is not
// delivering (not started, or returned).
func (c *Channel) deliver(id string, e channel.Event) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state.Load() != stateRunning {
		return errNotRunning
	}
	unlock := c.locks.lock(e.Connection())
	defer unlock()
	return c.handler.HandleEvent(c.runCtx, id, e)
}

var errNotRunning = errors.New("vsagent: channel not running")

// connLocks serialises deliveries per connection without growing with the number of
// connections ever seen: an entry lives only while a delivery holds or waits for it.
type connLocks struct {
	mu sync.Mutex
	m  map[string]*connLock
}

type connLock struct {
	mu   sync.Mutex
	refs int
}

// lock locks conn's entry and returns its unlock.
func (l *connLocks) lock(conn string) (unlock func()) {
	l.mu.Lock()
	e := l.m[conn]
	if e == nil {
		e = &connLock{}
		l.m[conn] = e
	}
	e.refs++
	l.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		l.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(l.m, conn)
		}
		l.mu.Unlock()
	}
}

// AnnouncesConnections is true: the VS Agent posts connection-state-updated "completed" before
// any message of a connection, and its webhooks name connections by an id the sender chooses,
// so the bot keeps sessions to the connections announced (see [channel.ConnectionAnnouncer]).
func (c *Channel) AnnouncesConnections() bool { return true }

// ConnectionExists implements [channel.ConnectionChecker] for a connection whose announcement
// the bot never got (its connection-state-updated "completed" came while packbot was down: the
// VS Agent does not send it again). With a webhook secret, every event comes from the VS Agent,
// which names only its own connections: true. Without one anyone may have named it, so the VS
// Agent's admin API is asked (GET /v1/connections/{id}): it exists when the VS Agent holds it,
// completed.
func (c *Channel) ConnectionExists(ctx context.Context, conn string) (bool, error) {
	if c.secret != nil {
		return true, nil
	}
	if c.stopped() {
		return false, fmt.Errorf("vsagent: look up a connection: %w", ErrClosed)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.admin+"/v1/connections/"+url.PathEscape(conn), nil)
	if err != nil {
		return false, fmt.Errorf("vsagent: look up a connection: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return false, fmt.Errorf("vsagent: look up a connection: %w", err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
		_ = resp.Body.Close()
	}()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return false, nil
	default:
		return false, fmt.Errorf("vsagent: look up a connection: the admin API answered %d", resp.StatusCode)
	}
	var record struct {
		State string `json:"state"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(&record); err != nil {
		return false, fmt.Errorf("vsagent: look up a connection: %w", err)
	}
	return record.State == stateCompleted, nil // as in its connection-state-updated webhooks
}

// Interface guards.
var (
	_ channel.Channel             = (*Channel)(nil)
	_ channel.ConnectionAnnouncer = (*Channel)(nil)
	_ channel.ConnectionChecker   = (*Channel)(nil)
)

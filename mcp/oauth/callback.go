package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/packbot/packbot/store"
)

// Reasons a callback is refused. ErrExpired reaches Config.OnFailed; the others concern a link
// that no longer belongs to a pending authorization, so nobody is told but the browser.
var (
	// ErrExpired: the user came back after Config.PendingTTL.
	ErrExpired = errors.New("authorization link expired")
	// errUsed: the state was already used (or the authorization was forgotten meanwhile).
	errUsed = errors.New("authorization link already used")
	// errReplaced: a newer Begin replaced this link.
	errReplaced = errors.New("authorization link replaced by a newer one")
	// errUnknownState: no pending authorization has this state.
	errUnknownState = errors.New("unknown authorization state")
)

// CallbackHandler serves the authorization server's redirect: GET with code and state (RFC 6749
// §4.1.2), or error. It refuses (400, nothing stored) an unknown, expired, replaced or already
// used state; shows the authorization server's error plainly; otherwise exchanges the code with
// the PKCE verifier and resource, stores the sealed tokens, consumes the pending authorization
// and calls Config.OnAuthorized. The answer is a small HTML page. Any replica sharing the store
// can serve it.
func (m *Manager) CallbackHandler() http.Handler { return m.callbackHandler(nil) }

// callbackHandler is CallbackHandler whose page says what reword makes of the result (nil: as
// it is).
func (m *Manager) callbackHandler(reword func(callbackResult) callbackResult) http.Handler {
	page := template.Must(template.New("page").Parse(pageHTML))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		// The work goes on when the browser gives up: the state is spent once claimed.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 3*m.timeout)
		defer cancel()
		res := m.callback(ctx, r.URL.Query())
		if reword != nil {
			res = reword(res)
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer") // the URL holds the code
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		w.WriteHeader(res.status)
		if err := page.Execute(w, res); err != nil {
			m.log.DebugContext(ctx, "oauth callback: write page", "err", err)
		}
	})
}

// callbackResult is what the page says.
type callbackResult struct {
	status  int
	Title   string
	Message string
	Detail  string
}

const pageHTML = `<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 34em; margin: 4em auto; padding: 0 1em; line-height: 1.5">
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
{{if .Detail}}<p><code>{{.Detail}}</code></p>{{end}}
</body></html>
`

func refused(msg string) callbackResult {
	return callbackResult{status: http.StatusBadRequest, Title: "Link not valid",
		Message: msg + " Go back to the chat and ask for a new link."}
}

// callback runs the callback and says what to show. It never logs the code or the state.
func (m *Manager) callback(ctx context.Context, q url.Values) callbackResult {
	state := q.Get("state")
	if state == "" {
		m.log.WarnContext(ctx, "oauth callback refused", "reason", "no state")
		return refused("This link carries no authorization state.")
	}
	stateHash := hashState(state)
	idx, err := m.lookupState(ctx, stateHash)
	if err != nil {
		if errors.Is(err, errUnknownState) {
			m.log.WarnContext(ctx, "oauth callback refused", "reason", err)
			return refused("This authorization link is unknown or was already used.")
		}
		m.log.ErrorContext(ctx, "oauth callback: look up state", "err", err)
		return callbackResult{status: http.StatusInternalServerError, Title: "Something went wrong",
			Message: "packbot could not check this link. Try again in a moment."}
	}
	log := m.log.With("identity", idx.Identity, "server", idx.Server)
	now := m.now()
	if !now.Before(idx.ExpiresAt) {
		m.cleanupPending(ctx, idx, stateHash)
		log.WarnContext(ctx, "oauth callback refused", "reason", ErrExpired)
		m.failed(ctx, idx, ErrExpired)
		return refused("This authorization link has expired.")
	}
	p, err := m.claim(ctx, idx, stateHash, now)
	if err != nil {
		log.WarnContext(ctx, "oauth callback refused", "reason", err)
		if errors.Is(err, ErrExpired) {
			m.cleanupPending(ctx, idx, stateHash)
			m.failed(ctx, idx, err)
			return refused("This authorization link has expired.")
		}
		if errors.Is(err, errUsed) || errors.Is(err, errReplaced) {
			return refused("This authorization link was already used or replaced by a newer one.")
		}
		return callbackResult{status: http.StatusInternalServerError, Title: "Something went wrong",
			Message: "packbot could not read this authorization. Go back to the chat and try again."}
	}
	// Claimed: from here on the state is spent whatever happens.
	defer m.cleanupPending(ctx, idx, stateHash)

	if code := q.Get("error"); code != "" {
		ae := &AuthorizationError{Code: code, Description: q.Get("error_description")}
		log.InfoContext(ctx, "oauth authorization not granted", "error", ae.Code, "description", ae.Description)
		m.failed(ctx, idx, ae)
		title := "Authorization not granted"
		msg := fmt.Sprintf("The authorization server of %s answered with an error. You can go back to the chat.", idx.Server)
		if ae.Code == "access_denied" {
			msg = fmt.Sprintf("Access to %s was refused. You can go back to the chat and try again.", idx.Server)
		}
		return callbackResult{status: http.StatusBadRequest, Title: title, Message: msg, Detail: ae.Error()}
	}
	// RFC 9207: an iss that is not the issuer, or a missing one that was promised, means the
	// answer may come from another authorization server (mix-up attack).
	if iss := q.Get("iss"); (iss != "" && iss != p.Issuer) || (iss == "" && p.IssSupported) {
		err := fmt.Errorf("authorization response issuer %q is not %q", iss, p.Issuer)
		log.WarnContext(ctx, "oauth callback refused", "reason", err)
		m.failed(ctx, idx, err)
		return refused("The answer does not come from the expected authorization server.")
	}
	code := q.Get("code")
	if code == "" {
		log.WarnContext(ctx, "oauth callback refused", "reason", "no code")
		m.failed(ctx, idx, errors.New("the authorization server sent no code"))
		return refused("The authorization server sent no code.")
	}

	c := m.currentClient(idx.Server, p.Client)
	hc, err := m.remoteNamed(ctx, idx.Server)
	if err != nil {
		log.WarnContext(ctx, "oauth code exchange impossible", "err", err)
		m.failed(ctx, idx, err)
		return callbackResult{status: http.StatusBadGateway, Title: "Authorization failed",
			Message: "packbot could not reach the authorization server. Go back to the chat and try again."}
	}
	var key *dpopKey
	if len(p.DPoPKey) > 0 {
		if key, err = parseDPoPKey(p.DPoPKey); err != nil {
			log.ErrorContext(ctx, "oauth code exchange impossible", "err", err)
			m.failed(ctx, idx, err)
			return callbackResult{status: http.StatusInternalServerError, Title: "Something went wrong",
				Message: "packbot could not read this authorization. Go back to the chat and try again."}
		}
	}
	tr, bound, err := m.tokenRequest(ctx, hc, p.TokenEndpoint, c, url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {p.RedirectURI},
		"code_verifier": {p.Verifier},
		"resource":      {p.Resource},
	}, key)
	if err != nil {
		log.WarnContext(ctx, "oauth code exchange failed", "err", err)
		var ae *AuthorizationError
		if errors.As(err, &ae) && ae.Code == "invalid_client" {
			m.dropClient(ctx, c)
		}
		m.failed(ctx, idx, err)
		return callbackResult{status: http.StatusBadGateway, Title: "Authorization failed",
			Message: "The authorization server did not give packbot a token. Go back to the chat and try again.",
			Detail:  safeDetail(err)}
	}
	g := m.grantFrom(tr, grant{
		Issuer: p.Issuer, TokenEndpoint: p.TokenEndpoint, RevocationEndpoint: p.RevocationEndpoint,
		Resource: p.Resource, Client: p.Client, Scope: scopeString(p.Scopes),
		Requested: p.Scopes, StepUps: p.StepUps,
	}, now)
	if bound {
		g.DPoPKey = p.DPoPKey
	}
	gk := grantKey(idx.Identity, idx.Server)
	sealed, err := m.sealJSON(gk, g)
	if err == nil {
		err = m.creds.PutCredential(ctx, store.Credential{Identity: idx.Identity, Server: idx.Server, Kind: store.KindOAuth, Secret: sealed})
	}
	if err != nil {
		log.ErrorContext(ctx, "oauth store tokens", "err", err)
		m.failed(ctx, idx, err)
		return callbackResult{status: http.StatusInternalServerError, Title: "Something went wrong",
			Message: "packbot could not save the authorization. Go back to the chat and try again."}
	}
	log.InfoContext(ctx, "oauth authorized", "scope", g.Scope, "expires", g.Expiry, "refreshable", g.RefreshToken != "", "dpop", bound)
	if m.onAuthorized != nil {
		m.onAuthorized(ctx, idx.Identity, idx.Server)
	}
	return callbackResult{status: http.StatusOK, Title: "Authorized",
		Message: fmt.Sprintf("packbot can now use %s for you. You can close this page and go back to the chat.", idx.Server)}
}

// safeDetail shows the authorization server's own error, never a transport error's text.
func safeDetail(err error) string {
	var ae *AuthorizationError
	if errors.As(err, &ae) {
		return ae.Error()
	}
	return ""
}

// lookupState reads the state index record.
func (m *Manager) lookupState(ctx context.Context, stateHash string) (stateIndex, error) {
	r, err := m.records.GetRecord(ctx, nsState, stateHash)
	if errors.Is(err, store.ErrNotFound) {
		return stateIndex{}, errUnknownState
	}
	if err != nil {
		return stateIndex{}, err
	}
	var idx stateIndex
	if err := json.Unmarshal(r.Value, &idx); err != nil || idx.Identity == "" || idx.Server == "" {
		return stateIndex{}, fmt.Errorf("state record: malformed value")
	}
	return idx, nil
}

// claim marks the pending authorization used, under the row lock, so that one callback only
// (in any process) goes on with it.
func (m *Manager) claim(ctx context.Context, idx stateIndex, stateHash string, now time.Time) (pending, error) {
	pk := pendingKey(idx.Identity, idx.Server)
	var p pending
	_, err := m.creds.UpdateCredential(ctx, pk, func(c store.Credential) (store.Credential, error) {
		pp, err := m.openPending(pk, c.Secret)
		if err != nil {
			return c, err
		}
		switch {
		case pp.StateHash != stateHash:
			return c, errReplaced
		case pp.Claimed:
			return c, errUsed
		case !now.Before(pp.ExpiresAt):
			return c, ErrExpired
		}
		pp.Claimed = true
		if c.Secret, err = m.sealJSON(pk, pp); err != nil {
			return c, err
		}
		p = pp
		return c, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return pending{}, errUsed
	}
	return p, err
}

// cleanupPending deletes the state index record and the pending authorization it points to.
func (m *Manager) cleanupPending(ctx context.Context, idx stateIndex, stateHash string) {
	if err := m.records.DeleteRecord(ctx, nsState, stateHash); err != nil {
		m.log.WarnContext(ctx, "oauth delete state record", "err", err)
	}
	pk := pendingKey(idx.Identity, idx.Server)
	c, err := m.creds.GetCredential(ctx, pk)
	if err != nil {
		return
	}
	// Keep a newer pending authorization that replaced this one meanwhile.
	if p, err := m.openPending(pk, c.Secret); err == nil && p.StateHash != stateHash {
		return
	}
	if err := m.creds.DeleteCredentials(ctx, idx.Identity, idx.Server, KindPending); err != nil {
		m.log.WarnContext(ctx, "oauth delete pending authorization", "err", err)
	}
}

func (m *Manager) failed(ctx context.Context, idx stateIndex, err error) {
	if m.onFailed != nil {
		m.onFailed(ctx, idx.Identity, idx.Server, err)
	}
}

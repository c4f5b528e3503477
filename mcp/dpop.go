package mcp

import (
	"context"
	"net/http"
	"strings"

	"github.com/packbot/packbot/store/secret"
)

// Sender-constrained tokens (DPoP, RFC 9449): an authorizer that implements [Binder] presents
// its tokens with a proof per request. The header transport tells the header functions which
// request they are for, remembers the nonce a server gives in DPoP-Nonce, and sends a request
// once more when the server refused it only for want of that nonce (a 401 with
// error="use_dpop_nonce"): a 401 means the server did not act on it.

// requestKey carries the HTTPRequest a header function is asked for.
type requestKey struct{}

func withRequest(ctx context.Context, r HTTPRequest) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// presentToken sets in h the headers that carry tok to server for identity: those of a
// [Binder] for the request in ctx, else Authorization: Bearer.
func presentToken(ctx context.Context, auth any, identity, server, tok string, h map[string]secret.Value) error {
	if b, ok := auth.(Binder); ok {
		if req, ok := ctx.Value(requestKey{}).(HTTPRequest); ok {
			bound, err := b.Bind(ctx, identity, server, tok, req)
			if err != nil {
				return err
			}
			if bound != nil {
				for k, v := range bound {
					h[k] = secret.NewValue(v)
				}
				return nil
			}
		}
	}
	h[authorization] = secret.NewValue("Bearer " + tok)
	return nil
}

// presentedToken is the token of an Authorization header, Bearer or DPoP.
func presentedToken(v secret.Value) string {
	s := v.Reveal()
	if scheme, tok, ok := strings.Cut(s, " "); ok && (strings.EqualFold(scheme, "bearer") || strings.EqualFold(scheme, "dpop")) {
		return tok
	}
	return s
}

// sawNonce remembers the DPoP nonce a server answered with.
func (t *headerTransport) sawNonce(resp *http.Response) {
	if n := resp.Header.Get("DPoP-Nonce"); n != "" {
		t.mu.Lock()
		t.nonce = n
		t.mu.Unlock()
	}
}

// request describes req for a header function, with the server's last nonce.
func (t *headerTransport) request(req *http.Request) HTTPRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return HTTPRequest{Method: req.Method, URL: req.URL.String(), Nonce: t.nonce}
}

// wantsNonce reports whether a 401 asks for a DPoP proof with the server's nonce, to a request
// that carried one (RFC 9449 §9).
func wantsNonce(resp *http.Response, sent map[string]secret.Value) bool {
	_, dpop := sent["DPoP"]
	return dpop && resp.Header.Get("DPoP-Nonce") != "" && strings.Contains(resp.Header.Get("WWW-Authenticate"), "use_dpop_nonce")
}

package mcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/packbot/packbot/packs"
	"github.com/packbot/packbot/store/secret"
)

// sharedHeaders returns the headers of the shared session of an admin-controlled server: the
// pack's, plus, when the server's authentication mode is client_credentials, the bearer token
// of m. After a 401 the transport asks again (see [renewal]): the token
// the server refused is renewed once and the request sent again, since a 401 means the server
// did not act on it.
func (p *Pool) sharedHeaders(s *packs.Server, m MachineAuthorizer) (headerFunc, error) {
	if !s.MachineAuth() {
		return staticHeaders(s.Headers), nil
	}
	if m == nil {
		return nil, fmt.Errorf("MCP server %s: authentication mode client_credentials needs a machine authorizer (mcp.Config.Machine)", s.Name)
	}
	static := make(map[string]secret.Value, len(s.Headers)+1)
	for k, v := range staticValues(s.Headers) {
		if !strings.EqualFold(k, authorization) { // the token replaces it (the pack validator warns)
			static[k] = v
		}
	}
	name := s.Name
	return func(ctx context.Context) (map[string]secret.Value, error) {
		var tok string
		var err error
		if r, ok := ctx.Value(renewalKey{}).(*renewal); ok {
			rejected := presentedToken(r.rejected[authorization])
			tok, err = m.Renew(ctx, name, rejected)
			r.renewed = err == nil && tok != rejected
		} else {
			tok, err = m.Token(ctx, name)
		}
		if err != nil {
			return nil, err
		}
		h := make(map[string]secret.Value, len(static)+1)
		for k, v := range static {
			h[k] = v
		}
		return h, presentToken(ctx, m, "", name, tok, h)
	}, nil
}

// authorization is the header a bearer token goes in.
const authorization = "Authorization"

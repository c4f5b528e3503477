// Package oauth signs packbot's users in to user-controlled MCP servers whose pack entry says
// `authentication: {mode: oauth2}`, with OAuth 2.1 as the MCP authorization profile requires:
// protected-resource metadata found through the server's WWW-Authenticate challenge (RFC 9728),
// authorization-server metadata (RFC 8414, then OpenID Connect discovery), a pre-registered
// client or dynamic client registration (RFC 7591), PKCE S256 (RFC 7636), the resource indicator
// (RFC 8707) on every authorization and token request, and the iss check of RFC 9207. Without a
// pre-registered client it uses its own Client ID Metadata Document when the authorization server
// supports those ([Manager.ClientMetadataHandler]), else registers as a public client. A 403
// insufficient_scope leads to a bounded step-up ([Manager.StepUp]); a server without metadata
// gets the MCP 2025-03-26 defaults. The challenge is found as a 2026-07-28 client meets it
// (server/discover, then tools/list, with the protocol header and _meta; 2025-11-25's
// initialize for older servers), or taken from a request the server refused
// ([Manager.BeginAfter]). Where the authorization server advertises DPoP, tokens are bound to
// a key of packbot's and presented with a proof per request ([Manager.Bind], RFC 9449). Every
// URL a server or document names passes an SSRF guard (https, same origin, protected-resource
// metadata without redirects, no non-public address unless the server is on one, checked at
// dial time, and for a server on a non-public address an authorization server on its origin or
// named in the pack: see [ErrDiscoveryRefused]).
//
// The flow survives across a chat: [Manager.Begin] returns a link for the bot to send, and the
// user comes back minutes later through [Manager.CallbackHandler] on packbot's own HTTP server,
// possibly after a restart or on another replica, because everything the callback needs is in
// the store (secrets sealed by store/secret, bound to the user and server). The token set is
// kept as a [store.KindOAuth] credential per (identity, server); [Manager] implements
// [mcp.Authorizer], refreshing before expiry and, after a 401, once more before asking the user
// to authorize again.
//
// A command-line tool (packbot mcp smoke) signs its user in with a [Loopback] instead (RFC 8252):
// the browser comes back to a listener on 127.0.0.1 and a free port, registered as the redirect
// URI of a native client.
//
// Admin-controlled servers whose entry says `authentication: {mode: client_credentials}` get
// packbot's own tokens from a [Machine] ([mcp.MachineAuthorizer]): the client-credentials grant
// with client_secret_basic, client_secret_post or private_key_jwt (RFC 7523, ES256 or RS256,
// the assertion's audience the issuer), the token endpoint discovered as above, tokens kept in
// memory and renewed before expiry and once after a 401. With `mode: workload_identity` the
// Machine presents the JWT the platform issued the workload instead (the RFC 7523 jwt-bearer
// grant).
//
// The package owns the OAuth protocol and its rows; it does not open MCP sessions (package mcp
// does, asking [Manager.Token] for the bearer), talk to the user (the conversation flow sends the
// link and reacts to Config.OnAuthorized), or serve HTTP (cmd mounts the callback handler).
//
// Minimal use:
//
//	m, err := oauth.New(oauth.Config{Credentials: st, Records: st, Keyring: kr,
//		Servers: pack.MCP.Servers, CallbackURL: publicURL + oauth.DefaultCallbackPath,
//		OnAuthorized: tellTheChat})
//	mux.Handle(oauth.DefaultCallbackPath, m.CallbackHandler())
//	mux.Handle(oauth.DefaultClientMetadataPath, m.ClientMetadataHandler()) // with Config.ClientMetadataURL
//	link, err := m.Begin(ctx, identity, "github") // send link to the user
//	tok, err := m.Token(ctx, identity, "github")  // later, for each request to the server
package oauth

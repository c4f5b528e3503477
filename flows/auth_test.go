package flows

import (
	"strings"
	"testing"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/store"
)

// TestWelcome: a new connection gets the bot's profile; the greeting comes with the wallet's
// profile, in its language, without a name for a guest.
func TestWelcome(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.s = store.Session{ConnectionID: "conn-1"} // new
	fx, err := f.handle(channel.ConnectionReady{Conn: "conn-1"})
	if err != nil || len(fx.Out) != 1 || fx.Out[0].Profile == nil || fx.Out[0].Profile.DisplayName != "unit bank" {
		t.Fatalf("connection: %+v, %v", fx.Out, err)
	}
	f.s.CreatedAt = f.now
	got := f.do(channel.ProfileReceived{Conn: "conn-1", PreferredLanguage: "es"})
	if len(got) != 1 || got[0] != "¡Hola! Este es el banco." || f.s.Language != "es" {
		t.Fatalf("greeting %q in %q", got, f.s.Language)
	}
	if got := f.do(channel.MenuRequested{Conn: "conn-1"}); len(got) != 0 {
		t.Fatalf("menu request answered %q", got)
	}
	// An event of a connection the bot has no session for is its arrival.
	f.s = store.Session{ConnectionID: "conn-1"}
	fx, err = f.handle(channel.TextReceived{Conn: "conn-1", Content: "/lang en"})
	if err != nil || len(fx.Out) != 2 || fx.Out[0].Profile == nil || fx.Out[1].Text.Content != f.tr("LANG_SET", "language", "English") {
		t.Fatalf("first event: %+v, %v", fx.Out, err)
	}
	fx, err = f.handle(channel.ConnectionClosed{Conn: "conn-1"})
	if err != nil || !fx.DeleteSession || len(fx.ClearMemory) != 1 {
		t.Fatalf("closed: %+v, %v", fx, err)
	}
}

// TestLogin: the authentication dialog waits in AUTH for the presentation of its request; a
// verified one logs in with the credential's roles (or the default role), records them, and
// greets by name; texts meanwhile are answered "waiting".
func TestLogin(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	fx, err := f.handle(channel.MenuSelected{Conn: "conn-1", OptionID: "authenticate"})
	if err != nil || len(fx.Out) != 1 || fx.Out[0].ProofRequest == nil || f.s.State != store.StateAuth {
		t.Fatalf("authenticate: %+v, %v, state %s", fx.Out, err, f.s.State)
	}
	req := fx.Out[0].ProofRequest
	if req.Purpose != f.tr("AUTH_PROOF_PURPOSE") {
		t.Fatalf("proof request %+v", req)
	}
	f.want(f.say("hello?"), key("WAITING_CREDENTIAL"))
	f.want(f.say("/whoami"), key("WHOAMI_GUEST", "roles", "guest"))
	// Another request's presentation is ignored.
	if got := f.do(channel.PresentationResult{Conn: "conn-1", RequestID: "other", Outcome: channel.Verified}); len(got) != 0 || f.s.State != store.StateAuth {
		t.Fatalf("other request: %q", got)
	}
	exp := f.now.Add(time.Hour)
	f.want(f.do(channel.PresentationResult{Conn: "conn-1", RequestID: req.ID, Outcome: channel.Verified, Expires: exp,
		Claims: map[string]any{"email": "ana@acme.corp", "firstName": "Ana", "lastName": "Ruiz"}}), key("AUTH_SUCCESS_NAME", "name", "Ana Ruiz"))
	if !f.s.Authenticated || f.s.State != store.StateChat || len(f.s.Roles) != 1 || f.s.Roles[0] != "employee" || f.st.ids["ana@acme.corp"].DisplayName != "Ana Ruiz" {
		t.Fatalf("session %+v, directory %+v", f.s, f.st.ids)
	}
	// No dialog: a presentation is ignored.
	if got := f.do(channel.PresentationResult{Conn: "conn-1", RequestID: req.ID, Outcome: channel.Verified}); len(got) != 0 {
		t.Fatalf("late presentation %q", got)
	}
	f.want(f.say("/whoami"), key("WHOAMI_AUTHENTICATED", "name", "Ana Ruiz", "identity", "ana@acme.corp", "roles", "employee"))
	// Expiry logs out.
	f.now = exp.Add(time.Second)
	got := f.say("/whoami")
	f.want(got, key("AUTH_EXPIRED"), key("WHOAMI_GUEST", "roles", "guest"))

	// Another user on the connection: the previous one's memory goes; no name, no roles claim.
	f.login("bob@acme.corp", "finance-manager")
	f.s.State, f.s.Flow = store.StateAuth, encodeDialog(&authWait{Request: "r2"}) // the menu offers no login now
	fx, err = f.handle(channel.PresentationResult{Conn: "conn-1", RequestID: "r2", Outcome: channel.Verified, Claims: map[string]any{"email": "cy@acme.corp"}})
	if err != nil || outTexts(fx.Out)[0] != f.tr("AUTH_SUCCESS") || len(fx.ClearMemory) != 1 || f.s.Roles[0] != "employee" {
		t.Fatalf("second login: %q %v %+v", outTexts(fx.Out), err, fx.ClearMemory)
	}
	f.want(f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "logout"}), key("LOGOUT_CONFIRMATION"))
	if f.s.Authenticated || f.s.Identity != "" {
		t.Fatalf("after logout %+v", f.s)
	}
}

// TestLoginFailures: every outcome but Verified ends the dialog with its message; a
// credential without the identity attribute fails; no credential invites to the issuer.
func TestLoginFailures(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	for _, c := range []struct {
		p    channel.PresentationResult
		want [][]string
	}{
		{channel.PresentationResult{Outcome: channel.Declined}, [][]string{key("AUTH_DECLINED")}},
		{channel.PresentationResult{Outcome: channel.TimedOut}, [][]string{key("AUTH_TIMEOUT")}},
		{channel.PresentationResult{Outcome: channel.VerificationFailed, Reason: "bad"}, [][]string{key("AUTH_FAILED")}},
		{channel.PresentationResult{Outcome: channel.Verified, Claims: map[string]any{"name": "x"}}, [][]string{key("AUTH_FAILED")}},
		{channel.PresentationResult{Outcome: channel.NoCredential}, [][]string{key("AUTH_NO_CREDENTIAL"), key("AUTH_NO_CREDENTIAL_ISSUER")}},
	} {
		f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "authenticate"})
		c.p.Conn, c.p.RequestID = "conn-1", f.e.dialogOf(f.s).(*authWait).Request
		fx, err := f.handle(c.p)
		if err != nil {
			t.Fatal(err)
		}
		f.want(outTexts(fx.Out), c.want...)
		if f.s.State != store.StateChat || f.s.Flow != nil || f.s.Authenticated {
			t.Fatalf("%s: session %+v", c.p.Outcome, f.s)
		}
		if c.p.Outcome == channel.NoCredential && fx.Out[1].Invitation == nil {
			t.Fatalf("no invitation: %+v", fx.Out)
		}
	}
	// The directory unreachable: the login is handled again later.
	f.st.putErr = store.ErrUnavailable
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "authenticate"})
	d := f.e.dialogOf(f.s).(*authWait)
	if _, err := f.handle(channel.PresentationResult{Conn: "conn-1", RequestID: d.Request, Outcome: channel.Verified,
		Claims: map[string]any{"email": "ana@acme.corp"}}); !retryable(err) {
		t.Fatalf("store down: %v", err)
	}
	// Another directory error: the login stands.
	f.s = store.Session{ConnectionID: "conn-1", CreatedAt: f.now} // the bot drops a retried event's changes
	f.st.putErr = errBoom
	f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "authenticate"})
	d = f.e.dialogOf(f.s).(*authWait)
	f.want(f.do(channel.PresentationResult{Conn: "conn-1", RequestID: d.Request, Outcome: channel.Verified,
		Claims: map[string]any{"email": "ana@acme.corp"}}), key("AUTH_SUCCESS"))
}

// TestAuthUnavailable: without proofs the menu action says so; a required login walls chat.
func TestAuthUnavailable(t *testing.T) {
	caps := channel.Capabilities{Questions: true}
	f := newFixture(t, fixtureOptions{caps: &caps, pack: unitPackRequired()})
	f.want(f.do(channel.MenuSelected{Conn: "conn-1", OptionID: "authenticate"}), key("UNKNOWN_MENU_OPTION"))
	f.want(f.say("hello"), key("AUTH_REQUIRED"))
	f.want(f.say("/tools"), key("AUTH_REQUIRED"))
	f.want(f.say("/call get_exchange_rate"), key("AUTH_REQUIRED"))
	f.want(f.run((*turn).authenticate), key("AUTH_UNAVAILABLE"))
}

func unitPackRequired() string {
	return replaceOnce(unitPack, "    defaultRole: employee\n", "    defaultRole: employee\n    required: true\n")
}

// TestPackSwapLogin: a pack swapped in that reads logins another way (here: roles from another
// attribute) logs the user out at their next event, or when the bot revisits the session, with
// a notice; a pack with the same authentication keeps them; a login recorded before logins
// carried their pack's requirement is taken as the running pack's.
func TestPackSwapLogin(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.login("ana@acme.corp", "employee")
	if f.s.Login == "" || f.s.Login != LoginDigest(f.e.pack) {
		t.Fatalf("login not recorded: %+v", f.s)
	}
	same := newFixture(t, fixtureOptions{}) // the same pack, swapped in again
	fx, err := same.e.Revisit(t.Context(), &f.s)
	if err != nil || len(fx.Out) != 0 || !f.s.Authenticated {
		t.Fatalf("same pack: %+v, %v, %+v", fx.Out, err, f.s)
	}
	other := newFixture(t, fixtureOptions{pack: strings.Replace(unitPack, "rolesAttribute: roles", "rolesAttribute: groups", 1)})
	if LoginDigest(other.e.pack) == f.s.Login {
		t.Fatal("the rolesAttribute does not change the login digest")
	}
	saved := f.s
	fx, err = other.e.Revisit(t.Context(), &f.s)
	if err != nil || len(fx.Out) != 1 || fx.Out[0].Text.Content != f.tr("AUTH_PACK_CHANGED") || f.s.Authenticated || f.s.Login != "" {
		t.Fatalf("other pack, revisit: %+v, %v, %+v", fx.Out, err, f.s)
	}
	// At the user's next event: logged out first, then the event is handled as a guest's.
	other.s = saved
	other.want(other.say("/whoami"), key("AUTH_PACK_CHANGED"), key("WHOAMI_GUEST", "roles", "guest"))
	// A login from before: stamped with the running pack's requirement, not logged out.
	legacy := saved
	legacy.Login = ""
	if fx, err = other.e.Revisit(t.Context(), &legacy); err != nil || len(fx.Out) != 0 || !legacy.Authenticated || legacy.Login != LoginDigest(other.e.pack) {
		t.Fatalf("legacy login: %+v, %v, %+v", fx.Out, err, legacy)
	}
}

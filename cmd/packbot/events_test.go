package main

// TestEventsPoison: a poison event in a real `packbot serve` process (the VS Agent driver of
// vsagent_driver_test.go), on PostgreSQL and on SQLite: the database refuses the commit of one
// message's reply, other connections are answered meanwhile, the event is parked after its
// retries with an apology to its user, `packbot events parked` lists it (never its content),
// and `packbot events replay` hands it back once the fault is gone, and it is answered. (That a
// panicking flow takes the same way is shown in package bot.)

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/packbot/packbot/bot"
	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/mcp/demoserver"
	"github.com/packbot/packbot/store/storetest"
)

// poisonReason is the reason of a parked event whose commit the database refused.
const poisonReason = "the commit failed"

// poison makes the database refuse every reply that holds text (a trigger on the outbox, the
// kind of fault a flow's bug or a bad row causes): the event that makes one fails each time it
// is handled. Without a hook of any kind in packbot. key and value name the store, as for serve.
func poison(ctx context.Context, t *testing.T, key, value, text string) (cure func()) {
	t.Helper()
	if key == "DATABASE_URL" {
		conn, err := pgx.Connect(ctx, value)
		fatal(t, err)
		t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
		_, err = conn.Exec(ctx, `CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $f$
			BEGIN IF NEW.payload::text LIKE '%`+text+`%' THEN RAISE EXCEPTION 'this row is refused'; END IF; RETURN NEW; END $f$;
			CREATE TRIGGER refuse_poison BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION refuse_poison()`)
		fatal(t, err)
		return func() {
			_, err := conn.Exec(ctx, `DROP TRIGGER refuse_poison ON outbox; DROP FUNCTION refuse_poison()`)
			fatal(t, err)
		}
	}
	db, err := sql.Open("sqlite", filepath.Join(value, "packbot.db")+"?_pragma=busy_timeout(10000)")
	fatal(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.ExecContext(ctx, `CREATE TRIGGER refuse_poison BEFORE INSERT ON outbox WHEN NEW.payload LIKE '%`+text+`%'
		BEGIN SELECT RAISE(ABORT, 'this row is refused'); END`)
	fatal(t, err)
	return func() {
		_, err := db.ExecContext(ctx, `DROP TRIGGER refuse_poison`)
		fatal(t, err)
	}
}

func TestEventsPoison(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		dsn := storetest.PostgresDSN(t)
		testPoison(t, "DATABASE_URL", dsn)
	})
	t.Run("sqlite", func(t *testing.T) {
		testPoison(t, "PACKBOT_DATA_DIR", filepath.Join(t.TempDir(), "data"))
	})
}

// testPoison runs the scenario on the store that the variable key set to value names, for
// serve and for the in-process `packbot events`.
func testPoison(t *testing.T, key, value string) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cliEnv := map[string]string{key: value}
	b := newVABot(t, 1, vaPack, &demoserver.Options{Name: "bank"}, key+"="+value)
	s := b.serves[0]
	poisonText := "detonate " + uuid.NewString()[:8]
	s.start(`msg="bot running"`)
	cure := poison(ctx, t, key, value, poisonText)
	connect := func(lang string) *vaUser {
		u := b.user("User", lang)
		b.connected(t, u.conn)
		b.received(t, u.conn, "profile", fmt.Sprintf(`"displayName":"User","preferredLanguage":%q`, lang))
		u.textIs(ctx, t, 0, greeting(b.cat, lang))
		return u
	}
	ana, bob := connect("es"), connect("en")
	// texts are what ana was sent after her greeting.
	texts := func() []string { return e2eTexts(b.agent.messages(ana.conn))[1:] }

	// Ana's poison message, and one after it, queued behind it.
	start := time.Now()
	b.text(t, ana.conn, poisonText)
	b.text(t, ana.conn, "after the poison")
	s.running().waitLog(t, `msg="commit event"`)

	// Bob is answered while ana's event fails and waits for its next attempt.
	from := bob.mark()
	b.text(t, bob.conn, "hello while ana's event fails")
	bob.textIs(ctx, t, from, echo("hello while ana's event fails"))
	if got := texts(); len(got) != 0 {
		t.Fatalf("ana was sent %q before her event was parked", got)
	}
	bobAnswered := time.Since(start)

	// After its last attempt the event is parked, ana gets the apology in Spanish, and her next
	// message is answered.
	if _, err := b.agent.waitFor(ctx, ana.conn, func([]e2ePosted) bool { return len(texts()) >= 2 }); err != nil {
		t.Fatalf("ana: no apology and answer (%v): %q", err, texts())
	}
	if got, want := texts(), []string{b.cat.T("es", "PARKED_APOLOGY"), echo("after the poison")}; !slices.Equal(got, want) {
		t.Fatalf("ana was sent %q, want the apology (PARKED_APOLOGY, es) then the answer to her next message %q", got, want)
	}
	t.Logf("bob answered %v after ana's poison message; ana's event parked, apology sent %v after it",
		bobAnswered.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	// packbot events parked lists it, with its reason and not its content.
	code, out, errOut := cli(t, cliEnv, "events", "parked", "--json")
	if code != 0 {
		t.Fatalf("events parked --json: exit %d: %s", code, errOut)
	}
	var evs []parkedEvent
	for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); {
		var ev parkedEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("events parked --json: %v in %q", err, sc.Text())
		}
		evs = append(evs, ev)
	}
	if len(evs) != 1 {
		t.Fatalf("events parked --json: %d events, want 1:\n%s", len(evs), out)
	}
	ev := evs[0]
	if ev.Connection != ana.conn || ev.Kind != channel.KindTextReceived || ev.Attempts != bot.DefaultMaxAttempts ||
		ev.Reason != poisonReason || ev.ParkedAt.Before(ev.AcceptedAt) {
		t.Errorf("parked event %+v, want ana's text, %d attempts, reason %q", ev, bot.DefaultMaxAttempts, poisonReason)
	}
	id := strconv.FormatInt(ev.ID, 10)
	jsonOut := out
	code, out, errOut = cli(t, cliEnv, "events", "parked")
	if code != 0 || !strings.Contains(out, "REASON") {
		t.Fatalf("events parked: exit %d: %s%s", code, out, errOut)
	}
	row := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1])
	if len(row) < 6 || row[0] != id || row[1] != ana.conn || row[2] != channel.KindTextReceived || row[3] != strconv.Itoa(bot.DefaultMaxAttempts) ||
		!strings.Contains(out, poisonReason) {
		t.Errorf("events parked:\n%s", out)
	}
	if strings.Contains(out+jsonOut, poisonText) {
		t.Errorf("the listing shows the message's content:\n%s%s", out, jsonOut)
	}

	// Stop packbot (SIGTERM, exit 0), take the fault away, start it again and replay the
	// event: it is answered.
	s.stop()
	cure()
	s.start(`msg="bot running"`)
	if code, _, errOut := cli(t, cliEnv, "events", "replay", "999999999"); code != 1 || !strings.Contains(errOut, "event 999999999 is not parked") {
		t.Errorf("events replay of an unknown id: exit %d: %s", code, errOut)
	}
	code, out, errOut = cli(t, cliEnv, "events", "replay", id)
	if want := fmt.Sprintf("event %s of connection %s is pending again\n", id, ana.conn); code != 0 || out != want {
		t.Fatalf("events replay %s: exit %d, %q (want %q) %s", id, code, out, want, errOut)
	}
	replayed := time.Now()
	if _, err := b.agent.waitFor(ctx, ana.conn, func([]e2ePosted) bool { return len(texts()) >= 3 }); err != nil {
		t.Fatalf("the replayed event was not answered (%v): %q", err, texts())
	}
	if got := texts()[2:]; !slices.Equal(got, []string{echo(poisonText)}) {
		t.Errorf("after the replay ana was sent %q, want %q", got, echo(poisonText))
	}
	t.Logf("replayed event answered %v after `packbot events replay`", time.Since(replayed).Round(time.Millisecond))
	if code, out, _ := cli(t, cliEnv, "events", "parked"); code != 0 || out != "no parked events\n" {
		t.Errorf("events parked after the replay: exit %d, %q", code, out)
	}

	// Bob was never told anything went wrong; the packbot without the fault logged no error.
	checkNoErrorTexts(t, "bob", b.cat, "en", e2eTexts(b.agent.messages(bob.conn)))
	last := s.running()
	s.stop()
	if logs := last.output(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("packbot without the fault logged errors:\n%s", logs)
	}
}

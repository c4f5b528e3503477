package main

// PostgreSQL for the process tests: a private cluster that a test may restart, and the wait
// until a bot's store has nothing left to do.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packbot/packbot/store"
)

// pgCluster is a private PostgreSQL cluster for one test (initdb in a temporary folder, its
// own port), which the test may restart without disturbing the system cluster other tests use.
type pgCluster struct {
	t    *testing.T
	bin  string // folder of initdb, pg_ctl
	dir  string // the cluster's folder (data, socket, log)
	port int
	// asUser runs the server programs as this user (initdb refuses root); "" is the test's user.
	asUser string
}

// postgresBinDir finds the folder holding initdb and pg_ctl (the newest version installed).
func postgresBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

// startPGCluster creates and starts a private cluster on a free port; the test's cleanup stops
// it and removes its files. It skips the test when no PostgreSQL programs are installed (a
// failure when CI=true).
func startPGCluster(t *testing.T) *pgCluster {
	t.Helper()
	unavailable := t.Skipf
	if os.Getenv("CI") == "true" {
		unavailable = t.Fatalf
	}
	bin := postgresBinDir()
	if bin == "" {
		unavailable("no PostgreSQL server programs (initdb, pg_ctl) installed: cannot run a private cluster")
	}
	c := &pgCluster{t: t, bin: bin}
	dir, err := os.MkdirTemp("", "packbot-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: the cluster belongs to the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			unavailable("running as root without a postgres user to own a private cluster: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.asUser = "postgres"
	}
	_, port, _ := net.SplitHostPort(freeAddr(t))
	c.port, _ = strconv.Atoi(port)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	data := filepath.Join(dir, "data")
	if out, err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	conf := fmt.Sprintf("\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\nmax_connections = 60\n", c.port, dir)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(conf)
	if err := errors.Join(err, f.Close()); err != nil {
		t.Fatal(err)
	}
	if out, err := c.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, c.log())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := c.run(ctx, "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"); err != nil {
			t.Errorf("pg_ctl stop: %v\n%s", err, out)
		}
	})
	return c
}

// DSN is the URL of the cluster's postgres database.
func (c *pgCluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// restart runs `pg_ctl restart -m fast`: the server ends every session and starts again; it
// returns once the server accepts connections again.
func (c *pgCluster) restart(ctx context.Context) error {
	// -l again: without it the new server would write to pg_ctl's output, which would then
	// never end.
	out, err := c.run(ctx, "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-l", filepath.Join(c.dir, "log"), "-m", "fast", "-w", "-t", "60", "restart")
	if err != nil {
		return fmt.Errorf("pg_ctl restart: %w\n%s\n%s", err, out, c.log())
	}
	return nil
}

// run runs one of the server programs, as the cluster's owner.
func (c *pgCluster) run(ctx context.Context, prog string, args ...string) (string, error) {
	name, argv := filepath.Join(c.bin, prog), args
	if c.asUser != "" {
		name, argv = "runuser", append([]string{"-u", c.asUser, "--", filepath.Join(c.bin, prog)}, args...)
	}
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Dir = c.dir
	cmd.SysProcAttr = childOfTest()
	cmd.WaitDelay = 5 * time.Second // a server started without -l would hold the output open
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *pgCluster) log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "log"))
	return lastLines(string(b), 40)
}

// storeSettled waits until the store at dsn has nothing left to do for conns (all
// connections when empty): no event not done in the inbox, nothing in the outbox, no approval
// pending or executing; a parked event is an error.
func storeSettled(ctx context.Context, dsn string, conns ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var inbox, parked, outbox, approvals int
	err = pollUntil(ctx, 20*time.Millisecond, func() (bool, error) {
		err := conn.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM inbox WHERE state = 'pending' AND (coalesce(cardinality($3::text[]), 0) = 0 OR connection_id = ANY($3))),
			(SELECT count(*) FROM inbox WHERE state = 'parked'),
			(SELECT count(*) FROM outbox WHERE coalesce(cardinality($3::text[]), 0) = 0 OR connection_id = ANY($3)),
			(SELECT count(*) FROM approvals WHERE status = $1 OR exec = $2)`,
			store.ApprovalPending, store.ExecClaimed, conns).Scan(&inbox, &parked, &outbox, &approvals)
		return err == nil && inbox == 0 && outbox == 0 && approvals == 0, err
	})
	if err != nil {
		return fmt.Errorf("the store never settled: %d events pending, %d messages in the outbox, %d approvals open: %w", inbox, outbox, approvals, err)
	}
	if parked > 0 {
		return fmt.Errorf("%d events parked", parked)
	}
	return nil
}

package credo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/packbot/packbot/interop/internal/nodetest"
)

// Options configure a harness agent; the zero value (or nil) is a default Credo wallet.
type Options struct {
	// Label is the wallet's name, sent to the peer in DID exchange (default "Credo wallet").
	Label string
	// Peer is the did:peer method number of the wallet's connection DIDs: 4 (Credo's default),
	// 2 or 1.
	Peer int
	// LogLevel is Credo's log level on stderr, forwarded to t.Log: off, error, warn (default),
	// info, debug, trace.
	LogLevel string
	// Dir is the directory holding harness.mjs and node_modules (default: this package's source
	// directory).
	Dir string
	// Mediator is a mediator's invitation URL: the wallet then runs as phone wallets do, with
	// no inbound endpoint, registered with that mediator and picking its messages up with
	// pickup v2 in live mode (WebSocket). Its DID documents list the mediator's endpoint and
	// routing key.
	Mediator string
}

// MediatorOptions configure a Credo mediator started with [StartMediator].
type MediatorOptions struct {
	// Endpoint is the scheme the mediator advertises first, and so the one its recipients'
	// DID documents list: "ws" (default, as phone wallets' mediators do) or "http".
	Endpoint string
	// LogLevel and Dir are as in [Options].
	LogLevel string
	Dir      string
}

// Event is one line the harness printed. Which fields are set depends on Event (see README.md).
type Event struct {
	Event string `json:"event"`
	// ReqID is the command's reqId, on a command's reply; empty on unsolicited events.
	ReqID string `json:"reqId,omitempty"`

	ConnectionID string `json:"connectionId,omitempty"`
	// ID is the DIDComm message's @id (of the message received, or sent for "sent").
	ID             string `json:"id,omitempty"`
	ThreadID       string `json:"threadId,omitempty"`
	ParentThreadID string `json:"parentThreadId,omitempty"`
	// Type is the @type of a "message" event.
	Type string `json:"type,omitempty"`
	// Body is the received DIDComm plaintext message as it came.
	Body map[string]any `json:"body,omitempty"`

	// text
	Content  string `json:"content,omitempty"`
	SentTime string `json:"sentTime,omitempty"`
	// connected
	TheirLabel string `json:"theirLabel,omitempty"`
	Role       string `json:"role,omitempty"`
	DID        string `json:"did,omitempty"`
	TheirDID   string `json:"theirDid,omitempty"`
	// invitation
	URL          string `json:"url,omitempty"`
	InvitationID string `json:"invitationId,omitempty"`
	// menu (Description also for profile)
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	Options     []MenuOption `json:"options,omitempty"`
	// question
	QuestionText   string   `json:"questionText,omitempty"`
	QuestionDetail string   `json:"questionDetail,omitempty"`
	ValidResponses []string `json:"validResponses,omitempty"`
	// profile
	DisplayName       string `json:"displayName,omitempty"`
	PreferredLanguage string `json:"preferredLanguage,omitempty"`
	SendBackYours     bool   `json:"sendBackYours,omitempty"`
	// receipts
	Receipts []Receipt `json:"receipts,omitempty"`
	// error
	Message string `json:"message,omitempty"`
	// ready
	Endpoint string `json:"endpoint,omitempty"`
	// Endpoints are all the endpoints of a ready agent (a mediator has two: ws and http).
	Endpoints []string `json:"endpoints,omitempty"`
	// stats: KMS operations and inbound envelopes (by "alg": Authcrypt, Anoncrypt) counted.
	KMS     map[string]int `json:"kms,omitempty"`
	Inbound map[string]int `json:"inbound,omitempty"`
	// proof-request and proof: the proof exchange (its id is what Present and Decline take),
	// its state (request-received, done, declined, abandoned…) and Credo's error message.
	ProofExchangeID string `json:"proofExchangeId,omitempty"`
	State           string `json:"state,omitempty"`
	ErrorMessage    string `json:"errorMessage,omitempty"`
	// credential-offer and credential: the credential exchange (its id is what
	// AcceptCredential takes) and its state (offer-received, done, declined, abandoned…).
	CredentialExchangeID string `json:"credentialExchangeId,omitempty"`

	// Raw is the whole line.
	Raw json.RawMessage `json:"-"`
}

// MenuOption is one option of an action-menu menu.
type MenuOption struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Disabled    bool   `json:"disabled"`
}

// Receipt is one entry of a receipts message.
type Receipt struct {
	MessageID string `json:"messageId"`
	State     string `json:"state"`
	Timestamp string `json:"timestamp"`
}

func (e Event) String() string {
	if len(e.Raw) > 0 {
		return string(e.Raw)
	}
	return e.Event
}

// Agent is one running harness: a Credo wallet in a node process.
type Agent struct {
	t     testing.TB
	label string
	// Endpoint is the agent's DIDComm endpoint (http://127.0.0.1:port; a mediator's first
	// endpoint; a mediated wallet's is its mediator's), Endpoints all of them.
	Endpoint  string
	Endpoints []string

	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu      sync.Mutex
	seq     int
	pending map[string]chan Event // by reqId
	queue   []Event               // unsolicited events not yet read
	wake    chan struct{}         // closed and replaced when queue grows or the agent ends
	ended   error                 // why no more events will come, once stdout is closed
	fatal   string                // a fatal error the harness reported

	exited chan struct{} // closed once the process was waited for
}

// startTimeout bounds the wait for the harness to come up (node, Credo and libsodium loading);
// it is not a performance assertion.
const startTimeout = 2 * time.Minute

// stopTimeout bounds the wait for a clean exit after "shutdown" before the process is killed.
const stopTimeout = 15 * time.Second

// Start runs a harness agent for the test and stops it in t.Cleanup. It skips the test when
// node or the harness's node_modules is missing, or fails it when CI=true.
func Start(t testing.TB, opts *Options) *Agent {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	dir := opts.Dir
	if dir == "" {
		dir = nodetest.Dir()
	}
	node := nodetest.Node(t, dir, "@credo-ts/didcomm", "the Credo harness")
	label := opts.Label
	if label == "" {
		label = "Credo wallet"
	}
	var extra []string
	if opts.Peer != 0 {
		extra = append(extra, "--peer", strconv.Itoa(opts.Peer))
	}
	if opts.Mediator != "" {
		extra = append(extra, "--mediator", opts.Mediator)
	}
	return start(t, node, dir, label, opts.LogLevel, extra)
}

// StartMediator runs a Credo mediator (mediation requests accepted, pickup v2, forward) on
// loopback HTTP and WebSocket ports, and stops it in t.Cleanup. Wallets started with
// [Options.Mediator] set to its [Agent.CreateInvitation] register with it.
func StartMediator(t testing.TB, opts *MediatorOptions) *Agent {
	t.Helper()
	if opts == nil {
		opts = &MediatorOptions{}
	}
	dir := opts.Dir
	if dir == "" {
		dir = nodetest.Dir()
	}
	node := nodetest.Node(t, dir, "@credo-ts/didcomm", "the Credo harness")
	extra := []string{"--role", "mediator"}
	if opts.Endpoint != "" {
		extra = append(extra, "--endpoint", opts.Endpoint)
	}
	return start(t, node, dir, "Credo mediator", opts.LogLevel, extra)
}

func start(t testing.TB, node, dir, label, logLevel string, extra []string) *Agent {
	t.Helper()
	args := append([]string{filepath.Join(dir, "harness.mjs"), "--label", label}, extra...)
	if logLevel != "" {
		args = append(args, "--log", logLevel)
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the Credo harness: %v", err)
	}
	a := &Agent{
		t:       t,
		label:   label,
		cmd:     cmd,
		stdin:   stdin,
		pending: make(map[string]chan Event),
		wake:    make(chan struct{}),
		exited:  make(chan struct{}),
	}

	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		a.readEvents(stdout)
	}()
	go func() {
		defer readers.Done()
		a.forwardLog(stderr)
	}()
	go func() {
		readers.Wait() // all output read before Wait closes the pipes
		status := "cleanly"
		if err := cmd.Wait(); err != nil {
			status = err.Error()
		}
		a.end(fmt.Errorf("credo harness %q exited (%s)", label, status))
		close(a.exited)
	}()
	t.Cleanup(a.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	ready, err := a.Next(ctx)
	if err != nil {
		t.Fatalf("Credo harness %q did not start: %v", label, err)
	}
	if ready.Event != "ready" {
		t.Fatalf("Credo harness %q: first event %s, want ready", label, ready)
	}
	a.Endpoint, a.Endpoints = ready.Endpoint, ready.Endpoints
	return a
}

// Stop asks the harness to shut down, kills it if it does not exit in time, and waits until
// its output is read. Start's cleanup calls it; calling it again does nothing.
func (a *Agent) Stop() {
	a.mu.Lock()
	_, err := fmt.Fprintln(a.stdin, `{"cmd":"shutdown"}`)
	a.mu.Unlock()
	if err == nil {
		_ = a.stdin.Close()
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-a.exited:
	case <-timer.C:
		a.t.Logf("Credo harness %q did not exit after shutdown; killing it", a.label)
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
}

func (a *Agent) forwardLog(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		a.t.Logf("credo[%s]: %s", a.label, sc.Text())
	}
}

func (a *Agent) readEvents(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			a.t.Logf("credo[%s]: not an event on stdout: %s", a.label, line)
			continue
		}
		e.Raw = append(json.RawMessage(nil), line...)
		a.deliver(e)
	}
	if err := sc.Err(); err != nil {
		a.end(fmt.Errorf("credo harness %q: reading its output: %v", a.label, err))
	}
}

func (a *Agent) deliver(e Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e.ReqID != "" {
		if ch, ok := a.pending[e.ReqID]; ok {
			delete(a.pending, e.ReqID)
			ch <- e // buffered
		}
		return // a reply nobody waits for any more
	}
	if e.Event == "error" {
		a.fatal = e.Message
	}
	a.queue = append(a.queue, e)
	close(a.wake)
	a.wake = make(chan struct{})
}

// end records why no more events will come; the first reason wins.
func (a *Agent) end(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended != nil {
		return
	}
	if a.fatal != "" {
		err = fmt.Errorf("%w (it reported: %s)", err, a.fatal)
	}
	a.ended = err
	for id, ch := range a.pending {
		delete(a.pending, id)
		close(ch)
	}
	close(a.wake)
	a.wake = make(chan struct{})
}

// Next returns the next unsolicited event (a received message, a connection completed, ...),
// waiting until ctx is done.
func (a *Agent) Next(ctx context.Context) (Event, error) {
	for {
		a.mu.Lock()
		if len(a.queue) > 0 {
			e := a.queue[0]
			a.queue = a.queue[1:]
			a.mu.Unlock()
			return e, nil
		}
		ended, wake := a.ended, a.wake
		a.mu.Unlock()
		if ended != nil {
			return Event{}, ended
		}
		select {
		case <-ctx.Done():
			return Event{}, fmt.Errorf("credo harness %q: no event: %w", a.label, ctx.Err())
		case <-wake:
		}
	}
}

// Expect returns the next unsolicited event, which must be of the given kind (e.g. "text",
// "menu", "message"); "connected" and "proof" (a proof exchange's later states) events are
// skipped unless kind is theirs.
func (a *Agent) Expect(ctx context.Context, kind string) (Event, error) {
	for {
		e, err := a.Next(ctx)
		if err != nil {
			return Event{}, fmt.Errorf("waiting for %s: %w", kind, err)
		}
		if (e.Event == "connected" || e.Event == "proof") && kind != e.Event {
			continue
		}
		if e.Event != kind {
			return e, fmt.Errorf("credo harness %q: got %s, want a %s event", a.label, e, kind)
		}
		return e, nil
	}
}

// call sends a command and waits for its reply; an "error" reply is returned as an error.
func (a *Agent) call(ctx context.Context, cmd map[string]any) (Event, error) {
	a.mu.Lock()
	if a.ended != nil {
		a.mu.Unlock()
		return Event{}, a.ended
	}
	a.seq++
	id := strconv.Itoa(a.seq)
	cmd["reqId"] = id
	line, err := json.Marshal(cmd)
	if err != nil {
		a.mu.Unlock()
		return Event{}, err
	}
	ch := make(chan Event, 1)
	a.pending[id] = ch
	_, err = a.stdin.Write(append(line, '\n'))
	if err != nil {
		delete(a.pending, id)
		a.mu.Unlock()
		return Event{}, fmt.Errorf("credo harness %q: send %s: %w", a.label, cmd["cmd"], err)
	}
	a.mu.Unlock()

	select {
	case e, ok := <-ch:
		if !ok {
			a.mu.Lock()
			defer a.mu.Unlock()
			return Event{}, a.ended
		}
		if e.Event == "error" {
			return e, fmt.Errorf("credo harness %q: %s", a.label, e.Message)
		}
		return e, nil
	case <-ctx.Done():
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
		return Event{}, fmt.Errorf("credo harness %q: %s: %w", a.label, cmd["cmd"], ctx.Err())
	}
}

// ReceiveInvitation accepts an out-of-band invitation (a URL with ?oob= or ?c_i=, or its JSON)
// and runs DID exchange; it returns the connection id once the connection is completed.
func (a *Agent) ReceiveInvitation(ctx context.Context, url string) (string, error) {
	cmd := map[string]any{"cmd": "receive-invitation", "url": url}
	if deadline, ok := ctx.Deadline(); ok {
		// Credo's own wait for the connection (default 60 s) ends with ctx.
		cmd["timeoutMs"] = max(1, time.Until(deadline).Milliseconds())
	}
	e, err := a.call(ctx, cmd)
	return e.ConnectionID, err
}

// CreateInvitation makes an out-of-band invitation (DID exchange) and returns its URL.
func (a *Agent) CreateInvitation(ctx context.Context) (string, error) {
	e, err := a.call(ctx, map[string]any{"cmd": "create-invitation"})
	return e.URL, err
}

// SendText sends a basic message and returns its @id.
func (a *Agent) SendText(ctx context.Context, connID, content string) (string, error) {
	return a.SendReply(ctx, connID, content, "")
}

// SendReply sends a basic message answering the message replyTo (its ~thread.pthid; none when
// replyTo is empty) and returns its @id.
func (a *Agent) SendReply(ctx context.Context, connID, content, replyTo string) (string, error) {
	cmd := map[string]any{"cmd": "send-text", "connectionId": connID, "content": content}
	if replyTo != "" {
		cmd["replyTo"] = replyTo
	}
	e, err := a.call(ctx, cmd)
	return e.ID, err
}

// Send sends an arbitrary DIDComm v1 plaintext message (with "@type"; "@id" is made up when
// absent; "~thread" and any other field are sent as given).
func (a *Agent) Send(ctx context.Context, connID string, message map[string]any) error {
	_, err := a.call(ctx, map[string]any{"cmd": "send-message", "connectionId": connID, "message": message})
	return err
}

// SendAnoncrypt sends message like Send, but packed Anoncrypt (no sender key) to the
// connection's DIDComm service. The receiver cannot tell which connection it came on.
func (a *Agent) SendAnoncrypt(ctx context.Context, connID string, message map[string]any) error {
	_, err := a.call(ctx, map[string]any{"cmd": "send-message", "connectionId": connID, "message": message, "anoncrypt": true})
	return err
}

// RequestMenu sends an action-menu menu-request and returns its @id.
func (a *Agent) RequestMenu(ctx context.Context, connID string) (string, error) {
	e, err := a.call(ctx, map[string]any{"cmd": "menu-request", "connectionId": connID})
	return e.ID, err
}

// Perform sends an action-menu perform of the option name, in the thread of the last menu
// received on the connection, and returns its @id.
func (a *Agent) Perform(ctx context.Context, connID, name string) (string, error) {
	e, err := a.call(ctx, map[string]any{"cmd": "perform", "connectionId": connID, "name": name})
	return e.ID, err
}

// Answer sends a question-answer answer to the question whose thread is threadID (the
// question's ID or ThreadID) and returns its @id.
func (a *Agent) Answer(ctx context.Context, connID, threadID, response string) (string, error) {
	e, err := a.call(ctx, map[string]any{"cmd": "answer", "connectionId": connID, "threadId": threadID, "response": response})
	return e.ID, err
}

// SendProfile sends a user-profile profile and returns its @id.
func (a *Agent) SendProfile(ctx context.Context, connID, displayName, preferredLanguage string) (string, error) {
	e, err := a.call(ctx, map[string]any{
		"cmd": "profile", "connectionId": connID, "displayName": displayName, "preferredLanguage": preferredLanguage,
	})
	return e.ID, err
}

// Stats returns how often the harness's KMS ran each operation and how many inbound envelopes
// of each packing it got (Event.KMS, Event.Inbound).
func (a *Agent) Stats(ctx context.Context) (Event, error) {
	return a.call(ctx, map[string]any{"cmd": "stats"})
}

// HolderDID makes a did:key (Ed25519) whose key the wallet holds: the subject to issue it
// credentials for.
func (a *Agent) HolderDID(ctx context.Context) (string, error) {
	e, err := a.call(ctx, map[string]any{"cmd": "holder-did"})
	if err != nil {
		return "", err
	}
	var d struct {
		DID string `json:"did"`
	}
	if err := json.Unmarshal(e.Raw, &d); err != nil || d.DID == "" {
		return "", fmt.Errorf("credo harness %q: holder-did answered %s", a.label, e)
	}
	return d.DID, nil
}

// StoreCredential stores a W3C credential in the wallet as Credo does: a JSON-LD credential
// (a JSON object) or a VC-JWT (a compact JWT, with or without JSON quotes).
func (a *Agent) StoreCredential(ctx context.Context, vc []byte) error {
	vc = bytes.TrimSpace(vc)
	var c any = string(vc)
	if len(vc) > 0 && (vc[0] == '{' || vc[0] == '"') {
		if err := json.Unmarshal(vc, &c); err != nil {
			return fmt.Errorf("credential: %w", err)
		}
	}
	_, err := a.call(ctx, map[string]any{"cmd": "store-credential", "credential": c})
	return err
}

// Present answers the proof request of the proof exchange id (from a "proof-request" event)
// with the wallet's matching credentials, signed by Credo (present-proof 2.0, DIF presentation
// exchange). It fails when the wallet holds no matching credential.
func (a *Agent) Present(ctx context.Context, proofExchangeID string) error {
	_, err := a.call(ctx, map[string]any{"cmd": "present", "proofExchangeId": proofExchangeID})
	return err
}

// Decline declines the proof request of the proof exchange id with a problem report
// (description as given, Credo's "Request declined" when empty).
func (a *Agent) Decline(ctx context.Context, proofExchangeID, description string) error {
	_, err := a.call(ctx, map[string]any{"cmd": "decline", "proofExchangeId": proofExchangeID, "description": description})
	return err
}

// AcceptCredential accepts the credential offered in the credential exchange id (from a
// "credential-offer" event): Credo requests it (issue-credential 2.0, JSON-LD), then checks that
// what comes is what was offered, verifies its signature, stores it and acks — a "credential"
// event with state done follows.
func (a *Agent) AcceptCredential(ctx context.Context, credentialExchangeID string) error {
	_, err := a.call(ctx, map[string]any{"cmd": "accept-credential", "credentialExchangeId": credentialExchangeID})
	return err
}

// DeclineCredential declines the offer of the credential exchange id with a problem report.
func (a *Agent) DeclineCredential(ctx context.Context, credentialExchangeID string) error {
	_, err := a.call(ctx, map[string]any{"cmd": "decline-credential", "credentialExchangeId": credentialExchangeID})
	return err
}

// Credentials returns the W3C credentials the wallet holds, as Credo stored them: a JSON-LD
// credential's JSON, or a VC-JWT as a JSON string.
func (a *Agent) Credentials(ctx context.Context) ([]json.RawMessage, error) {
	e, err := a.call(ctx, map[string]any{"cmd": "credentials"})
	if err != nil {
		return nil, err
	}
	var c struct {
		Credentials []json.RawMessage `json:"credentials"`
	}
	if err := json.Unmarshal(e.Raw, &c); err != nil {
		return nil, fmt.Errorf("credo harness %q: credentials answered %s", a.label, e)
	}
	return c.Credentials, nil
}

// VerifyCredential has Credo verify a W3C credential as a wallet does when it is issued one
// (its default document loader, no network): nil when it is valid, else Credo's reasons.
func (a *Agent) VerifyCredential(ctx context.Context, vc []byte) error {
	var c any = string(bytes.TrimSpace(vc))
	if t := bytes.TrimSpace(vc); len(t) > 0 && t[0] == '{' {
		if err := json.Unmarshal(t, &c); err != nil {
			return fmt.Errorf("credential: %w", err)
		}
	}
	e, err := a.call(ctx, map[string]any{"cmd": "verify-credential", "credential": c})
	if err != nil {
		return err
	}
	var r struct {
		IsValid bool   `json:"isValid"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal(e.Raw, &r); err != nil {
		return fmt.Errorf("credo harness %q: verify-credential answered %s", a.label, e)
	}
	if !r.IsValid {
		return fmt.Errorf("credo: credential not valid: %s", r.Error)
	}
	return nil
}

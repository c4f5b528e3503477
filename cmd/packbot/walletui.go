package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm"
)

// walletUI is the terminal side of packbot wallet: what it shows and what the user's lines do,
// as text for a person or as JSON lines for a script.
type walletUI struct {
	a        *app
	scripted bool
	conn     string
	menu     *channel.Menu
	question *didcomm.WalletEvent
	proof    *didcomm.WalletEvent // a request waiting for y/n (interactive)
	dir      string               // the data folder, where credentials issued to the wallet are kept
	seen     seenIDs
}

// seenIDs remembers the ids of the last messages shown, so that one sent again (a bot that
// crashed after its message went out and before it recorded so sends it again, with the same
// id) is not shown twice.
type seenIDs struct {
	ids  map[string]bool
	ring []string
	next int
}

// keepSeen is how many message ids a wallet remembers.
const keepSeen = 1024

// add records id and reports whether it was seen before.
func (s *seenIDs) add(id string) (repeated bool) {
	if s.ids == nil {
		s.ids, s.ring = map[string]bool{}, make([]string, keepSeen)
	}
	if s.ids[id] {
		return true
	}
	delete(s.ids, s.ring[s.next])
	s.ring[s.next] = id
	s.ids[id] = true
	s.next = (s.next + 1) % keepSeen
	return false
}

func newWalletUI(a *app, o walletOptions) *walletUI {
	return &walletUI{a: a, scripted: o.scripted, dir: o.dir}
}

// out writes one event: obj as a JSON line when scripted, else the formatted text.
func (u *walletUI) out(obj map[string]any, format string, args ...any) {
	if u.scripted {
		b, err := json.Marshal(obj)
		if err != nil {
			b = []byte(`{"event":"error","message":"encode event"}`)
		}
		fmt.Fprintf(u.a.stdout, "%s\n", b)
		return
	}
	if format != "" {
		fmt.Fprintf(u.a.stdout, format+"\n", args...)
	}
}

func (u *walletUI) fail(err error) {
	u.out(map[string]any{"event": "error", "message": err.Error()}, "! %v", err)
}

func (u *walletUI) connected(conn, label string) {
	u.conn = conn
	if label != "" {
		u.out(map[string]any{"event": "connected", "connection": conn, "label": label}, "connected to %s", label)
	}
}

// show displays what reached the wallet; a message whose id was shown already is dropped
// (scripted, a "duplicate" event says so).
func (u *walletUI) show(e didcomm.WalletEvent) {
	if e.ID != "" && (e.Text != nil || e.Menu != nil || e.Question != nil || e.ProofRequest != nil) && u.seen.add(e.ID) {
		u.out(map[string]any{"event": "duplicate", "id": e.ID}, "")
		return
	}
	switch {
	case e.Text != nil:
		u.out(map[string]any{"event": "text", "id": e.ID, "content": e.Text.Content, "replyTo": e.ReplyTo}, "bot: %s", e.Text.Content)
	case e.Menu != nil:
		u.menu = e.Menu
		opts := make([]map[string]any, len(e.Menu.Options))
		var b strings.Builder
		fmt.Fprintf(&b, "menu: %s", e.Menu.Title)
		if e.Menu.Description != "" {
			fmt.Fprintf(&b, " — %s", e.Menu.Description)
		}
		for i, o := range e.Menu.Options {
			opts[i] = map[string]any{"id": o.ID, "title": o.Title, "disabled": o.Disabled}
			fmt.Fprintf(&b, "\n  [%d] %s", i+1, o.Title)
		}
		u.out(map[string]any{"event": "menu", "id": e.ID, "title": e.Menu.Title, "description": e.Menu.Description, "options": opts},
			"%s\n  (:m N selects)", b.String())
	case e.Question != nil:
		u.question = &e
		var b strings.Builder
		fmt.Fprintf(&b, "question: %s", e.Question.Text)
		if e.Question.Detail != "" {
			fmt.Fprintf(&b, "\n  %s", strings.ReplaceAll(e.Question.Detail, "\n", "\n  "))
		}
		for i, o := range e.Question.Options {
			fmt.Fprintf(&b, "\n  [%d] %s", i+1, o)
		}
		u.out(map[string]any{"event": "question", "id": e.ID, "text": e.Question.Text, "detail": e.Question.Detail, "options": e.Question.Options},
			"%s\n  (:a N answers)", b.String())
	case e.ProofRequest != nil:
		u.proof = &e
		r, w3c := e.ProofRequest, e.ProofRequest.W3C
		if w3c == nil { // the wallet decodes every request into W3C terms
			w3c = &channel.W3CRequest{}
		}
		u.out(map[string]any{"event": "proof-request", "id": e.ID, "credentialType": w3c.CredentialType, "purpose": r.Purpose, "issuers": w3c.Issuers},
			"the bot asks for your %s credential%s. Present it? [y/n]", w3c.CredentialType, parenthesize(r.Purpose))
	case e.ProofAnswer != nil:
		a := e.ProofAnswer
		msg := "the bot accepted the credential"
		if !a.Accepted {
			msg = "the bot did not accept the credential: " + a.Reason
		}
		u.out(map[string]any{"event": "proof-answer", "request": a.RequestID, "accepted": a.Accepted, "reason": a.Reason}, "%s", msg)
	case e.Profile != nil:
		u.out(map[string]any{"event": "profile", "displayName": e.Profile.DisplayName, "description": e.Profile.Description},
			"bot profile: %s", e.Profile.DisplayName)
	case e.Invitation != nil:
		u.out(map[string]any{"event": "invitation", "did": e.Invitation.DID, "url": e.Invitation.URL, "label": e.Invitation.Label},
			"invitation to %s: %s", e.Invitation.Label, firstNonEmpty(e.Invitation.DID, e.Invitation.URL))
	case e.Pong:
		u.out(map[string]any{"event": "pong", "ping": e.ReplyTo}, "pong")
	case e.Receipts != nil:
		u.out(map[string]any{"event": "receipts", "messageIds": e.Receipts.MessageIDs, "state": e.Receipts.State},
			"  (%s)", e.Receipts.State)
	}
}

func parenthesize(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// walletAction is one scripted input line.
type walletAction struct {
	Action   string `json:"action"`
	Content  string `json:"content"`
	ReplyTo  string `json:"replyTo"`
	Option   string `json:"option"`
	Question string `json:"question"`
	Response string `json:"response"`
	Request  string `json:"request"`
	Name     string `json:"name"`
	Lang     string `json:"lang"`
}

// act carries out one input line; it reports whether to quit.
func (u *walletUI) act(ctx context.Context, w *didcomm.Wallet, line string) bool {
	if line == "" {
		return false
	}
	var a walletAction
	var err error
	if u.scripted {
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			u.fail(fmt.Errorf("not a JSON action: %w", err))
			return false
		}
	} else if a, err = u.parseLine(line); err != nil {
		u.fail(err)
		return false
	}
	if u.conn == "" && a.Action != "quit" && a.Action != "help" {
		u.fail(errors.New("not connected yet"))
		return false
	}
	switch a.Action {
	case "quit":
		return true
	case "help":
		u.out(map[string]any{"event": "help"}, ":m  ask for the menu · :m N  select item N · :a N  answer option N · y/n  answer a credential request · :ping  check the bot answers · :q  quit")
	case "text":
		var id string
		if id, err = w.SendText(ctx, u.conn, a.Content, a.ReplyTo); err == nil {
			u.out(map[string]any{"event": "sent", "id": id}, "")
		}
	case "menu":
		err = w.RequestMenu(ctx, u.conn)
	case "select":
		err = w.SelectMenu(ctx, u.conn, a.Option)
	case "answer":
		err = w.Answer(ctx, u.conn, a.Question, a.Response)
	case "profile":
		err = w.SendProfile(ctx, u.conn, a.Name, a.Lang)
	case "present":
		if err = w.Present(ctx, a.Request); errors.Is(err, didcomm.ErrNoCredential) {
			u.out(map[string]any{"event": "no-credential", "request": a.Request}, "you hold no such credential: the bot was told")
			err = nil
		}
	case "decline":
		err = w.Decline(ctx, a.Request)
	case "ping":
		_, err = w.Ping(ctx, u.conn)
	default:
		err = fmt.Errorf("unknown action %q", a.Action)
	}
	if err != nil {
		u.fail(err)
	}
	return false
}

// parseLine reads an interactive line: a command, a y/n for a pending credential request, or text.
func (u *walletUI) parseLine(line string) (walletAction, error) {
	if u.proof != nil {
		switch strings.ToLower(line) {
		case "y", "yes", "n", "no":
			a := walletAction{Action: "decline", Request: u.proof.ID}
			if strings.HasPrefix(strings.ToLower(line), "y") {
				a.Action = "present"
			}
			u.proof = nil
			return a, nil
		}
	}
	if !strings.HasPrefix(line, ":") {
		return walletAction{Action: "text", Content: line}, nil
	}
	cmd, arg, _ := strings.Cut(strings.TrimPrefix(line, ":"), " ")
	n, _ := strconv.Atoi(strings.TrimSpace(arg))
	switch cmd {
	case "q", "quit":
		return walletAction{Action: "quit"}, nil
	case "h", "help":
		return walletAction{Action: "help"}, nil
	case "ping":
		return walletAction{Action: "ping"}, nil
	case "m":
		if arg == "" {
			return walletAction{Action: "menu"}, nil
		}
		if u.menu == nil || n < 1 || n > len(u.menu.Options) {
			return walletAction{}, errors.New("no such menu item")
		}
		return walletAction{Action: "select", Option: u.menu.Options[n-1].ID}, nil
	case "a":
		if u.question == nil || n < 1 || n > len(u.question.Question.Options) {
			return walletAction{}, errors.New("no such answer")
		}
		return walletAction{Action: "answer", Question: u.question.ID, Response: u.question.Question.Options[n-1]}, nil
	}
	return walletAction{}, fmt.Errorf("unknown command :%s (:h helps)", cmd)
}

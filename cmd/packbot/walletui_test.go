package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/didcomm"
)

func TestInteractiveWalletUI(t *testing.T) {
	var out bytes.Buffer
	u := newWalletUI(&app{stdout: &out}, walletOptions{})
	u.connected("conn-1", "demo bank")

	u.show(didcomm.WalletEvent{Menu: &channel.Menu{Title: "Menu", Description: "Authenticated as Ana", Options: []channel.MenuOption{
		{ID: "logout", Title: "Log out"}, {ID: "pending-approvals", Title: "(2) Pending approvals"}}}})
	if !strings.Contains(out.String(), "[2] (2) Pending approvals") || !strings.Contains(out.String(), "Authenticated as Ana") {
		t.Fatalf("menu shown as:\n%s", out.String())
	}
	if a, err := u.parseLine(":m 2"); err != nil || a.Action != "select" || a.Option != "pending-approvals" {
		t.Fatalf(":m 2 → %+v %v", a, err)
	}
	if a, err := u.parseLine(":m"); err != nil || a.Action != "menu" {
		t.Fatalf(":m → %+v %v", a, err)
	}
	if _, err := u.parseLine(":m 3"); err == nil {
		t.Fatal(":m 3 accepted with two items")
	}

	u.show(didcomm.WalletEvent{ID: "q-1", Question: &channel.Question{Text: "Submit?", Detail: "amount: 10", Options: []string{"Yes", "No"}}})
	if !strings.Contains(out.String(), "[2] No") || !strings.Contains(out.String(), "amount: 10") {
		t.Fatalf("question shown as:\n%s", out.String())
	}
	if a, err := u.parseLine(":a 2"); err != nil || a.Action != "answer" || a.Question != "q-1" || a.Response != "No" {
		t.Fatalf(":a 2 → %+v %v", a, err)
	}

	u.show(didcomm.WalletEvent{ID: "p-1", ProofRequest: &channel.ProofRequest{W3C: &channel.W3CRequest{CredentialType: "EmployeeCredential"}, Purpose: "to log in"}})
	if !strings.Contains(out.String(), "asks for your EmployeeCredential credential (to log in). Present it? [y/n]") {
		t.Fatalf("proof request shown as:\n%s", out.String())
	}
	if a, _ := u.parseLine("y"); a.Action != "present" || a.Request != "p-1" {
		t.Fatalf("y → %+v", a)
	}
	if a, _ := u.parseLine("y"); a.Action != "text" || a.Content != "y" {
		t.Fatalf("a second y is text: %+v", a)
	}
	u.show(didcomm.WalletEvent{ID: "p-2", ProofRequest: &channel.ProofRequest{W3C: &channel.W3CRequest{CredentialType: "EmployeeCredential"}}})
	if a, _ := u.parseLine("no"); a.Action != "decline" || a.Request != "p-2" {
		t.Fatalf("no → %+v", a)
	}

	if a, _ := u.parseLine("hello there"); a.Action != "text" || a.Content != "hello there" {
		t.Fatalf("text → %+v", a)
	}
	if _, err := u.parseLine(":x"); err == nil || !strings.Contains(err.Error(), ":h") {
		t.Fatalf(":x → %v", err)
	}
	if a, _ := u.parseLine(":q"); a.Action != "quit" {
		t.Fatalf(":q → %+v", a)
	}
}

// TestWalletDropsRepeatedMessages: a message sent again with the id of one already shown (a bot
// that crashed after sending it) is not shown again; scripted, a "duplicate" event says so.
func TestWalletDropsRepeatedMessages(t *testing.T) {
	for _, scripted := range []bool{false, true} {
		var out bytes.Buffer
		u := newWalletUI(&app{stdout: &out}, walletOptions{scripted: scripted})
		reply := didcomm.WalletEvent{ID: "m-1", Text: &channel.Text{Content: "you said: hi"}}
		u.show(reply)
		u.show(didcomm.WalletEvent{ID: "m-2", Text: &channel.Text{Content: "you said: hi"}}) // the same words, another message
		u.show(reply)
		if n := strings.Count(out.String(), "you said: hi"); n != 2 {
			t.Errorf("scripted %v: the text shown %d times, want 2 (the repeated id dropped):\n%s", scripted, n, out.String())
		}
		if got := strings.Count(out.String(), `{"event":"duplicate","id":"m-1"}`); scripted && got != 1 {
			t.Errorf("scripted: %d duplicate events:\n%s", got, out.String())
		}
	}
	var s seenIDs
	for i := range keepSeen + 1 {
		s.add(fmt.Sprint(i))
	}
	if s.add("0") || !s.add(fmt.Sprint(keepSeen)) {
		t.Error("seenIDs keeps more than keepSeen ids, or forgot the newest")
	}
}

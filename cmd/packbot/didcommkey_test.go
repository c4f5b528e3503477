package main

import (
	"strings"
	"testing"
)

// TestServeRefusesWrongDIDCommKey: the DIDComm agent's keys were locked with the key file
// (packbot invite made them); serve with another PACKBOT_DIDCOMM_KEY stops at start with exit 1,
// naming the variable and the fix, instead of starting "ready" and refusing every envelope.
func TestServeRefusesWrongDIDCommKey(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"PACKBOT_DATA_DIR": dir, "PACKBOT_HTTP_ADDR": "127.0.0.1:0"}
	if code, _, errOut := cli(t, env, "invite"); code != 0 {
		t.Fatalf("invite: exit %d\n%s", code, errOut)
	}
	env[EnvDIDCommKey] = strings.Repeat("ab", 32)
	code, _, errOut := cli(t, env, "serve")
	if code != 1 {
		t.Fatalf("serve with another key: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{EnvDIDCommKey + " does not unlock the DIDComm keys already in the store", "set " + EnvDIDCommKey + " to the key"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("serve's error lacks %q:\n%s", want, errOut)
		}
	}
	// The key file's key still works.
	delete(env, EnvDIDCommKey)
	if code, _, errOut := cli(t, env, "invite"); code != 0 {
		t.Fatalf("invite with the key file again: exit %d\n%s", code, errOut)
	}
}

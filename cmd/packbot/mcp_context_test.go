package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/packbot/packbot/mcp/demoserver"
)

// TestMCPSmokePromptsAndResources: smoke lists a server's prompts with their arguments,
// resources, templates and skills, gets a prompt with --args and reads a resource with --read.
func TestMCPSmokePromptsAndResources(t *testing.T) {
	s := demoserver.New(&demoserver.Options{Name: "hr", Writes: true})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	path := writeMCPPack(t, "    - name: hr\n      transport: streamable-http\n      url: "+ts.URL+"/mcp\n")

	code, out, errOut := cli(t, nil, "mcp", "smoke", "--pack", path, "--server", "hr",
		"--get-prompt", demoserver.PromptReviewWrite, "--args", `{"operation":"update_person"}`)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"list prompts, resources and templates", "get prompt review_prepared_write",
		"2 prompt(s), 3 resource(s), 1 template(s), 1 skill(s); completions yes, subscriptions yes",
		"prompt review_prepared_write", "(operation*, focus)", "resource hollyhr://reference/openapi", "template hollyhr://operations/{operation}",
		"skill safe-write", "prompt: 2 message(s)", "user: Review the prepared HR write update_person",
		"user: [resource hollyhr://guides/safe-write-workflow, text text/markdown,"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = cli(t, nil, "mcp", "smoke", "--pack", path, "--server", "hr", "--read", demoserver.URIDataHandling)
	if code != 0 || !strings.Contains(out, "read hollyhr://policies/data-handling") || !strings.Contains(out, "# HR data-handling policy") {
		t.Fatalf("--read: exit %d\n%s\n%s", code, out, errOut)
	}

	// A prompt the server refuses (a required argument missing), a resource it does not have,
	// arguments that are no object of strings, and --call with --get-prompt.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--get-prompt", demoserver.PromptReviewWrite}, "protocol error"},
		{[]string{"--read", "hollyhr://nothing"}, "protocol error"},
		{[]string{"--get-prompt", demoserver.PromptReviewWrite, "--args", `{"operation":1}`}, "JSON object of strings"},
		{[]string{"--get-prompt", demoserver.PromptReviewWrite, "--call", "prepare_api_write"}, "give one of them"},
	} {
		code, out, errOut := cli(t, nil, append([]string{"mcp", "smoke", "--pack", path, "--server", "hr"}, tc.args...)...)
		if code == 0 || !strings.Contains(strings.ToLower(errOut), strings.ToLower(tc.want)) {
			t.Errorf("%v: exit %d, want the error %q\n%s\n%s", tc.args, code, tc.want, out, errOut)
		}
	}
}

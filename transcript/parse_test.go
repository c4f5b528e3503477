package transcript_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/packbot/packbot/transcript"
)

// TestParse reads one line of each kind.
func TestParse(t *testing.T) {
	src := `# Doc line one
# line two.

login ana lang=es email=ana@acme.corp name=Ana roles=["a","b"]
connect bob lang=en name="Bob B" roles=" x , y"
ana> /call send_money {"amount": 5}
ana? APPROVAL_CONFIRM tool=send_money summary=* | YES | NO
ana: answer PENDING_OPTION requester="Ana María" #*
ana<~ TOOLS_HEADER && "• a && b" && TOOLS_SERVER_NOT_CONFIGURED server=vault
ana< "you said: hi"
ana< proof
ana menu: logout pending-approvals[2]
llm: call get_balances {"x":1}
llm: say "done"
llm: tools a b
llm: result ana TOOL_DENIED tool=x server=y
clock: +31m
calls: send_money=1 get_balances=0
llm: system "with roles: a"
audit: ana@acme.corp send_money approval/executed
`
	s, err := transcript.Parse("x.txt", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if s.Doc != "Doc line one\nline two.\n" {
		t.Fatalf("doc %q", s.Doc)
	}
	kinds := []transcript.Kind{}
	for _, st := range s.Steps {
		kinds = append(kinds, st.Kind)
	}
	want := []transcript.Kind{transcript.Connect, transcript.ExpectText, transcript.Select, transcript.ExpectProof, transcript.Present, transcript.ExpectText,
		transcript.Connect, transcript.Send, transcript.ExpectQuestion, transcript.Answer, transcript.ExpectContains, transcript.ExpectText,
		transcript.ExpectProof, transcript.ExpectMenu, transcript.LLMCall, transcript.LLMSay, transcript.LLMTools, transcript.LLMResult,
		transcript.Clock, transcript.Calls, transcript.LLMSystem, transcript.Audit}
	if len(kinds) != len(want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("step %d (line %d) kind %v, want %v", i, s.Steps[i].Line, kinds[i], want[i])
		}
	}
	if c := s.Steps[0].Claims; c["roles"] != `["a","b"]` || s.Steps[0].Text != "es" {
		t.Errorf("login claims %v lang %q", c, s.Steps[0].Text)
	}
	if c := s.Steps[6].Claims; c["name"] != "Bob B" || c["roles"] != " x , y" {
		t.Errorf("connect claims %v", c)
	}
	if st := s.Steps[7]; st.Text != `/call send_money {"amount": 5}` || st.Line != 6 {
		t.Errorf("send %+v", st)
	}
	if q := s.Steps[8].Msgs; len(q) != 3 || q[0].Key != "APPROVAL_CONFIRM" || q[0].Args[1] != (transcript.Arg{Name: "summary", Value: "*"}) || q[2].Key != "NO" {
		t.Errorf("question %+v", q)
	}
	if a := s.Steps[9].Msgs[0]; a.Args[0].Value != "Ana María" || a.Suffix != "#*" {
		t.Errorf("answer %+v", a)
	}
	if c := s.Steps[10].Msgs; len(c) != 3 || c[1].Literal != "• a && b" || !c[1].IsLiteral {
		t.Errorf("contains %+v", c)
	}
	if m := s.Steps[13].Menu; len(m) != 2 || m[1] != (transcript.MenuItem{ID: "pending-approvals", Badge: 2}) {
		t.Errorf("menu %+v", m)
	}
	if st := s.Steps[18]; st.Advance.Minutes() != 31 {
		t.Errorf("clock %+v", st)
	}
	if st := s.Steps[19]; st.Counts["send_money"] != 1 || st.Counts["get_balances"] != 0 || len(st.Counts) != 2 {
		t.Errorf("calls %+v", st)
	}
	if st := s.Steps[21]; st.Text != "ana@acme.corp" || st.Tool != "send_money" || st.Names[0] != "approval" || st.Names[1] != "executed" {
		t.Errorf("audit %+v", st)
	}
}

// TestParseElicitation reads the steps of MCP elicitation scenarios: the world's settings,
// captured values, questions by their parts, typed answers, tool errors and the log.
func TestParseElicitation(t *testing.T) {
	src := `# Doc.
world: elicit-timeout=1500ms
connect ana lang=en
llm: call prepare_api_write {"operation":"x"}
llm: capture token=$.result.confirmationToken
llm: call commit_api_write {"confirmationToken":"$token"}
ana> /call records/commit_api_write {"confirmationToken":"$token"}
ana?~ ELICIT_FIELD field=Days && ELICIT_HINT_MAX limit=30 && ` + "`a && b | c`" + ` | ELICIT_DECLINE | "x | y"
ana?~ ELICIT_CONFIRM server=records
ana: type ELICIT_USE_DEFAULT value=none
ana<~ TOOL_RESULT tool=t result=` + "`{\"a\":1}`" + ` && ` + "`\"b\":2`" + `
llm: max-tokens 50
errors: export_records=2
logs: never "secret note"
`
	s, err := transcript.Parse("x.txt", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if s.ElicitTimeout.Milliseconds() != 1500 {
		t.Errorf("elicit timeout %v", s.ElicitTimeout)
	}
	want := []transcript.Kind{transcript.Connect, transcript.LLMCall, transcript.LLMCapture, transcript.LLMCall, transcript.Send,
		transcript.ExpectQuestionContains, transcript.ExpectQuestionContains, transcript.Type, transcript.ExpectContains,
		transcript.LLMMaxTokens, transcript.ToolErrors, transcript.LogsLack}
	if len(s.Steps) != len(want) {
		t.Fatalf("%d steps, want %d: %+v", len(s.Steps), len(want), s.Steps)
	}
	for i, k := range want {
		if s.Steps[i].Kind != k {
			t.Fatalf("step %d kind %v, want %v", i, s.Steps[i].Kind, k)
		}
	}
	if st := s.Steps[2]; st.Text != "token" || strings.Join(st.Names, ".") != "result.confirmationToken" {
		t.Errorf("capture %+v", st)
	}
	if st := s.Steps[3]; st.Text != `{"confirmationToken":"$token"}` {
		t.Errorf("call %+v", st)
	}
	if st := s.Steps[5]; len(st.Parts) != 3 || st.Parts[1].Key != "ELICIT_HINT_MAX" || st.Parts[2].Literal != "a && b | c" ||
		len(st.Msgs) != 2 || st.Msgs[1].Literal != "x | y" {
		t.Errorf("question %+v", st)
	}
	if st := s.Steps[6]; len(st.Parts) != 1 || len(st.Msgs) != 0 {
		t.Errorf("question without options %+v", st)
	}
	if st := s.Steps[7]; st.Msgs[0].Key != "ELICIT_USE_DEFAULT" || st.Msgs[0].Args[0].Value != "none" {
		t.Errorf("type %+v", st)
	}
	if st := s.Steps[8]; st.Msgs[0].Args[1].Value != `{"a":1}` || st.Msgs[1].Literal != `"b":2` {
		t.Errorf("back-quoted %+v", st)
	}
	if s.Steps[9].N != 50 || s.Steps[10].Counts["export_records"] != 2 || s.Steps[11].Text != "secret note" {
		t.Errorf("max-tokens, errors, logs: %+v", s.Steps[9:])
	}
}

// TestParseErrors: every error names the file and line, and all of them come at once.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"ana> hi", "x.txt:1: wallet \"ana\" is used before connect"},
		{"connect ana", "x.txt:1: connect: want lang="},
		{"connect ana lang=en\nconnect ana lang=es", "x.txt:2: wallet \"ana\" connects twice"},
		{"login ana lang=en", "x.txt:1: login: want a name= claim"},
		{"connect Ana lang=en", "x.txt:1: connect: want a wallet name"},
		{"connect ana lang=en\nana< hello", "x.txt:2: want a message key or a quoted text"},
		{"connect ana lang=en\nana< KEY x", "x.txt:2: KEY: want name=value"},
		{"connect ana lang=en\nana< KEY x=\"open", "x.txt:2: unclosed quote"},
		{"connect ana lang=en\nana menu: bad[x]", "x.txt:2: menu item \"bad[x]\""},
		{"connect ana lang=en\nana: dance", "x.txt:2: unknown action \"dance\""},
		{"clock: 31m", "x.txt:1: clock: want a positive duration"},
		{"calls: send_money", "x.txt:1: calls: want tool=count"},
		{"llm: sing", "x.txt:1: unknown llm step \"sing\""},
		{"llm: say hi", "x.txt:1: llm: say: want a quoted text"},
		{"connect ana lang=en\nana: type \"x\"\nllm: say \"y\"", "x.txt:3: llm: say after ana's message on line 2: put it before"},
		{"connect ana lang=en\nana> hi\nllm: call t {}", "x.txt:3: llm: call after ana's message on line 2"},
		{"what is this", "x.txt:1: unknown step \"what\""},
		{"# only a comment", "x.txt: no steps"},
		{"connect ana lang=en\nana>", "x.txt:2: nothing to send"},
		{"audit: a b executed", "x.txt:1: audit: want identity tool decision/outcome"},
		{"connect ana lang=en\nana> /call x {\"t\":\"$token\"}", "x.txt:2: $token is used before llm: capture token="},
		{"llm: call x {\"t\":\"$tok\"}\nllm: capture tok=$.a", "x.txt:1: $tok is used before"},
		{"llm: capture token=confirmationToken", "x.txt:1: llm: capture: want name=$.field"},
		{"llm: max-tokens lots", "x.txt:1: llm: max-tokens: want a positive number"},
		{"errors: export_records", "x.txt:1: errors: want tool=count"},
		{"logs: never secret", "x.txt:1: logs: want never \"text\""},
		{"connect ana lang=en\nworld: elicit-timeout=1s", "x.txt:2: world: comes before the first step"},
		{"world: timeout=1s", "x.txt:1: world: want elicit-timeout=DURATION"},
		{"connect ana lang=en\nana: type", "x.txt:2: want a message key or a quoted text"},
		{"connect ana lang=en\nana< `open", "x.txt:2: literal"},
	} {
		_, err := transcript.Parse("x.txt", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
	_, err := transcript.Parse("x.txt", []byte("what\nconnect ana\nana: dance"))
	if err == nil || strings.Count(err.Error(), "x.txt:") != 3 {
		t.Errorf("want three errors at once, got %v", err)
	}
}

// FuzzParse: Parse never panics, and what it accepts has steps with line numbers inside the
// file and known wallets. The seeds are the scenarios.
func FuzzParse(f *testing.F) {
	names, _ := fs.Glob(transcript.Scenarios, "*.txt")
	for _, n := range names {
		src, err := fs.ReadFile(transcript.Scenarios, n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Add([]byte("connect a lang=en x=\"\\\"\"\na< K y=\"a|b\" | L #*\na<~ \"&&\" && K"))
	f.Add([]byte("world: elicit-timeout=1s\nconnect a lang=en\nllm: capture v=$.a.b\na> $v\na?~ K && `|&&` | L\na: type K x=`y z`\nerrors: t=1\nlogs: never \"s\""))
	f.Fuzz(func(t *testing.T, src []byte) {
		s, err := transcript.Parse("f.txt", src)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.txt") {
				t.Fatalf("error without the file name: %v", err)
			}
			return
		}
		lines := strings.Count(string(src), "\n") + 1
		seen := map[string]bool{}
		for _, st := range s.Steps {
			if st.Line < 1 || st.Line > lines {
				t.Fatalf("step at line %d of %d", st.Line, lines)
			}
			if st.Kind == transcript.Connect {
				seen[st.Wallet] = true
			} else if st.Wallet != "" && !seen[st.Wallet] {
				t.Fatalf("step %+v for a wallet not connected", st)
			}
		}
	})
}

// TestScenariosParse: every scenario parses and says what it pins.
func TestScenariosParse(t *testing.T) {
	names, err := fs.Glob(transcript.Scenarios, "*.txt")
	if err != nil || len(names) < 10 {
		t.Fatalf("scenarios %v %v", names, err)
	}
	for _, n := range names {
		src, _ := fs.ReadFile(transcript.Scenarios, n)
		s, err := transcript.Parse(n, src)
		if err != nil {
			t.Error(err)
			continue
		}
		if s.Doc == "" {
			t.Errorf("%s: no comment saying what it pins", n)
		}
	}
}

package flows

import (
	"context"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/store"
)

// Where a message goes. Engine.Handle takes one event of one connection and routes it by the
// session's dialog (the typed state of an unfinished dialog, [dialog]):
//
//   - ConnectionReady, ProfileReceived, MenuRequested, MenuSelected and ConnectionClosed are
//     taken the same way in every dialog (welcome.go: the greeting and the menu's actions; an
//     action may replace the dialog, e.g. "configure" or "my requests").
//   - QuestionAnswered goes to the dialog's choice handler with the chosen option's value (the
//     dialog must have an open question with that id; else UNEXPECTED_ANSWER).
//   - PresentationResult goes to the dialog's proof handler (else it is logged and ignored).
//   - TextReceived goes, in order, to: the dialog's value handler (a credential field: never a
//     command, never logged); the choice handler when the question was sent as a numbered text
//     and the text picks an option; the commands (/help, /call, … in commands.go); the dialog's
//     text handler; and last the chat (chat.go: the LLM, or NO_LLM).
//
// The questions an MCP server asks during a tool call (elicitation, elicit.go) are no session
// dialog: they are asked and answered while the call runs, through [Conversation].
//
// (A function rather than a variable: the handlers reach the table again, which Go's package
// initialization cannot order. [New] builds it once per engine.)
func dialogTable() map[string]routes {
	return map[string]routes{
		// auth.go: a proof request was sent; waiting for the presentation.
		kindAuth: {state: store.StateAuth, new: func() dialog { return &authWait{} },
			proof: onProof((*turn).presentation), text: say("WAITING_CREDENTIAL")},

		// mcpconfig.go: choose a user-controlled server to configure.
		kindMCPServer: {state: store.StateMCPConfig, new: func() dialog { return &mcpServer{} },
			choice: onChoice((*turn).serverChosen), text: say("CHOOSE_OPTION")},
		// mcpconfig.go: the server is configured already: reconfigure, delete or cancel.
		kindMCPExisting: {state: store.StateMCPConfig, new: func() dialog { return &mcpExisting{} },
			choice: onChoice((*turn).existingChosen), text: say("CHOOSE_OPTION")},
		// mcpconfig.go: typing the value of a credential field.
		kindMCPField: {state: store.StateMCPConfig, new: func() dialog { return &mcpField{} },
			value: onValue((*turn).configValue)},

		// approvalconfirm.go: submit an approval request for the call? Yes / No.
		kindApprovalConfirm: {state: store.StateChat, approvals: true, new: func() dialog { return &approvalConfirm{} },
			choice: onChoice((*turn).confirmChosen)},

		// myrequests.go: choose one of my pending requests; then cancel it or go back.
		kindMyRequests: {state: store.StateChat, approvals: true, new: func() dialog { return &myRequests{} },
			choice: onChoice((*turn).myRequestChosen)},
		kindMyRequest: {state: store.StateChat, approvals: true, new: func() dialog { return &myRequest{} },
			choice: onChoice((*turn).cancelChosen)},

		// prompts.go: choose a prompt to use; contextargs.go: its arguments (or a resource
		// template's variables), chosen among completions or typed.
		kindPromptList: {state: store.StateChat, new: func() dialog { return &promptList{} },
			choice: onChoice((*turn).promptChosen)},
		kindContextArgs: {state: store.StateChat, new: func() dialog { return &contextArgs{} },
			choice: onChoice((*turn).argChosen), value: onValue((*turn).argTyped)},
		// resources.go: attach a resource, expand a template, or detach; load a skill.
		kindResourceList: {state: store.StateChat, new: func() dialog { return &resourceList{} },
			choice: onChoice((*turn).resourceChosen)},
		kindSkillList: {state: store.StateChat, new: func() dialog { return &skillList{} },
			choice: onChoice((*turn).skillChosen)},

		// pending.go: choose a request I may decide; then approve, reject or go back.
		kindPending: {state: store.StateChat, approvals: true, new: func() dialog { return &pendingList{} },
			choice: onChoice((*turn).pendingChosen)},
		kindPendingRequest: {state: store.StateChat, approvals: true, new: func() dialog { return &pendingRequest{} },
			choice: onChoice((*turn).decisionChosen)},
		// approvalproof.go: an approval waits for the approver's fresh proof (proof: fresh).
		kindApprovalProof: {state: store.StateChat, approvals: true, new: func() dialog { return &approvalProof{} },
			proof: onProof((*turn).approvalPresentation)},
	}
}

// routes are the handlers of the events one kind of dialog accepts; nil means the event takes
// the route it takes with no dialog.
type routes struct {
	// state is the session's State while the dialog is open (the menu shows "configuring" in
	// StateMCPConfig only).
	state string
	// approvals: the dialog needs the approvals service (without it, answers are unexpected).
	approvals bool
	// new returns an empty state of the kind, to decode into.
	new func() dialog

	choice func(t *turn, ctx context.Context, d dialog, value string) error
	proof  func(t *turn, ctx context.Context, d dialog, p channel.PresentationResult) error
	value  func(t *turn, ctx context.Context, d dialog, text string) error
	text   func(t *turn, ctx context.Context, d dialog, text string) error
}

// onChoice adapts a choice handler of dialog type D to the table.
func onChoice[D dialog](f func(t *turn, ctx context.Context, d D, value string) error) func(*turn, context.Context, dialog, string) error {
	return func(t *turn, ctx context.Context, d dialog, value string) error { return f(t, ctx, d.(D), value) }
}

// onValue adapts a value handler of dialog type D to the table.
func onValue[D dialog](f func(t *turn, ctx context.Context, d D, text string) error) func(*turn, context.Context, dialog, string) error {
	return onChoice(f)
}

// onProof adapts a proof handler of dialog type D to the table.
func onProof[D dialog](f func(t *turn, ctx context.Context, d D, p channel.PresentationResult) error) func(*turn, context.Context, dialog, channel.PresentationResult) error {
	return func(t *turn, ctx context.Context, d dialog, p channel.PresentationResult) error {
		return f(t, ctx, d.(D), p)
	}
}

// say is a text handler that answers key.
func say(key string) func(*turn, context.Context, dialog, string) error {
	return func(t *turn, ctx context.Context, _ dialog, _ string) error { return t.sayKey(ctx, key) }
}

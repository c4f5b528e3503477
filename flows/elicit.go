package flows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/mcp"
	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/toolcall"
)

// Conversation lets a flow talk with its user while it handles an event — what a server asks
// during a tool call. The connection's worker is busy with that event, so the user's answers
// arrive as the connection's next events: Next takes them out of order, ahead of the event
// being handled finishing. Both methods are safe for concurrent use.
type Conversation interface {
	// Send delivers messages to the connection now.
	Send(ctx context.Context, msgs ...channel.Outbound) error
	// Next waits for the first event of the connection, accepted after the one being handled
	// and not taken yet, that take accepts; that event is then done (it is not handled again).
	// Events take refuses stay for their turn.
	Next(ctx context.Context, take func(channel.Event) bool) (channel.Event, error)
}

// DefaultElicitTimeout is how long a server's question waits for the user.
const DefaultElicitTimeout = 5 * time.Minute

// progressEvery is the least time between two progress messages of one call.
const progressEvery = 5 * time.Second

// maxFieldTries bounds the answers to one form field that do not fit it.
const maxFieldTries = 5

// Option values of the elicitation questions.
const (
	elicitAccept  = "accept"
	elicitDecline = "decline"
	elicitCancel  = "cancel"
	elicitSkip    = "skip"
	elicitDefault = "default"
	elicitDone    = "done"
	elicitYes     = "true"
	elicitNo      = "false"
)

// cancelOption is the menu item that cancels a running call.
const cancelOption = "cancel-call"

// asker relays what a server asks during one call to the user of a turn. It runs on the MCP
// session's goroutine while the turn waits in the call: it uses only what it copied from the
// turn and the conversation.
type asker struct {
	e      *Engine
	conv   Conversation
	lang   string
	cancel context.CancelCauseFunc // cancels the call

	session store.Session // a copy, for the menu with the cancel item

	mu           sync.Mutex
	lastProgress time.Time
	menuSent     bool
}

// callContext returns the context of a tool call made for the turn's user: the server's
// questions and progress reach them, and they can cancel it. stop must be called when the call
// returns; it reports whether the user cancelled.
func (t *turn) callContext(ctx context.Context) (cctx context.Context, stop func() (cancelled bool)) {
	if t.conv == nil {
		return ctx, func() bool { return false }
	}
	cctx, cancel := context.WithCancelCause(ctx)
	a := &asker{e: t.e, conv: t.conv, lang: t.lang(), cancel: cancel, session: *t.s}
	cctx = mcp.WithAsker(cctx, a)
	watch, stopWatch := context.WithCancel(cctx)
	var wg sync.WaitGroup
	wg.Go(func() { a.watchCancel(watch) })
	return cctx, func() bool {
		stopWatch()
		wg.Wait()
		cancelled := errors.Is(context.Cause(cctx), toolcall.ErrCancelledByUser)
		cancel(nil)
		if a.sentMenu() {
			t.s.MenuDigest = "" // the menu with the cancel item is replaced after the event
		}
		return cancelled
	}
}

// watchCancel cancels the call when the user sends /cancel or picks the cancel item.
func (a *asker) watchCancel(ctx context.Context) {
	if _, err := a.conv.Next(ctx, isCancel); err != nil {
		return
	}
	a.cancel(toolcall.ErrCancelledByUser)
}

func isCancel(ev channel.Event) bool {
	switch ev := ev.(type) {
	case channel.TextReceived:
		return strings.EqualFold(strings.TrimSpace(ev.Content), "/cancel")
	case channel.MenuSelected:
		return ev.OptionID == cancelOption
	}
	return false
}

func (a *asker) tr(key string, args ...string) string { return a.e.cat.T(a.lang, key, args...) }

func (a *asker) sentMenu() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.menuSent
}

func (a *asker) send(ctx context.Context, msgs ...channel.Outbound) error {
	if err := a.conv.Send(ctx, msgs...); err != nil {
		return fmt.Errorf("send to the user: %w", err)
	}
	return nil
}

func (a *asker) text(s string) channel.Outbound {
	return channel.Outbound{Text: &channel.Text{ID: newMessageID(), Content: s}}
}

// Progress tells the user how the call goes, at most once per progressEvery; the first time,
// with how to cancel it (and a menu with the cancel item).
func (a *asker) Progress(ctx context.Context, p mcp.Progress) {
	now := a.e.now()
	a.mu.Lock()
	first := a.lastProgress.IsZero()
	if !first && now.Sub(a.lastProgress) < progressEvery {
		a.mu.Unlock()
		return
	}
	a.lastProgress = now
	a.mu.Unlock()
	detail := p.Message
	switch {
	case detail != "":
	case p.Total > 0:
		detail = strconv.Itoa(int(100*p.Progress/p.Total)) + "%"
	default:
		detail = strconv.FormatFloat(p.Progress, 'f', -1, 64)
	}
	msgs := []channel.Outbound{a.text(a.tr("MCP_PROGRESS", "tool", p.Tool, "server", p.Server, "detail", detail))}
	if first {
		msgs[0].Text.Content += "\n" + a.tr("MCP_PROGRESS_CANCEL_HINT")
		if a.e.caps.Menus {
			m := a.e.Menu(ctx, a.session)
			m.ID = newMessageID()
			m.Options = append(append([]channel.MenuOption(nil), m.Options...), channel.MenuOption{ID: cancelOption, Title: a.tr("MENU_CANCEL_CALL")})
			msgs = append(msgs, channel.Outbound{Menu: &m})
			a.mu.Lock()
			a.menuSent = true
			a.mu.Unlock()
		}
	}
	if err := a.send(ctx, msgs...); err != nil {
		a.e.log.WarnContext(ctx, "progress message", slog.Any("err", err))
	}
}

// Sampled tells the user the server used the assistant's model during the call.
func (a *asker) Sampled(ctx context.Context, server string) {
	if err := a.send(ctx, a.text(a.tr("MCP_SAMPLING", "server", server))); err != nil {
		a.e.log.WarnContext(ctx, "sampling notice", slog.Any("err", err))
	}
}

// Elicit asks the user what the server asks: a link to open (URL mode) or a form, field by
// field, then whether to send the answers. Decline and Cancel are always offered; the time
// limit cancels. The answers go back to the server only: they are not logged, remembered or
// audited.
func (a *asker) Elicit(ctx context.Context, el mcp.Elicitation) (mcp.ElicitResult, error) {
	ctx, cancel := context.WithTimeout(ctx, a.e.elicitTimeout)
	defer cancel()
	res, err := a.elicit(ctx, el)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Told with a context of its own: the question's has ended.
		sctx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer done()
		_ = a.send(sctx, a.text(a.tr("ELICIT_TIMEOUT", "server", el.Server)))
		return mcp.ElicitResult{Action: mcp.ActionCancel}, nil
	}
	if err != nil {
		return mcp.ElicitResult{}, err
	}
	switch res.Action {
	case mcp.ActionDecline:
		_ = a.send(ctx, a.text(a.tr("ELICIT_DECLINED", "server", el.Server)))
	case mcp.ActionCancel:
		_ = a.send(ctx, a.text(a.tr("ELICIT_CANCELLED", "server", el.Server)))
	}
	return res, nil
}

func (a *asker) elicit(ctx context.Context, el mcp.Elicitation) (mcp.ElicitResult, error) {
	if el.Mode == mcp.ElicitURL {
		return a.elicitURL(ctx, el)
	}
	if err := a.send(ctx, a.text(a.tr("ELICIT_INTRO", "server", el.Server, "message", el.Message))); err != nil {
		return mcp.ElicitResult{}, err
	}
	content := map[string]any{}
	var summary []string
	for _, f := range el.Fields {
		v, action, err := a.field(ctx, f)
		if err != nil || action != "" {
			return mcp.ElicitResult{Action: action}, err
		}
		if v != nil {
			content[f.Name] = v
			summary = append(summary, f.Label()+": "+f.FormatValue(v))
		}
	}
	text := a.tr("ELICIT_CONFIRM", "server", el.Server)
	if len(summary) > 0 {
		text += "\n" + strings.Join(summary, "\n")
	}
	choice, _, err := a.choose(ctx, text, []option{{Text: a.tr("ELICIT_ACCEPT"), Value: elicitAccept}}, false)
	if err != nil || choice != elicitAccept {
		return mcp.ElicitResult{Action: choice}, err
	}
	return mcp.ElicitResult{Action: mcp.ActionAccept, Content: content}, nil
}

// field asks for one form field until the answer fits (bounded); action is set when the user
// declined or cancelled instead.
func (a *asker) field(ctx context.Context, f mcp.ElicitField) (v any, action string, err error) {
	var opts []option
	typed := true
	switch {
	case f.Type == mcp.FieldBoolean:
		opts, typed = []option{{Text: a.tr("YES"), Value: elicitYes}, {Text: a.tr("NO"), Value: elicitNo}}, false
	case len(f.Enum) > 0 && f.Type != mcp.FieldArray:
		for i, e := range f.Enum {
			opts = append(opts, option{Text: f.EnumTitles[i], Value: "enum:" + e})
		}
		typed = false
	}
	if f.Default != nil {
		opts = append(opts, option{Text: a.tr("ELICIT_USE_DEFAULT", "value", f.FormatValue(f.Default)), Value: elicitDefault})
	}
	if !f.Required {
		opts = append(opts, option{Text: a.tr("ELICIT_SKIP"), Value: elicitSkip})
	}
	text := a.tr("ELICIT_FIELD", "field", f.Label())
	if f.Description != "" {
		text += "\n" + f.Description
	}
	switch {
	case f.Type == mcp.FieldArray:
		text += "\n" + a.tr("ELICIT_TYPE_ARRAY", "options", strings.Join(f.EnumTitles, ", "))
	case typed:
		text += "\n" + a.tr("ELICIT_TYPE_"+strings.ToUpper(f.Type)) + hints(a, f)
	}
	for try := 1; ; try++ {
		choice, typedText, err := a.choose(ctx, text, opts, typed)
		if err != nil {
			return nil, "", err
		}
		switch {
		case choice == mcp.ActionDecline, choice == mcp.ActionCancel:
			return nil, choice, nil
		case choice == elicitSkip:
			return nil, "", nil
		case choice == elicitDefault:
			return f.Default, "", nil
		case choice == elicitYes, choice == elicitNo:
			return choice == elicitYes, "", nil
		case strings.HasPrefix(choice, "enum:"):
			return strings.TrimPrefix(choice, "enum:"), "", nil
		}
		v, perr := f.Parse(typedText)
		if perr == nil {
			return v, "", nil
		}
		var fe *mcp.FieldError
		if !errors.As(perr, &fe) || try >= maxFieldTries {
			return nil, mcp.ActionCancel, nil
		}
		if err := a.send(ctx, a.text(a.tr("ELICIT_INVALID_"+strings.ToUpper(fe.Reason), "field", f.Label(), "limit", fe.Limit))); err != nil {
			return nil, "", err
		}
	}
}

// hints lists a typed field's bounds for the question.
func hints(a *asker, f mcp.ElicitField) string {
	var h []string
	if f.Min != nil {
		h = append(h, a.tr("ELICIT_HINT_MIN", "limit", strconv.FormatFloat(*f.Min, 'f', -1, 64)))
	}
	if f.Max != nil {
		h = append(h, a.tr("ELICIT_HINT_MAX", "limit", strconv.FormatFloat(*f.Max, 'f', -1, 64)))
	}
	if f.Format != "" {
		h = append(h, f.Format)
	}
	if len(h) == 0 {
		return ""
	}
	return " (" + strings.Join(h, ", ") + ")"
}

// elicitURL sends the link and waits for the user to say they are done, or for the server to
// say the elicitation completed.
func (a *asker) elicitURL(ctx context.Context, el mcp.Elicitation) (mcp.ElicitResult, error) {
	text := a.tr("ELICIT_URL", "server", el.Server, "message", el.Message, "url", el.URL)
	type answer struct {
		choice string
		err    error
	}
	got := make(chan answer, 1)
	actx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		c, _, err := a.choose(actx, text, []option{{Text: a.tr("ELICIT_URL_DONE"), Value: elicitDone}}, false)
		got <- answer{c, err}
	}()
	var ans answer
	select {
	case <-el.Done:
		stop()
		<-got
		return mcp.ElicitResult{Action: mcp.ActionAccept}, nil
	case ans = <-got:
	}
	if ans.err != nil {
		return mcp.ElicitResult{}, ans.err
	}
	if ans.choice == elicitDone {
		return mcp.ElicitResult{Action: mcp.ActionAccept}, nil
	}
	return mcp.ElicitResult{Action: ans.choice}, nil
}

// choose asks text with opts plus Decline and Cancel, and returns the chosen value; when typed,
// a text that is no option is returned as typed (choice ""). A channel without questions gets
// the options as a numbered list, answered by number (not for typed fields) or by text.
func (a *asker) choose(ctx context.Context, text string, opts []option, typed bool) (choice, typedText string, err error) {
	opts = append(opts[:len(opts):len(opts)], option{Text: a.tr("ELICIT_DECLINE"), Value: mcp.ActionDecline},
		option{Text: a.tr("ELICIT_CANCEL"), Value: mcp.ActionCancel})
	texts := make([]string, len(opts))
	for i, o := range opts {
		texts[i] = o.Text
	}
	var q channel.Outbound
	if a.e.caps.Questions {
		q = channel.Outbound{Question: &channel.Question{ID: newMessageID(), Text: text, Options: texts}}
	} else {
		var b strings.Builder
		b.WriteString(text)
		for i, o := range texts {
			fmt.Fprintf(&b, "\n%d. %s", i+1, o)
		}
		q = a.text(b.String())
	}
	if err := a.send(ctx, q); err != nil {
		return "", "", err
	}
	for {
		ev, err := a.conv.Next(ctx, isAnswer)
		if err != nil {
			return "", "", err
		}
		var resp string
		switch ev := ev.(type) {
		case channel.QuestionAnswered:
			resp = ev.Response
		case channel.TextReceived:
			resp = ev.Content
		}
		resp = strings.TrimSpace(resp)
		for i, o := range opts {
			if strings.EqualFold(resp, o.Text) || (!typed && !a.e.caps.Questions && resp == strconv.Itoa(i+1)) {
				return o.Value, "", nil
			}
		}
		if typed {
			if _, isText := ev.(channel.TextReceived); isText {
				return "", resp, nil
			}
		}
		if err := a.send(ctx, a.text(a.tr("CHOOSE_OPTION"))); err != nil {
			return "", "", err
		}
	}
}

// isAnswer: the events that answer a question (a text that is not /cancel, or an answer).
func isAnswer(ev channel.Event) bool {
	switch ev.(type) {
	case channel.QuestionAnswered:
		return true
	case channel.TextReceived:
		return !isCancel(ev)
	}
	return false
}

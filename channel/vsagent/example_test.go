package vsagent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/packbot/packbot/channel"
	"github.com/packbot/packbot/channel/vsagent"
)

func Example() {
	// A stand-in for the VS Agent's admin API.
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Type string `json:"type"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		fmt.Println("VS Agent got a", m.Type, "message")
		fmt.Fprint(w, `{"id":"2d5c3f0e-0000-4000-8000-000000000001"}`)
	}))
	defer admin.Close()

	vs, err := vsagent.New(vsagent.Config{AdminURL: admin.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux() // the bot's own server
	vs.Mount(mux)

	events := make(chan channel.Event, 1)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- vs.Run(ctx, channel.HandlerFunc(func(_ context.Context, _ string, e channel.Event) error { events <- e; return nil }))
	}()

	// The VS Agent posts a webhook (one that arrives before Run waits for it).
	webhook := `{"type":"message-received","timestamp":"2026-03-01T10:20:30.123Z",` +
		`"message":{"type":"text","id":"in-1","connectionId":"conn-1","content":"hello"}}`
	answered := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/message-received", strings.NewReader(webhook)))
		answered <- rec.Code
	}()
	in := (<-events).(channel.TextReceived)
	fmt.Println("webhook answered", <-answered)
	fmt.Printf("%s says %q\n", in.Conn, in.Content)

	// The bot names its messages, so that one sent again after a crash is recognisable.
	id, err := vs.SendText(ctx, in.Conn, channel.Text{ID: "2d5c3f0e-0000-4000-8000-000000000001", Content: "hi!", ReplyTo: in.MessageID})
	fmt.Println("sent", id, err)

	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// webhook answered 200
	// conn-1 says "hello"
	// VS Agent got a text message
	// sent 2d5c3f0e-0000-4000-8000-000000000001 <nil>
	// Run: <nil>
}

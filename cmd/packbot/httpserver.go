package main

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// httpLimits bound what one client can hold of a listener: every request is read, and its
// answer written, in bounded time; an idle keep-alive connection is closed; headers are small;
// and at most MaxConns connections are open at once (more wait in the kernel's backlog).
// packbot's routes are all short (webhooks, DIDComm envelopes, the OAuth callback, metrics).
type httpLimits struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
	MaxConns                      int
}

// defaultHTTPLimits are the limits of every listener serve opens.
func defaultHTTPLimits() httpLimits {
	return httpLimits{
		ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second, Idle: 60 * time.Second,
		MaxHeaderBytes: 64 << 10, MaxConns: 1024,
	}
}

// newHTTPServer is a server for h with the limits l; its requests' contexts come from ctx
// without its cancellation (a shutdown lets them finish).
func newHTTPServer(ctx context.Context, h http.Handler, l httpLimits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
}

// limitListener accepts at most n connections open at once.
func limitListener(ln net.Listener, n int) net.Listener {
	if n <= 0 {
		return ln
	}
	return &limitedListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// Accept waits for a free slot, then for a connection; closing the connection frees the slot.
func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

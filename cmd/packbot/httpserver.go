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
// at most MaxConns connections are open at once (more wait in the kernel's backlog), and at
// most MaxConnsPerClient from one address have not sent their first request's headers yet
// (more are closed at once, so that one client stalling its headers cannot hold every slot;
// connections that have sent a request are not counted: a VS Agent or a proxy keeps many busy
// ones). packbot's routes are all short (webhooks, DIDComm envelopes, the OAuth
// callback, metrics).
type httpLimits struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
	MaxConns                      int
	MaxConnsPerClient             int // 0: no limit per client
}

// defaultHTTPLimits are the limits of the listeners serve opens for its own peers (the VS
// Agent's webhooks, the admin endpoints).
func defaultHTTPLimits() httpLimits {
	return httpLimits{
		ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second, Idle: 60 * time.Second,
		MaxHeaderBytes: 64 << 10, MaxConns: 1024,
	}
}

// defaultConnsPerClient is how many connections without a request yet one address may hold on
// the public listener (PACKBOT_PUBLIC_CONNS_PER_CLIENT): far more than a wallet or browser
// opens, or a VS Agent opens at once when a burst of webhooks comes (200 at the refdriver's
// step; 128 cut it off), and half the listener's MaxConns, so that the others still get in.
const defaultConnsPerClient = 512

// publicHTTPLimits are the limits of the public listener, which anyone may reach: a shorter
// header timeout (wallets and browsers send their headers at once), and perClient connections
// per address.
func publicHTTPLimits(perClient int) httpLimits {
	l := defaultHTTPLimits()
	l.ReadHeader = 5 * time.Second
	l.MaxConnsPerClient = perClient
	return l
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
		ConnState: func(c net.Conn, s http.ConnState) {
			if lc, ok := c.(*limitedConn); ok && s != http.StateNew {
				lc.leaveClient() // its first request's headers were read (or it ended)
			}
		},
	}
}

// limitListener accepts at most l.MaxConns connections open at once, and at most
// l.MaxConnsPerClient from one IP address that have not sent a request yet (a server made by
// newHTTPServer tells the listener's connections when they have); over (when not nil) is told of a connection
// closed because its address was over its limit.
func limitListener(ln net.Listener, l httpLimits, over func(net.Addr)) net.Listener {
	if l.MaxConns <= 0 && l.MaxConnsPerClient <= 0 {
		return ln
	}
	ll := &limitedListener{Listener: ln, done: make(chan struct{}), perClient: l.MaxConnsPerClient, over: over}
	if l.MaxConns > 0 {
		ll.slots = make(chan struct{}, l.MaxConns)
	}
	if ll.perClient > 0 {
		ll.clients = map[string]int{}
	}
	return ll
}

type limitedListener struct {
	net.Listener
	slots     chan struct{} // nil: no overall limit
	done      chan struct{}
	closeOnce sync.Once
	perClient int
	over      func(net.Addr)
	mu        sync.Mutex
	clients   map[string]int // connections without a request yet, by IP address
}

// Accept waits for a free slot, then for a connection; closing the connection frees the slot.
// A connection from an address over its limit is closed at once, and Accept waits for the next.
func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		if l.slots != nil {
			select {
			case l.slots <- struct{}{}:
			case <-l.done:
				return nil, net.ErrClosed
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.freeSlot()
			return nil, err
		}
		client, ok := l.enter(c.RemoteAddr())
		if !ok {
			_ = c.Close()
			l.freeSlot()
			if l.over != nil {
				l.over(c.RemoteAddr())
			}
			continue
		}
		return &limitedConn{Conn: c, client: func() { l.leave(client) }, slot: l.freeSlot}, nil
	}
}

func (l *limitedListener) freeSlot() {
	if l.slots != nil {
		<-l.slots
	}
}

// enter counts a connection from addr; ok is false when its address already holds its limit.
func (l *limitedListener) enter(addr net.Addr) (client string, ok bool) {
	if l.clients == nil {
		return "", true
	}
	client = addr.String()
	if host, _, err := net.SplitHostPort(client); err == nil {
		client = host
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients[client] >= l.perClient {
		return client, false
	}
	l.clients[client]++
	return client, true
}

// leave uncounts a connection of client.
func (l *limitedListener) leave(client string) {
	if l.clients == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients[client]--; l.clients[client] <= 0 {
		delete(l.clients, client)
	}
}

func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	clientOnce, slotOnce sync.Once
	client, slot         func()
}

// leaveClient uncounts the connection from its address's (once): it sent a request.
func (c *limitedConn) leaveClient() { c.clientOnce.Do(c.client) }

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.leaveClient()
	c.slotOnce.Do(c.slot)
	return err
}

// Command rrproxy is the small round-robin HTTP proxy of the replica benchmark
// (scripts/bench/replicas.sh): it spreads the requests it receives over several packbot
// replicas in turn, as a load balancer in front of replicas would.
//
//	go run ./scripts/bench/rrproxy -listen 127.0.0.1:3010 -targets http://127.0.0.1:3011,http://127.0.0.1:3012
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:3010", "address to listen on")
	targets := flag.String("targets", "", "comma-separated base URLs of the replicas")
	flag.Parse()
	if err := run(*listen, strings.Split(*targets, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "rrproxy:", err)
		os.Exit(1)
	}
}

func run(listen string, targets []string) error {
	var proxies []*httputil.ReverseProxy
	tr := &http.Transport{MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	for _, t := range targets {
		u, err := url.Parse(strings.TrimSpace(t))
		if err != nil || u.Host == "" {
			return fmt.Errorf("target %q: want a base URL such as http://127.0.0.1:3011", t)
		}
		p := httputil.NewSingleHostReverseProxy(u)
		p.Transport = tr
		// A replica that is down answers 502: the sender is not told "accepted" and sends again.
		p.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
		proxies = append(proxies, p)
	}
	if len(proxies) == 0 {
		return errors.New("no -targets")
	}
	var next atomic.Uint64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxies[(next.Add(1)-1)%uint64(len(proxies))].ServeHTTP(w, r)
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	log.Printf("rrproxy listening on %s, %d targets", ln.Addr(), len(proxies))
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

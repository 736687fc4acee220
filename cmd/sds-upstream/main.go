// Command sds-upstream serves the fault-injecting upstream of package
// cmd/internal/upstream: the service the end-to-end tests put behind
// sds-proxy, and a handy target for trying the proxy by hand.
//
//	sds-upstream [-listen 127.0.0.1:9000] [-h2c] [-h2c-only] [-latency 0s] [-slow-latency 500ms] [-error-rate 50]
//
// -h2c also accepts cleartext HTTP/2 (for gRPC-style calls through an
// h2c:// upstream); -h2c-only accepts nothing else, as a gRPC server such
// as grpc-go's does (an HTTP/1.1 request finds its connection closed).
//
// Once serving it prints exactly one line, "listening HOST:PORT", on
// stdout (so -listen 127.0.0.1:0 tells the caller its port). SIGTERM or
// SIGINT releases hung requests, closes the server and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/upstream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sds-upstream:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run serves until ctx ends, then shuts down. It writes the "listening"
// line to stdout once the listener is bound.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sds-upstream", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9000", "address to serve on, host:port (port 0 picks a free one)")
	latency := fs.Duration("latency", 0, "base latency added to every request")
	slow := fs.Duration("slow-latency", upstream.DefaultSlowLatency, "latency of /api/slow")
	errorRate := fs.Int("error-rate", upstream.DefaultErrorRate, "percent of /api/flaky requests answered 500")
	h2c := fs.Bool("h2c", false, "also accept cleartext HTTP/2")
	h2cOnly := fs.Bool("h2c-only", false, "accept cleartext HTTP/2 only, as a gRPC server does")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	h := upstream.New(upstream.Options{})
	h.SetLatency(*latency)
	h.SetSlowLatency(*slow)
	h.SetErrorRate(*errorRate)
	defer h.Close()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	var protocols http.Protocols
	protocols.SetHTTP1(!*h2cOnly)
	protocols.SetUnencryptedHTTP2(*h2c || *h2cOnly)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		Protocols:         &protocols,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Release hung requests and WebSockets first, so that Shutdown has
	// only short work left to wait for.
	h.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	return nil
}

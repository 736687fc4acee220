package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"text/template"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/upstream"
	"github.com/sds-proxy/sds-proxy/config"
)

// demo runs the proxy on the example sds.yaml in front of a built-in demo
// service listening on the file's upstream address, and prints how to make
// points trip and recover with curl. The file is hot-reloaded as in run.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "sds.yaml", "config file (the example sds.yaml at the repository root)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("demo: unexpected arguments %q", fs.Args())
	}
	file, err := config.Load(*path, config.Options{})
	if err != nil {
		return fmt.Errorf("demo needs the example config (run it from the repository root): %w", err)
	}
	u, err := url.Parse(file.Upstream)
	if err != nil || u.Scheme != "http" {
		return fmt.Errorf("demo: the upstream %q must be an http:// address for the demo service", file.Upstream)
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return fmt.Errorf("demo service: %w", err)
	}
	service := upstream.New(upstream.Options{})
	srv := &http.Server{Handler: service, ReadHeaderTimeout: readHeaderTimeout}
	go srv.Serve(ln)
	defer func() {
		service.Close()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdownCtx)
	}()

	onServing := func(proxyAddr, adminAddr string) {
		demoHelp.Execute(stdout, map[string]string{
			"Service": "http://" + ln.Addr().String(),
			"Proxy":   "http://" + loopback(proxyAddr),
			"Admin":   "http://" + loopback(adminAddr),
			"Config":  file.Path,
		})
	}
	err = runProxy(ctx, []string{"-config", *path}, stderr, onServing)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// loopback turns a wildcard listen address into one a newcomer can curl.
func loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || (host != "0.0.0.0" && host != "::" && host != "") {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}

var demoHelp = template.Must(template.New("demo").Parse(strings.TrimLeft(`
sds-proxy demo is running.
  demo service  {{.Service}}   (the upstream; change it live with /_control)
  proxy         {{.Proxy}}   (send traffic here)
  dashboard     {{.Admin}}/   (also /status and /metrics)
  config        {{.Config}}   (edit it: changes apply within a second)

Trip the visit strategy of orders.read (20 visits per 10 s window), then wait 10 s to recover:
  for i in $(seq 25); do curl -s -o /dev/null -w '%{http_code} ' {{.Proxy}}/api/orders; done; echo

Trip the timeout strategy of slow (3 calls over 300 ms); it then stays degraded for its
10 s delay, letting one probe through every 2 s:
  for i in $(seq 6); do curl -s -i {{.Proxy}}/api/slow | grep -E '^HTTP|^Sds-Degraded'; done
Make the service fast again, and the next probe ends the delay:
  curl -s '{{.Service}}/_control?slowLatency=10ms'

Trip the exception strategies of flaky (half its calls fail):
  for i in $(seq 20); do curl -s -o /dev/null -w '%{http_code} ' {{.Proxy}}/api/flaky; done; echo
  curl -s '{{.Service}}/_control?errorRate=0'      # heal it

Watch it happen: {{.Admin}}/   Stop with Ctrl-C.
`, "\n")))

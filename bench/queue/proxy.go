package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

// proxyProc is a running sds-proxy.
type proxyProc struct {
	*benchproc.Proc
	listen string // host:port of the proxy port
	admin  string // host:port of the admin port
}

// startProxy writes setup s's sds.yaml and starts sds-proxy on it, and
// returns once its /readyz answers 200. Its error carries the end of the
// proxy's log (a config the proxy rejects, say).
func startProxy(ctx context.Context, e *env, s setup, r rung) (*proxyProc, error) {
	if e.proxyBuildErr != nil {
		return nil, e.proxyBuildErr
	}
	listen, err := benchproc.FreePort()
	if err != nil {
		return nil, err
	}
	admin, err := benchproc.FreePort()
	if err != nil {
		return nil, err
	}
	base := filepath.Join(e.dir, s.name+"-"+r.name)
	if err := os.WriteFile(base+".yaml", proxyConfig(s, listen, admin, e.upstream), 0o600); err != nil {
		return nil, err
	}
	p, err := benchproc.Start(e.proxyBin, []string{"run", "-config", base + ".yaml"}, base+".log", nil)
	if err != nil {
		return nil, err
	}
	px := &proxyProc{Proc: p, listen: listen, admin: admin}
	if err := px.WaitReady(ctx, e.client, admin); err != nil {
		px.Stop()
		return nil, err
	}
	return px, nil
}

// proxyConfig is setup s's sds.yaml: one point, api, and three routes
// ranking its requests by Host. Every other key keeps its default but
// drainTimeout, 0 so that a stop between rungs is quick (nothing is in
// flight by then).
func proxyConfig(s setup, listen, admin, upstream string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "listen: %s\nadmin: %s\nupstream: http://%s\ndrainTimeout: 0s\n", listen, admin, upstream)
	b.WriteString("routes:\n")
	fmt.Fprintf(&b, "  - {point: api, match: {host: %s, pathPrefix: /api/}, priority: critical}\n", critical.host())
	fmt.Fprintf(&b, "  - {point: api, match: {host: %s, pathPrefix: /api/}, priority: sheddable}\n", sheddable.host())
	b.WriteString("  - {point: api, match: {pathPrefix: /api/}}\n")
	b.WriteString("points:\n  api:\n")
	for _, k := range s.keys {
		fmt.Fprintf(&b, "    %s\n", k)
	}
	return b.Bytes()
}

// queueMetricPrefix starts the proxy's metrics of its queue.
const queueMetricPrefix = "sds_queue"

// scrapeQueueMetrics returns the lines of the proxy's /metrics that start
// with queueMetricPrefix (none before the queue exists).
func scrapeQueueMetrics(ctx context.Context, c *http.Client, admin string) ([]string, error) {
	b, err := benchproc.Get(ctx, c, "http://"+admin+"/metrics")
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), queueMetricPrefix) {
			out = append(out, sc.Text())
		}
	}
	return out, sc.Err()
}

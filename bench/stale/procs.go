package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

// binaries builds sds-upstream and sds-proxy into e.dir, or finds them in
// -bin.
func (e *env) binaries(ctx context.Context) error {
	if e.o.binDir != "" {
		e.upstreamBin = filepath.Join(e.o.binDir, "sds-upstream")
		e.proxyBin = filepath.Join(e.o.binDir, "sds-proxy")
		return nil
	}
	fmt.Fprintln(e.log, "building sds-upstream and sds-proxy (no -race) ...")
	var err error
	if e.upstreamBin, err = benchproc.Build(ctx, e.dir, "sds-upstream"); err != nil {
		return err
	}
	e.proxyBin, err = benchproc.Build(ctx, e.dir, "sds-proxy")
	return err
}

// proxyProc is a running sds-proxy.
type proxyProc struct {
	*benchproc.Proc
	listen string // host:port of the proxy port
	admin  string // host:port of the admin port
}

// startProxy writes an sds.yaml named name and starts sds-proxy on it,
// and returns once its /readyz answers 200. Its error carries the end of
// the proxy's log (a config the proxy rejects, say).
func (e *env) startProxy(ctx context.Context, name string, stale bool) (*proxyProc, error) {
	listen, err := benchproc.FreePort()
	if err != nil {
		return nil, err
	}
	admin, err := benchproc.FreePort()
	if err != nil {
		return nil, err
	}
	base := filepath.Join(e.dir, name)
	if err := os.WriteFile(base+".yaml", proxyConfig(listen, admin, e.upstream, e.o.maxBytes, stale), 0o600); err != nil {
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

// proxyConfig is the sds.yaml of a proxy: one point, api, on every path,
// under a visitThreshold that no sitting reaches, with stale: or without.
// drainTimeout is 0 so that a stop is quick (nothing is in flight by
// then).
func proxyConfig(listen, admin, upstream, maxBytes string, stale bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "listen: %s\nadmin: %s\nupstream: http://%s\ndrainTimeout: 0s\n", listen, admin, upstream)
	fmt.Fprintf(&b, "staleCache: {maxBytes: %s}\n", maxBytes)
	b.WriteString("routes:\n  - point: api\n    match: {}\npoints:\n  api:\n    visitThreshold: 1000000000\n")
	if stale {
		b.WriteString("    stale: {maxAge: 10m}\n")
	}
	return b.Bytes()
}

// metric returns the value of the unlabelled sample name on the proxy's
// /metrics.
func (px *proxyProc) metric(ctx context.Context, c *http.Client, name string) (float64, error) {
	b, err := benchproc.Get(ctx, c, "http://"+px.admin+"/metrics")
	if err != nil {
		return 0, err
	}
	return sampleValue(b, name)
}

// sampleValue finds the unlabelled sample name in a Prometheus text exposition.
func sampleValue(exposition []byte, name string) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no sample %s", name)
}

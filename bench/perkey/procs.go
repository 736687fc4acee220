package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

// binaries returns the paths of sds-upstream and sds-proxy: in binDir,
// or built into dir.
func binaries(ctx context.Context, binDir, dir string, log io.Writer) (upstream, proxy string, err error) {
	if binDir != "" {
		return filepath.Join(binDir, "sds-upstream"), filepath.Join(binDir, "sds-proxy"), nil
	}
	fmt.Fprintln(log, "building sds-upstream and sds-proxy ...")
	if upstream, err = benchproc.Build(ctx, dir, "sds-upstream"); err != nil {
		return "", "", err
	}
	proxy, err = benchproc.Build(ctx, dir, "sds-proxy")
	return upstream, proxy, err
}

// proxyProc is a running sds-proxy and the addresses it serves on.
type proxyProc struct {
	*benchproc.Proc
	listen, admin string // host:port, on loopback
}

// startProxy writes setup's sds.yaml and starts sds-proxy on it, on
// 127.0.0.1 ports the kernel picks, and returns once it logs "serving".
func startProxy(ctx context.Context, bin, dir, setup, upstream string, o options) (*proxyProc, error) {
	base := filepath.Join(dir, setup)
	if err := os.WriteFile(base+".yaml", proxyConfig(setup, upstream, o), 0o600); err != nil {
		return nil, err
	}
	args := []string{"run", "-config", base + ".yaml", "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0"}
	serving := benchproc.NewLineMatch(func(l string) bool { return strings.Contains(l, `"msg":"serving"`) })
	p, err := benchproc.Start(bin, args, base+".log", serving)
	if err != nil {
		return nil, err
	}
	px := &proxyProc{Proc: p}
	line, err := p.Await(ctx, serving.Line(), "sds-proxy")
	if err == nil {
		var e struct {
			Proxy string `json:"proxy_addr"`
			Admin string `json:"admin_addr"`
		}
		if err = json.Unmarshal([]byte(line), &e); err == nil {
			px.listen, px.admin = e.Proxy, e.Admin
			if err = benchproc.Loopback(px.listen); err == nil {
				err = benchproc.Loopback(px.admin)
			}
		}
	}
	if err != nil {
		p.Stop()
		return nil, fmt.Errorf("sds-proxy: %v", err)
	}
	return px, nil
}

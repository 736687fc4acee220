// Command floor is go-bare (the peer harness's bare httputil.ReverseProxy)
// linked with the dependencies sds-proxy's mission requires, each put to the
// least use a proxy makes of it: zap logs the start, yaml.v3 reads a config,
// fsnotify watches it, client_golang counts requests and serves /metrics, and
// certmagic serves TLS when -tls-domain is given (linked whether or not it
// is). It proxies as go-bare does, with one counter increment per answer.
//
// It is the memory floor of the design: a proxy linked with these
// dependencies starts from this program's peak RSS, most of which is the
// binary's own pages mapped at start-up, before it does anything of its own. bench/run measures it beside
// sds-proxy and go-bare (setup floor); docs/benchmarks.md has the figures.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"
)

// bufPool hands ReverseProxy reusable 32 KiB copy buffers, as go-bare does.
type bufPool struct{ p sync.Pool }

func (b *bufPool) Get() []byte  { return *(b.p.Get().(*[]byte)) }
func (b *bufPool) Put(s []byte) { b.p.Put(&s) }

func main() {
	listen := flag.String("listen", "127.0.0.1:18083", "listen address")
	admin := flag.String("admin", "127.0.0.1:0", "address of /metrics")
	upstream := flag.String("upstream", "http://127.0.0.1:18080", "upstream base URL")
	configPath := flag.String("config", "", "a YAML file to read and watch (optional)")
	tlsDomain := flag.String("tls-domain", "", "serve HTTPS for this domain through certmagic (optional)")
	flag.Parse()

	logger, err := zap.NewProduction()
	if err != nil {
		log.Fatal(err)
	}
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		logger.Fatal("bad -upstream", zap.String("upstream", *upstream))
	}
	if *configPath != "" {
		watchConfig(logger, *configPath)
	}

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "floor_requests_total", Help: "Requests proxied."}, []string{"code"})
	registry.MustRegister(requests)
	adminListener, err := net.Listen("tcp", *admin)
	if err != nil {
		logger.Fatal("admin listen", zap.Error(err))
	}
	go http.Serve(adminListener, promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))

	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		},
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   1024,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
			DisableCompression:    true,
		},
		BufferPool: &bufPool{p: sync.Pool{New: func() any { s := make([]byte, 32*1024); return &s }}},
		ModifyResponse: func(r *http.Response) error {
			requests.WithLabelValues(http.StatusText(r.StatusCode)).Inc()
			return nil
		},
	}
	logger.Info("floor", zap.String("listen", *listen), zap.String("upstream", target.String()))
	if *tlsDomain != "" {
		logger.Fatal("https", zap.Error(certmagic.HTTPS([]string{*tlsDomain}, rp)))
	}
	srv := &http.Server{Addr: *listen, Handler: rp, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	logger.Fatal("serve", zap.Error(srv.ListenAndServe()))
}

// watchConfig reads path as YAML and logs its top-level keys again at each
// change, as a hot-reloading proxy would.
func watchConfig(logger *zap.Logger, path string) {
	read := func() {
		data, err := os.ReadFile(path)
		if err != nil {
			logger.Warn("config", zap.Error(err))
			return
		}
		var doc map[string]any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			logger.Warn("config", zap.Error(err))
			return
		}
		logger.Info("config", zap.Int("keys", len(doc)))
	}
	read()
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		logger.Fatal("watch", zap.Error(err))
	}
	if err := watcher.Add(path); err != nil {
		logger.Fatal("watch", zap.Error(err))
	}
	go func() {
		for {
			select {
			case _, ok := <-watcher.Events:
				if !ok {
					return
				}
				read()
			case err, ok := <-watcher.Errors:
				if !ok {
					return
				}
				logger.Warn("watch", zap.Error(err))
			}
		}
	}()
}

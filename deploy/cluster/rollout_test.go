package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// bridgeNet is the test cluster's pod network (cluster.sh's SUBNET): the
// only addresses besides loopback that the tests send traffic to.
var bridgeNet = &net.IPNet{IP: net.IPv4(10, 88, 0, 0), Mask: net.CIDRMask(16, 32)}

// balancer is a client-side load balancer that follows a Service's
// EndpointSlices, as a service mesh's or gRPC's does: each request goes
// to the next ready endpoint. It never sends to a ClusterIP.
type balancer struct {
	mu     sync.Mutex
	slices map[string][]string // slice name -> ready host:port
	next   int
	seen   map[string]bool // every address sent to
}

// watchEndpoints follows namespace's EndpointSlices of service through the
// apiserver (a watch, as kube-proxy's), until ctx is done. The watch starts
// from the watch cache's state (resourceVersion=0: every slice comes as
// ADDED first): one without a version asks the cache to be as fresh as
// etcd, which this etcd's progress notifications never confirm (the
// apiserver answers 504 "Too large resource version").
func (e *env) watchEndpoints(ctx context.Context, namespace, service string, b *balancer) {
	e.t.Helper()
	ca, err := os.ReadFile(filepath.Join(e.dir, "pki", "ca.crt"))
	if err != nil {
		e.t.Fatal(err)
	}
	token, err := os.ReadFile(filepath.Join(e.dir, "pki", "admin.token"))
	if err != nil {
		e.t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	ready := make(chan struct{})
	go func() {
		for first := true; ctx.Err() == nil; {
			u := "https://10.88.0.1:36443/apis/discovery.k8s.io/v1/namespaces/" + namespace +
				"/endpointslices?watch=1&resourceVersion=0&labelSelector=" + url.QueryEscape("kubernetes.io/service-name="+service)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
			resp, err := client.Do(req)
			if err != nil {
				continue
			}
			dec := json.NewDecoder(bufio.NewReader(resp.Body))
			for {
				var ev struct {
					Type   string
					Object discoveryv1.EndpointSlice
				}
				if err := dec.Decode(&ev); err != nil {
					break
				}
				b.update(ev.Type, &ev.Object)
				if first {
					first = false
					close(ready)
				}
			}
			resp.Body.Close()
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		e.t.Fatal("no EndpointSlice of " + service + " within 30s")
	}
}

// update applies one watch event of an EndpointSlice.
func (b *balancer) update(typ string, s *discoveryv1.EndpointSlice) {
	var ready []string
	if typ != "DELETED" && len(s.Ports) > 0 && s.Ports[0].Port != nil {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				for _, a := range ep.Addresses {
					ready = append(ready, net.JoinHostPort(a, fmt.Sprint(*s.Ports[0].Port)))
				}
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.slices[s.Name] = ready
}

// pick returns the next ready endpoint, or "" when there is none.
func (b *balancer) pick() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var all []string
	for _, eps := range b.slices {
		all = append(all, eps...)
	}
	if len(all) == 0 {
		return ""
	}
	slices.Sort(all)
	b.next++
	a := all[b.next%len(all)]
	b.seen[a] = true
	return a
}

// rolloutLoad is a steady load through a balancer: perSecond GETs a second
// from a few workers, each answer counted.
type rolloutLoad struct {
	sent, failed, noEndpoint atomic.Int64
	mu                       sync.Mutex
	failures                 []string
}

// run sends the load until stop is closed, at most maxRequests or maxTime.
func (l *rolloutLoad) run(b *balancer, perSecond int, stop <-chan struct{}) {
	const maxRequests, maxTime = 60000, 5 * time.Minute
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4, Proxy: nil}}
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	deadline := time.Now().Add(maxTime)
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; n < maxRequests && time.Now().Before(deadline); n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		addr := b.pick()
		if addr == "" {
			l.noEndpoint.Add(1)
			continue
		}
		if host, _, _ := net.SplitHostPort(addr); !bridgeNet.Contains(net.ParseIP(host)) {
			l.fail(fmt.Sprintf("an endpoint off the test's bridge: %s", addr))
			continue
		}
		l.sent.Add(1)
		wg.Go(func() {
			resp, err := client.Get("http://" + addr + "/slow?ms=50")
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d, Sds-Degraded %q", resp.StatusCode, resp.Header.Get("Sds-Degraded"))
				}
			}
			if err != nil {
				l.fail(fmt.Sprintf("%s at %s: %v", addr, time.Now().Format("15:04:05.000"), err))
			}
		})
	}
}

func (l *rolloutLoad) fail(what string) {
	l.failed.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) < 5 {
		l.failures = append(l.failures, what)
	}
}

// waitLoad waits up to 20 s until the load has sent n requests, and
// otherwise fails the test with what the balancer knows.
func (e *env) waitLoad(t *testing.T, load *rolloutLoad, b *balancer, n int64, what string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(20 * time.Second); load.sent.Load() < n; <-tick.C {
		if time.Now().After(deadline) {
			b.mu.Lock()
			defer b.mu.Unlock()
			t.Fatalf("%s: %d of %d requests sent in 20 s; %d ticks found no ready endpoint; the EndpointSlices' ready endpoints: %v",
				what, load.sent.Load(), n, load.noEndpoint.Load(), b.slices)
		}
	}
}

// podNames returns the names of namespace's pods of app that are not
// being deleted.
func (e *env) podNames(namespace, app string) []string {
	var names []string
	for _, p := range e.pods(namespace, app) {
		names = append(names, p.Name)
	}
	return names
}

// TestRolloutUnderLoad: a two-replica Deployment, injected by the webhook,
// rolled out twice under a steady load that follows its Service's
// EndpointSlices (a client-side balancer; the cluster has no kube-proxy,
// and no request goes to a ClusterIP): `kubectl rollout restart`, then a
// rollout to a new sds.yaml ConfigMap (a new name, as kustomize's hash
// suffix makes). No request fails; every new pod has the sidecar with the
// ConfigMap it was rolled to.
func TestRolloutUnderLoad(t *testing.T) {
	e := clusterEnv(t)
	defer e.dumpInjectorOnFailure("rollout-e2e")
	e.installInjector(t)
	const ns, app = "rollout-e2e", "shop"
	e.labelledNamespace(ns)
	e.apply(plainDeployment(ns, app, 2, ""))
	e.apply([]byte(`apiVersion: v1
kind: Service
metadata: {name: shop, namespace: ` + ns + `}
spec:
  selector: {app: shop}
  ports:
    - {name: http, port: 80, targetPort: 8080}
`))
	e.kubectl(nil, "-n", ns, "rollout", "status", "deployment/"+app, "--timeout", "50s")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &balancer{slices: map[string][]string{}, seen: map[string]bool{}}
	e.watchEndpoints(ctx, ns, "shop", b)
	load := &rolloutLoad{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); load.run(b, 100, stop) }()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	e.waitLoad(t, load, b, 100, "the load running")

	// kubectl rollout restart: every pod replaced, one at a time.
	old := e.podNames(ns, app)
	restarted := time.Now()
	e.kubectl(nil, "-n", ns, "rollout", "restart", "deployment/"+app)
	e.kubectl(nil, "-n", ns, "rollout", "status", "deployment/"+app, "--timeout", "55s")
	poll(t, 120*time.Second, 100*time.Millisecond, "the old pods gone", func() bool {
		return !slices.ContainsFunc(e.podNames(ns, app), func(n string) bool { return slices.Contains(old, n) })
	})
	took := time.Since(restarted)

	// A new sds.yaml under a new name, and the pods rolled to it.
	e.apply([]byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: sds-proxy-v2, namespace: ` + ns + `}
data:
  sds.yaml: |
` + indent(strings.Replace(sidecarConfig, "concurrentThreshold: 256", "concurrentThreshold: 512", 1), "    ")))
	old = e.podNames(ns, app)
	e.kubectl(nil, "-n", ns, "patch", "deployment/"+app, "--type", "merge", "-p",
		`{"spec":{"template":{"metadata":{"annotations":{"sds-proxy.io/configmap":"sds-proxy-v2"}}}}}`)
	e.kubectl(nil, "-n", ns, "rollout", "status", "deployment/"+app, "--timeout", "55s")
	poll(t, 120*time.Second, 100*time.Millisecond, "the pods of the old ConfigMap gone", func() bool {
		return !slices.ContainsFunc(e.podNames(ns, app), func(n string) bool { return slices.Contains(old, n) })
	})
	// Some load on the new pods, then stop.
	from := load.sent.Load()
	e.waitLoad(t, load, b, from+200, "the load on the new pods")
	close(stop)
	<-done

	for _, p := range e.pods(ns, app) {
		has, native := hasSidecar(&p)
		cm := ""
		for _, v := range p.Spec.Volumes {
			if v.Name == "sds-config" && v.ConfigMap != nil {
				cm = v.ConfigMap.Name
			}
		}
		if !has || !native || cm != "sds-proxy-v2" {
			t.Errorf("pod %s: sidecar %v (native %v), sds-config from %q; want the native sidecar on sds-proxy-v2", p.Name, has, native, cm)
		}
	}
	b.mu.Lock()
	seen := len(b.seen)
	b.mu.Unlock()
	t.Logf("the load went to %d pod addresses on the bridge; %d ticks found no ready endpoint", seen, load.noEndpoint.Load())
	if seen < 6 {
		t.Errorf("the load reached %d pod addresses, want the 2 + 2 + 2 pods of the two rollouts", seen)
	}
	if n := load.failed.Load(); n > 0 {
		t.Errorf("%d requests failed during the rollouts; first: %s", n, strings.Join(load.failures, "; "))
	}
	e.figure("rollout: %d requests, %d failed, %.1f s from restart to the last old pod gone", load.sent.Load(), load.failed.Load(), took.Seconds())
}

// Package injector is `sds-proxy injector`: a mutating admission webhook
// that adds the sds-proxy sidecar to the pods of labelled namespaces and
// of annotated pods as they are created, with the transform of
// `sds-proxy inject` (docs/kubernetes.md, "Injection by label").
package injector

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/cmd/internal/inject"
)

// config is the injector's flags.
type config struct {
	listen, health    string
	webhook, service  string
	namespace, secret string
	apiserver         string
	tokenFile, caFile string
	certFile, keyFile string
	report            bool
	recheck           time.Duration
	sidecar           inject.Options
	version           string
	drain             time.Duration
	serviceNames      []string // the certificate's DNS names
}

// Run is `sds-proxy injector`: it makes (or reads) its serving certificate,
// writes its CA into its MutatingWebhookConfiguration, serves the webhook
// over TLS on -listen and its probes and metrics on -health, and records
// an event on each pod that should have the sidecar and has none, until
// SIGTERM or SIGINT (then it drains for -drain). fs is the command's flag
// set; version is the binary's.
func Run(ctx context.Context, fs *flag.FlagSet, args []string, version string) error {
	c := config{version: version}
	fs.StringVar(&c.listen, "listen", "0.0.0.0:9443", "the webhook's address (HTTPS)")
	fs.StringVar(&c.health, "health", "0.0.0.0:9902", "the address of /healthz, /readyz and /metrics (HTTP)")
	fs.StringVar(&c.webhook, "webhook", "sds-proxy-injector", "the MutatingWebhookConfiguration whose caBundle the injector writes")
	fs.StringVar(&c.service, "service", "sds-proxy-injector", "the Service in front of the injector: its certificate names SERVICE.NAMESPACE.svc")
	fs.StringVar(&c.namespace, "namespace", "", "the injector's namespace (default: its service account's)")
	fs.StringVar(&c.secret, "secret", "sds-proxy-injector-tls", "the Secret, in -namespace, that keeps the serving certificate every replica uses")
	fs.StringVar(&c.apiserver, "apiserver", defaultAPIServer(), "the apiserver's URL (default: the pod's KUBERNETES_SERVICE_HOST and _PORT)")
	fs.StringVar(&c.tokenFile, "token-file", defaultTokenFile, "the service account token the injector calls the apiserver with")
	fs.StringVar(&c.caFile, "ca-file", defaultCAFile, "the apiserver's CA (PEM)")
	fs.StringVar(&c.certFile, "tls-cert", "", "serve this certificate (PEM; a cert-manager Secret mounted as files) instead of making one: the Secret and the caBundle are then left to cert-manager")
	fs.StringVar(&c.keyFile, "tls-key", "", "the key of -tls-cert (PEM)")
	fs.BoolVar(&c.report, "report", true, "record a SidecarNotInjected event on each pod that should have the sidecar and has none")
	fs.DurationVar(&c.recheck, "recheck", time.Minute, "how often the certificate and the caBundle are checked again")
	fs.DurationVar(&c.drain, "drain", 5*time.Second, "on SIGTERM, how long reviews in flight may finish")
	fs.StringVar(&c.sidecar.Image, "image", "", "the sidecar's image (default: the injector's own, read from its pod, POD_NAME and POD_NAMESPACE; the annotation "+inject.AnnotationImage+" overrides it)")
	fs.StringVar(&c.sidecar.ConfigMap, "configmap", "sds-proxy", "the ConfigMap holding sds.yaml (annotation "+inject.AnnotationConfigMap+")")
	fs.IntVar(&c.sidecar.ProxyPort, "proxy-port", 8080, "the sidecar's proxy port (annotation "+inject.AnnotationProxyPort+")")
	fs.IntVar(&c.sidecar.AdminPort, "admin-port", 9901, "the sidecar's admin port (annotation "+inject.AnnotationAdminPort+")")
	fs.BoolVar(&c.sidecar.Legacy, "legacy-sidecar", false, "add an ordinary container instead of a native sidecar (Kubernetes < 1.29)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("injector: unexpected arguments %q", fs.Args())
	}
	checked := c.sidecar
	if checked.Image == "" && os.Getenv("POD_NAME") != "" {
		checked.Image = "read from the pod" // at start (ownImage)
	}
	if err := checked.Check(); err != nil {
		return cli.Usagef("injector: %s", strings.ReplaceAll(err.Error(), "\n", "\nsds-proxy: injector: "))
	}
	if (c.certFile == "") != (c.keyFile == "") {
		return cli.Usagef("injector: -tls-cert and -tls-key go together")
	}
	if c.namespace == "" {
		b, err := os.ReadFile(namespaceFile)
		if err != nil {
			return cli.Usagef("injector: -namespace not given and not in a pod (%v)", err)
		}
		c.namespace = strings.TrimSpace(string(b))
	}
	c.serviceNames = []string{c.service + "." + c.namespace + ".svc", c.service + "." + c.namespace + ".svc.cluster.local"}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return serve(ctx, c, fs.Output())
}

// serve runs the injector of c, logging to stderr, until ctx is done.
func serve(ctx context.Context, c config, stderr io.Writer) error {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder // as the proxy's log
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(stderr)), zap.InfoLevel))
	defer log.Sync()
	// The apiserver is needed to make the certificate and to report; with
	// -tls-cert and -report=false the injector never calls it.
	var k *kube
	var err error
	if c.certFile == "" || c.report || c.sidecar.Image == "" {
		if k, err = newKube(c.apiserver, c.tokenFile, c.caFile); err != nil {
			return fmt.Errorf("injector: %w", err)
		}
	}
	if c.sidecar.Image == "" {
		if c.sidecar.Image, err = ownImage(ctx, k, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")); err != nil {
			return fmt.Errorf("injector: -image not given: %w", err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	hook := NewWebhook(c.sidecar, c.version, log, reg)
	certs := &certHolder{}
	var ready atomic.Bool

	webhookLn, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("injector: -listen: %w", err)
	}
	healthLn, err := net.Listen("tcp", c.health)
	if err != nil {
		webhookLn.Close()
		return fmt.Errorf("injector: -health: %w", err)
	}
	webhookSrv, healthSrv := servers(hook, certs, &ready, reg)

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() {
		if err := webhookSrv.ServeTLS(webhookLn, "", ""); !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("injector: the webhook: %w", err)
		}
	})
	wg.Go(func() {
		if err := healthSrv.Serve(healthLn); !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("injector: -health: %w", err)
		}
	})
	log.Info("serving", zap.String("webhook_addr", webhookLn.Addr().String()), zap.String("health_addr", healthLn.Addr().String()),
		zap.String("webhook", c.webhook), zap.Strings("names", c.serviceNames), zap.String("image", c.sidecar.Image), zap.String("version", c.version))

	loopCtx, cancelLoops := context.WithCancel(ctx)
	if c.certFile != "" {
		wg.Go(func() { keepCertFiles(loopCtx, c, certs, &ready, log) })
	} else {
		wg.Go(func() { keepCert(loopCtx, c, k, certs, &ready, log) })
	}
	if c.report {
		host, _ := os.Hostname()
		rep := &reporter{k: k, log: log, instance: host, now: time.Now, namespaces: map[string]nsLabel{},
			reported: prometheus.NewCounter(prometheus.CounterOpts{Name: "sds_injector_not_injected_total",
				Help: "Pods found running without the sidecar their namespace or annotation asks for, each given a SidecarNotInjected event."})}
		reg.MustRegister(rep.reported)
		wg.Go(func() { rep.run(loopCtx) })
	}

	var failed error
	select {
	case <-ctx.Done():
	case failed = <-errs:
	}
	ready.Store(false)
	log.Info("stopping", zap.Duration("drain", c.drain))
	dctx, cancel := context.WithTimeout(context.Background(), c.drain)
	defer cancel()
	webhookSrv.Shutdown(dctx)
	healthSrv.Shutdown(dctx)
	cancelLoops()
	wg.Wait()
	return failed
}

// servers returns the webhook's server (TLS, with certs' certificate) and
// the server of /healthz, /readyz (200 once ready) and /metrics (reg).
func servers(hook http.Handler, certs *certHolder, ready *atomic.Bool, reg *prometheus.Registry) (webhook, health *http.Server) {
	mux := http.NewServeMux()
	mux.Handle(PathNamespace, hook)
	mux.Handle(PathPod, hook)
	webhook = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get}}
	hm := http.NewServeMux()
	hm.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	hm.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "the serving certificate or the caBundle is not in place yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	hm.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return webhook, &http.Server{Handler: hm, ReadHeaderTimeout: 10 * time.Second}
}

// certHolder holds the serving certificate the TLS handshakes read.
type certHolder struct {
	cert atomic.Pointer[tls.Certificate]
}

func (h *certHolder) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := h.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate yet")
}

// retryWait is how soon a failed certificate step is tried again.
const retryWait = 5 * time.Second

// every runs step at once and then again after the wait it returns, until
// ctx is done.
func every(ctx context.Context, step func() time.Duration) {
	for wait := time.Duration(0); ; {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = step()
	}
}

// keepCert puts the serving certificate in place (ensureCert) and its CA
// into the webhook configuration (ensureCABundle), then checks both again
// every c.recheck: a renewed certificate, or a caBundle reset by someone's
// apply, is put right. ready is set once both are in place; a failure is
// logged and tried again retryWait later.
func keepCert(ctx context.Context, c config, k *kube, certs *certHolder, ready *atomic.Bool, log *zap.Logger) {
	every(ctx, func() time.Duration {
		sc, err := ensureCert(ctx, k, c.namespace, c.secret, c.serviceNames, time.Now())
		if err == nil {
			var pair tls.Certificate
			if pair, err = tls.X509KeyPair(sc.Cert, sc.Key); err == nil {
				certs.cert.Store(&pair)
				var wrote bool
				if wrote, err = ensureCABundle(ctx, k, c.webhook, sc.CA); wrote {
					log.Info("caBundle written", zap.String("webhook", c.webhook))
				}
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("the serving certificate or the caBundle: not in place; the webhook fails open meanwhile", zap.Error(err))
			}
			return retryWait
		}
		if !ready.Swap(true) {
			log.Info("ready: the webhook serves", zap.String("secret", c.namespace+"/"+c.secret))
		}
		return c.recheck
	})
}

// keepCertFiles serves the certificate of c.certFile and c.keyFile, read
// again every c.recheck (cert-manager renews it in place). ready is set
// once one is read; a failure is logged and tried again retryWait later,
// the last good certificate kept meanwhile.
func keepCertFiles(ctx context.Context, c config, certs *certHolder, ready *atomic.Bool, log *zap.Logger) {
	every(ctx, func() time.Duration {
		pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			log.Warn("-tls-cert and -tls-key: not loaded", zap.Error(err))
			return retryWait
		}
		certs.cert.Store(&pair)
		if !ready.Swap(true) {
			log.Info("ready: the webhook serves", zap.String("tls_cert", c.certFile))
		}
		return c.recheck
	})
}

// ownImage returns the image of the injector's own container (the first of
// its pod namespace/name whose args begin with "injector"): the sidecar's,
// unless -image says otherwise.
func ownImage(ctx context.Context, k *kube, namespace, name string) (string, error) {
	var pod struct {
		Spec struct {
			Containers []struct {
				Image string
				Args  []string
			}
		}
	}
	if err := k.do(ctx, http.MethodGet, "/api/v1/namespaces/"+namespace+"/pods/"+name, "", nil, &pod); err != nil {
		return "", err
	}
	for _, ct := range pod.Spec.Containers {
		if len(ct.Args) > 0 && ct.Args[0] == "injector" {
			return ct.Image, nil
		}
	}
	return "", fmt.Errorf("pod %s/%s has no container whose args begin with injector", namespace, name)
}

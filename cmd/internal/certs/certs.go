// Package certs serves the proxy port's TLS certificates through
// certmagic (docs/tls.md): a certificate pair from files, reloaded when
// the files change, or certificates obtained and renewed by ACME, with
// its HTTP-01 challenges answered on a port of their own.
package certs

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/config"
)

// TLSConfig serves inbound TLS through certmagic (docs/tls.md, "TLS,
// HTTP/2 and gRPC"): a certificate pair from files, or certificates
// obtained by ACME. HTTP/2 is offered; OCSP stapling is off (it would
// reach the network for our own certificates); a client that sends no SNI
// (a probe dialling the pod IP) gets the default certificate instead of
// an internal error. proxyAddr is the proxy port's bound address, where
// TLS-ALPN-01 challenges are answered.
//
// A certificate pair from files is reloaded when the files' content
// changes (read every certPoll, so a mounted Secret's symlink swap, a
// recreated directory and an exhausted inotify are all the same); a pair
// that fails to load is logged and the old one keeps serving.
//
// certReady reports whether a certificate is cached for every ACME domain
// (/readyz waits for it); it is nil for a certificate pair, which is
// loaded before the proxy serves. Whatever it starts (the pair's poll,
// the ACME renewals, the challenge server) stops when ctx is done.
func TLSConfig(ctx context.Context, t config.TLS, proxyAddr net.Addr, log *zap.Logger) (tc *tls.Config, certReady func() bool, err error) {
	log = log.Named("tls")
	var magic *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return magic, nil },
		Logger:           log,
	})
	template := certmagic.Config{
		OCSP:    certmagic.OCSPConfig{DisableStapling: true},
		Storage: certmagic.Default.Storage,
		Logger:  log,
	}
	switch {
	case t.CertFile != "":
		name, err := certificateName(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, nil, err
		}
		template.DefaultServerName = name
		magic = certmagic.New(cache, template)
		pair := &certPair{magic: magic, cache: cache, certFile: t.CertFile, keyFile: t.KeyFile, log: log}
		if err := pair.load(ctx); err != nil {
			return nil, nil, fmt.Errorf("tls: %w", err)
		}
		go pair.poll(ctx)
	case t.ACME != nil:
		if magic, err = newACME(ctx, t.ACME, cache, template, proxyAddr, log); err != nil {
			return nil, nil, fmt.Errorf("tls: acme: %w", err)
		}
		certReady = func() bool { return cached(cache, t.ACME.Domains) }
	default:
		return nil, nil, errors.New("tls: neither certFile nor acme is set")
	}
	tc = magic.TLSConfig()
	tc.NextProtos = append([]string{"h2", "http/1.1"}, tc.NextProtos...)
	return tc, certReady, nil
}

// newACME returns a certmagic config that obtains and renews certificates
// for a's domains in the background, from a's CA (trusting a.CARoot),
// kept in a.Storage. TLS-ALPN-01 challenges are answered on the proxy
// port (certmagic's TLS config does it; its solver finds the port in use
// and leaves it to us), HTTP-01 ones on a.HTTPListen when it is set.
func newACME(ctx context.Context, a *config.ACME, cache *certmagic.Cache, template certmagic.Config, proxyAddr net.Addr, log *zap.Logger) (*certmagic.Config, error) {
	// certmagic's package-level defaults log where no Config reaches
	// (storage cleaning, issuers built from defaults): through us too.
	certmagic.Default.Logger = log
	certmagic.DefaultACME.Logger = log
	if a.Storage != "" {
		if err := os.MkdirAll(a.Storage, 0o700); err != nil {
			return nil, fmt.Errorf("storage: %w", err)
		}
		template.Storage = &certmagic.FileStorage{Path: a.Storage}
	}
	template.DefaultServerName = a.Domains[0]
	magic := certmagic.New(cache, template)
	host, port, err := net.SplitHostPort(proxyAddr.String())
	if err != nil {
		return nil, err
	}
	tlsPort, _ := strconv.Atoi(port)
	issuer := certmagic.ACMEIssuer{
		CA:             orDefault(a.CA, certmagic.LetsEncryptProductionCA),
		Email:          a.Email,
		Agreed:         true,
		ListenHost:     host,
		AltTLSALPNPort: tlsPort,
		Logger:         log,
	}
	if a.CARoot != "" {
		pem, err := os.ReadFile(a.CARoot)
		if err != nil {
			return nil, fmt.Errorf("caRoot: %w", err)
		}
		issuer.TrustedRoots = x509.NewCertPool()
		if !issuer.TrustedRoots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caRoot: %s holds no PEM certificate", a.CARoot)
		}
	}
	var challenges net.Listener
	if a.HTTPListen != "" {
		if challenges, err = net.Listen("tcp", a.HTTPListen); err != nil {
			return nil, fmt.Errorf("httpListen: %w", err)
		}
		_, port, _ := net.SplitHostPort(challenges.Addr().String())
		issuer.AltHTTPPort, _ = strconv.Atoi(port)
	} else {
		issuer.DisableHTTPChallenge = true
	}
	acme := certmagic.NewACMEIssuer(magic, issuer)
	magic.Issuers = []certmagic.Issuer{acme}
	if challenges != nil {
		serveChallenges(ctx, challenges, acme, log)
	}
	if err := magic.ManageAsync(ctx, a.Domains); err != nil {
		return nil, err
	}
	return magic, nil
}

// serveChallenges answers ACME HTTP-01 challenges on ln until ctx is done,
// and redirects every other request to https on the same host.
func serveChallenges(ctx context.Context, ln net.Listener, acme *certmagic.ACMEIssuer, log *zap.Logger) {
	toHTTPS := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
	})
	srv := &http.Server{
		Handler:           acme.HTTPChallengeHandler(toHTTPS),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          zap.NewStdLog(log.Named("challenges")),
	}
	log.Info("answering ACME HTTP-01 challenges", zap.String("addr", ln.Addr().String()))
	go srv.Serve(ln)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
}

// cached reports whether certmagic's cache holds an unexpired certificate
// for each of names.
func cached(cache *certmagic.Cache, names []string) bool {
	for _, name := range names {
		found := false
		for _, c := range cache.AllMatchingCertificates(strings.ToLower(name)) {
			found = found || !c.Expired()
		}
		if !found {
			return false
		}
	}
	return true
}

// certificateName returns the first name the certificate is for.
func certificateName(certFile, keyFile string) (string, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return "", fmt.Errorf("tls: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return "", fmt.Errorf("tls: %s: %w", certFile, err)
	}
	if len(leaf.DNSNames) > 0 {
		return leaf.DNSNames[0], nil
	}
	if len(leaf.IPAddresses) > 0 {
		return leaf.IPAddresses[0].String(), nil
	}
	return leaf.Subject.CommonName, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// The challenge server's limits, those of the proxy port: a request's
// header within readHeaderTimeout and at most maxHeaderBytes.
const (
	readHeaderTimeout = 10 * time.Second
	maxHeaderBytes    = 64 << 10
)

// certPair is a certificate and key from files, cached in certmagic and
// replaced when the files change.
type certPair struct {
	magic             *certmagic.Config
	cache             *certmagic.Cache
	certFile, keyFile string
	log               *zap.Logger
	hash              string // certmagic's hash of the certificate in the cache
}

// load caches the files' certificate, then removes the one it replaces.
// (Caching first and removing after avoids certmagic's replace-in-place
// call, which deadlocks when the name is already cached.)
func (c *certPair) load(ctx context.Context) error {
	hash, err := c.magic.CacheUnmanagedCertificatePEMFile(ctx, c.certFile, c.keyFile, nil)
	if err != nil {
		return err
	}
	if c.hash != "" && c.hash != hash {
		c.cache.Remove([]string{c.hash})
		c.log.Info("certificate reloaded", zap.String("cert_file", c.certFile))
	}
	c.hash = hash
	return nil
}

// certPoll is how often the certificate files are read to find a change.
// A Kubernetes Secret reaches a mounted volume a minute or so after it
// changes, so a few seconds more cost nothing, and a poll needs no inotify
// instance (a shared, often exhausted, per-UID resource) and cannot lose
// its watch when the directory is replaced.
const certPoll = 2 * time.Second

// poll reloads the pair whenever the files' content differs from the last
// content read, until ctx is done. A pair read while a writer is between
// the two files fails to load and is logged; the finished pair differs
// again and loads at the next poll. A broken pair is logged once.
func (c *certPair) poll(ctx context.Context) {
	last := c.contentHash()
	tick := time.NewTicker(certPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		h := c.contentHash()
		if h == last {
			continue
		}
		last = h
		if err := c.load(ctx); err != nil {
			c.log.Error("certificate reload failed; the previous certificate keeps serving", zap.Error(err))
		}
	}
}

// contentHash returns a hash of both files' content, or "" when either
// cannot be read.
func (c *certPair) contentHash() string {
	sum := sha256.New()
	for _, name := range []string{c.certFile, c.keyFile} {
		f, err := os.Open(name)
		if err != nil {
			return ""
		}
		_, err = io.Copy(sum, io.LimitReader(f, maxPEMSize))
		f.Close()
		if err != nil {
			return ""
		}
	}
	return hex.EncodeToString(sum.Sum(nil))
}

// maxPEMSize bounds what contentHash reads of each file, in bytes: a
// certificate chain is a few KiB.
const maxPEMSize = 1 << 20

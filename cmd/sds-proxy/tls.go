package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/config"
)

// newTLSConfig serves inbound TLS through certmagic (README, "TLS, HTTP/2
// and gRPC"): a
// certificate pair from files, or certificates obtained by ACME. HTTP/2 is
// offered; OCSP stapling is off (it would reach the network for our own
// certificates); a client that sends no SNI (a probe dialling the pod IP)
// gets the default certificate instead of an internal error.
//
// A certificate pair from files is reloaded when the files' content
// changes (read every certPoll, so a mounted Secret's symlink swap, a
// recreated directory and an exhausted inotify are all the same); a pair
// that fails to load is logged and the old one keeps serving.
func newTLSConfig(ctx context.Context, t config.TLS, log *zap.Logger) (*tls.Config, error) {
	var magic *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return magic, nil },
		Logger:           log.Named("tls"),
	})
	template := certmagic.Config{
		OCSP:    certmagic.OCSPConfig{DisableStapling: true},
		Storage: certmagic.Default.Storage,
		Logger:  log.Named("tls"),
	}
	switch {
	case t.CertFile != "":
		name, err := certificateName(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		template.DefaultServerName = name
		magic = certmagic.New(cache, template)
		pair := &certPair{magic: magic, cache: cache, certFile: t.CertFile, keyFile: t.KeyFile, log: log.Named("tls")}
		if err := pair.load(ctx); err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		go pair.poll(ctx)
	case t.ACME != nil:
		template.DefaultServerName = t.ACME.Domains[0]
		magic = certmagic.New(cache, template)
		issuer := certmagic.NewACMEIssuer(magic, certmagic.ACMEIssuer{
			CA:     orDefault(t.ACME.CA, certmagic.LetsEncryptProductionCA),
			Email:  t.ACME.Email,
			Agreed: true,
		})
		magic.Issuers = []certmagic.Issuer{issuer}
		if err := magic.ManageAsync(ctx, t.ACME.Domains); err != nil {
			return nil, fmt.Errorf("tls: acme: %w", err)
		}
	default:
		return nil, errors.New("tls: neither certFile nor acme is set")
	}
	tc := magic.TLSConfig()
	tc.NextProtos = append([]string{"h2", "http/1.1"}, tc.NextProtos...)
	return tc, nil
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

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/config"
)

// newTLSConfig serves inbound TLS through certmagic (SPEC §7): a
// certificate pair from files, or certificates obtained by ACME. HTTP/2 is
// offered; OCSP stapling is off (it would reach the network for our own
// certificates); a client that sends no SNI (a probe dialling the pod IP)
// gets the default certificate instead of an internal error.
//
// A certificate pair from files is reloaded when the files change (watched
// through their directories, as a mounted Secret is updated by a symlink
// swap); a pair that fails to load is logged and the old one keeps serving.
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
		if err := pair.watch(ctx); err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
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

// certDebounce lets a writer finish both files before they are read.
const certDebounce = 250 * time.Millisecond

// watch reloads the pair after any change in the files' directories, until
// ctx is done.
func (c *certPair) watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	for _, dir := range []string{filepath.Dir(c.certFile), filepath.Dir(c.keyFile)} {
		if err := w.Add(dir); err != nil {
			w.Close()
			return fmt.Errorf("watching %s: %w", dir, err)
		}
	}
	go func() {
		defer w.Close()
		debounce := time.NewTimer(time.Hour)
		debounce.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.Events:
				debounce.Reset(certDebounce)
			case err := <-w.Errors:
				c.log.Warn("watching the certificate files", zap.Error(err))
			case <-debounce.C:
				if err := c.load(ctx); err != nil {
					c.log.Error("certificate reload failed; the previous certificate keeps serving", zap.Error(err))
				}
			}
		}
	}()
	return nil
}

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/config"
)

// newTLSConfig serves inbound TLS through certmagic (SPEC §7): a
// certificate pair from files, or certificates obtained by ACME. HTTP/2 is
// offered; OCSP stapling is off (it would reach the network for our own
// certificates); a client that sends no SNI (a probe dialling the pod IP)
// gets the default certificate instead of an internal error.
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
		if _, err := magic.CacheUnmanagedCertificatePEMFile(ctx, t.CertFile, t.KeyFile, nil); err != nil {
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

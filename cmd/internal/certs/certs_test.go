package certs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// selfSigned returns a certificate for name valid from notBefore to
// notAfter.
func selfSigned(t *testing.T, name string, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestACMEReadiness: with ACME, the proxy is ready (certReady) once an
// unexpired certificate is cached for every domain, whatever the case of
// its name.
func TestACMEReadiness(t *testing.T) {
	var magic *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return magic, nil },
		Logger:           zap.NewNop(),
	})
	defer cache.Stop()
	magic = certmagic.New(cache, certmagic.Config{Logger: zap.NewNop(), OCSP: certmagic.OCSPConfig{DisableStapling: true}})
	domains := []string{"a.example", "B.example"}
	if cached(cache, domains) {
		t.Error("ready with no certificate cached, want not ready")
	}
	now := time.Now()
	ctx := context.Background()
	for _, c := range []tls.Certificate{
		selfSigned(t, "a.example", now.Add(-time.Hour), now.Add(time.Hour)),
		selfSigned(t, "b.example", now.Add(-2*time.Hour), now.Add(-time.Hour)), // expired
	} {
		if _, err := magic.CacheUnmanagedTLSCertificate(ctx, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	if cached(cache, domains) {
		t.Error("ready with b.example's certificate expired, want not ready")
	}
	if _, err := magic.CacheUnmanagedTLSCertificate(ctx, selfSigned(t, "b.example", now.Add(-time.Hour), now.Add(time.Hour)), nil); err != nil {
		t.Fatal(err)
	}
	if !cached(cache, domains) {
		t.Error("not ready with a certificate for each domain, want ready")
	}
}

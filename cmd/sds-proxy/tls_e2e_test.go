package main_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for sds.test and 127.0.0.1
// with the given serial number, as editors and Secret mounts do: to
// temporary files renamed over the old ones.
func writeCert(t *testing.T, dir string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "sds.test"},
		DNSNames:     []string{"sds.test"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"key.pem":  {Type: "EC PRIVATE KEY", Bytes: keyDER},
		"cert.pem": {Type: "CERTIFICATE", Bytes: der},
	} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestTLS: inbound TLS from a certificate pair offers HTTP/2, serves a
// client that sends no SNI (a probe dialling the pod IP), and picks up a
// rotated certificate without a restart.
func TestTLS(t *testing.T) {
	t.Parallel()
	certDir := t.TempDir()
	first := writeCert(t, certDir, 1)
	e := setup(t, "10s", 10, strings.Join([]string{
		"tls:",
		"  certFile: " + filepath.Join(certDir, "cert.pem"),
		"  keyFile: " + filepath.Join(certDir, "key.pem"),
		"routes:",
		"  - point: all",
		"    match: {}",
		"points:",
		"  all:",
		"    visitThreshold: 1000",
		"",
	}, "\n"))
	addr := strings.TrimPrefix(e.proxy.url, "http://")

	pool := x509.NewCertPool()
	pool.AddCert(first)
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "sds.test"},
		ForceAttemptHTTP2: true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := client.Get("https://" + addr + "/api/orders")
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
		t.Errorf("GET over TLS: got %d %s, want 200 HTTP/2.0", resp.StatusCode, resp.Proto)
	}

	// served returns the serial of the certificate a client that sends no
	// SNI is given.
	served := func() int64 {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("TLS handshake without SNI: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := served(); got != 1 {
		t.Errorf("certificate without SNI: got serial %d, want 1", got)
	}

	writeCert(t, certDir, 2)
	if !eventually(wait, func() bool { return served() == 2 }) {
		t.Errorf("the rotated certificate (serial 2) was not served within %v; still serial %d", wait, served())
	}

	// The directory deleted and made again, as a volume may be: the
	// certificate in the new one is served.
	if err := os.RemoveAll(certDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(certDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeCert(t, certDir, 3)
	if !eventually(wait, func() bool { return served() == 3 }) {
		t.Errorf("the certificate in a recreated directory (serial 3) was not served within %v; still serial %d", wait, served())
	}
}

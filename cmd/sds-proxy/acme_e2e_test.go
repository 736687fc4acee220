package main_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/internal/tooltest"
)

// acmeDomain is the name the ACME tests obtain a certificate for. Pebble
// validates nothing (PEBBLE_VA_ALWAYS_VALID), so it need not resolve.
const acmeDomain = "sds.test"

// pebbleBinary returns the path of Pebble, Let's Encrypt's test ACME
// server, or skips the test when it is not installed.
func pebbleBinary(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("pebble"); err == nil {
		return path
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for dir := range strings.SplitSeq(strings.TrimSpace(string(out)), string(os.PathListSeparator)) {
			path := filepath.Join(dir, "bin", "pebble")
			if _, err := os.Stat(path); err == nil {
				return path
			}
		}
	}
	tooltest.Skip(t, "pebble", "neither on PATH nor in $(go env GOPATH)/bin", "go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3 (.ci/run does)")
	return ""
}

// pebbleSource returns the directory of the pebble module the binary was
// built from (its test certificates are there), downloading it if needed.
func pebbleSource(t *testing.T, binary string) string {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", binary).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", binary, err)
	}
	version := ""
	for line := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "mod" && f[1] == "github.com/letsencrypt/pebble/v2" {
			version = f[2]
		}
	}
	if version == "" || version == "(devel)" {
		t.Skipf("cannot tell which pebble version %s is (go version -m): its test certificates are needed", binary)
	}
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/letsencrypt/pebble/v2@"+version)
	cmd.Dir = t.TempDir() // outside this module: go.mod stays as it is
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go mod download pebble@%s: %v", version, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download pebble@%s: no Dir in %s", version, out)
	}
	return mod.Dir
}

// pebble is a running Pebble.
type pebble struct {
	*process
	dir    string // ACME directory URL
	caRoot string // the PEM file of the CA Pebble's own HTTPS listener uses
	roots  *x509.CertPool
}

// startPebble runs Pebble on loopback ports, validating no challenge, and
// reads the root its certificates chain to from its management API.
func startPebble(t *testing.T) *pebble {
	t.Helper()
	binary := pebbleBinary(t)
	src := pebbleSource(t, binary)
	caRoot := filepath.Join(src, "test", "certs", "pebble.minica.pem")
	dir := t.TempDir()
	var p *process
	var acmeAddr, mgmtAddr string
	// freePort's port may be taken before Pebble binds it: try again.
	for attempt := 0; p == nil; attempt++ {
		acmeAddr, mgmtAddr = freePort(t), freePort(t)
		conf := map[string]any{"pebble": map[string]any{
			"listenAddress":           acmeAddr,
			"managementListenAddress": mgmtAddr,
			"certificate":             filepath.Join(src, "test", "certs", "localhost", "cert.pem"),
			"privateKey":              filepath.Join(src, "test", "certs", "localhost", "key.pem"),
			"httpPort":                5002,
			"tlsPort":                 5001,
			"ocspResponderURL":        "",
		}}
		data, _ := json.Marshal(conf)
		path := filepath.Join(dir, "pebble.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(binary, "-config", path)
		cmd.Env = append(os.Environ(), "PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
		started, err := start(t, cmd)
		if err != nil {
			t.Fatalf("start pebble: %v", err)
		}
		if _, ok := started.stdout.find(0, wait, started.exited, func(s string) bool { return strings.Contains(s, "ACME directory available at") }); ok {
			p = started
		} else if attempt == 2 {
			t.Fatalf("pebble did not start: %s %s", started.stdout, started.stderr)
		}
	}
	// Pebble prints its addresses before its listeners accept: wait until
	// both do.
	if !eventually(wait, func() bool { return accepts(acmeAddr) && accepts(mgmtAddr) }) {
		t.Fatalf("pebble's listeners %s and %s did not accept within %v", acmeAddr, mgmtAddr, wait)
	}
	trust := x509.NewCertPool()
	pem, err := os.ReadFile(caRoot)
	if err != nil || !trust.AppendCertsFromPEM(pem) {
		t.Fatalf("pebble's CA %s: %v", caRoot, err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: trust}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: wait}).Get("https://" + mgmtAddr + "/roots/0")
	if err != nil {
		t.Fatalf("pebble's root: %v", err)
	}
	defer resp.Body.Close()
	root, err := io.ReadAll(resp.Body)
	roots := x509.NewCertPool()
	if err != nil || resp.StatusCode != 200 || !roots.AppendCertsFromPEM(root) {
		t.Fatalf("pebble's root: %d %v %q", resp.StatusCode, err, root)
	}
	return &pebble{process: p, dir: "https://" + acmeAddr + "/dir", caRoot: caRoot, roots: roots}
}

// issued counts the certificates Pebble has issued.
func (p *pebble) issued() int {
	return p.stdout.count(0, func(s string) bool { return strings.Contains(s, "Issued certificate serial") })
}

// readyz returns the status of the proxy's /readyz.
func readyz(t *testing.T, p *proxyProcess) int {
	t.Helper()
	resp, err := http.Get(p.admin + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestACMEPebble: with tls.acme against Pebble (trusted through caRoot,
// state in storage), /readyz is 503 until the certificate is there and
// 200 after; clients are served over HTTP/2 with a certificate for the
// domain that chains to Pebble's root; every log line is JSON; and a
// restarted proxy serves the certificate from storage without a new order.
func TestACMEPebble(t *testing.T) {
	e := newEnv(t)
	peb := startPebble(t)
	storage := filepath.Join(e.dir, "acme")
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, configHeader(e.upstream, "10s", 10)+strings.Join([]string{
		"tls:",
		"  acme:",
		"    domains: [" + acmeDomain + "]",
		"    email: ops@sds.test",
		"    ca: " + peb.dir,
		"    caRoot: " + peb.caRoot,
		"    storage: " + storage,
		pointRoute + "    visitThreshold: 1000",
		"",
	}, "\n"))

	// Pebble stopped, the proxy cannot have its certificate yet.
	if err := peb.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peb.signal(syscall.SIGCONT) }) // before the harness stops it
	p := startProxy(t, e.config)
	if got := readyz(t, p); got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before the certificate: got %d, want 503", got)
	}
	if err := peb.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if !eventually(wait, func() bool { return readyz(t, p) == http.StatusOK }) {
		t.Fatalf("/readyz is not 200 within %v of Pebble resuming", wait)
	}
	t.Logf("time to first certificate: %v", time.Since(began).Round(time.Millisecond))
	if n := peb.issued(); n != 1 {
		t.Errorf("pebble issued %d certificates, want 1", n)
	}
	checkACMEServed(t, peb, p)

	// Restarted on the same storage: the certificate comes from storage.
	p.stop(wait)
	p = startProxy(t, e.config)
	if !eventually(wait, func() bool { return readyz(t, p) == http.StatusOK }) {
		t.Fatalf("/readyz after a restart is not 200 within %v", wait)
	}
	checkACMEServed(t, peb, p)
	if n := peb.issued(); n != 1 {
		t.Errorf("after a restart, pebble issued %d certificates in all, want 1 (the stored one reused)", n)
	}
	if n := p.countLog(0, msgIs("obtaining certificate")); n != 0 {
		t.Errorf("after a restart, the proxy logged %d \"obtaining certificate\" lines, want none", n)
	}
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if line != "" && parseLog(line) == nil {
			t.Errorf("a log line that is not JSON: %q", line)
		}
	}
}

// checkACMEServed asks the proxy for / over TLS, as acmeDomain, trusting
// only Pebble's root, and checks it is served over HTTP/2 with a
// certificate for the domain.
func checkACMEServed(t *testing.T, peb *pebble, p *proxyProcess) {
	t.Helper()
	addr := strings.TrimPrefix(p.url, "http://")
	var dialer net.Dialer
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: peb.roots, ServerName: acmeDomain},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: wait}).Get("https://" + acmeDomain + "/")
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Errorf("got %s, want HTTP/2", resp.Proto)
	}
	if !strings.HasPrefix(string(body), "upstream") {
		t.Errorf("got %d %q, want the upstream's answer", resp.StatusCode, body)
	}
	leaf := resp.TLS.PeerCertificates[0]
	if err := leaf.VerifyHostname(acmeDomain); err != nil {
		t.Errorf("certificate: %v", err)
	}
	if !strings.Contains(fmt.Sprint(leaf.Issuer), "Pebble") {
		t.Errorf("certificate issued by %v, want Pebble's intermediate", leaf.Issuer)
	}
}

// accepts reports whether a TCP connection to addr succeeds.
func accepts(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

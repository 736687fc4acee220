package main_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestH2CGRPC: with h2c on both sides, a gRPC-style call goes through over
// cleartext HTTP/2 end to end with its trailers; a grpc-status other than 0
// in the trailers counts as an exception, and a degraded gRPC call gets a
// trailers-only answer with grpc-status 14 and the fallback's grpcMessage,
// never the fallback's HTTP status and body.
func TestH2CGRPC(t *testing.T) {
	needBinaries(t)
	e := &env{t: t, dir: t.TempDir(), upstream: "h2c://" + startUpstream(t, "-h2c")}
	e.config = filepath.Join(e.dir, "sds.yaml")
	config := "upstream: " + e.upstream + "\nh2c: true\ndrainTimeout: 5s\n" +
		pointRoute + "    exceptionThreshold: 1\n    fallback: {status: 503, body: busy, grpcMessage: try later}\n"
	if err := os.WriteFile(e.config, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	e.proxy = startProxy(t, e.config)
	e.client = newClient(t) // for the admin port

	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	call := func(status string) (*http.Response, []byte) {
		t.Helper()
		frame := []byte{0, 0, 0, 0, 0}
		req, err := http.NewRequest(http.MethodPost, e.proxy.url+"/grpc?grpc-status="+status, bytes.NewReader(frame))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("gRPC call through the proxy: %v", err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("reading the gRPC answer: %v", err)
		}
		return resp, body
	}

	resp, body := call("0")
	if resp.Proto != "HTTP/2.0" || resp.Header.Get("X-Upstream-Proto") != "HTTP/2.0" {
		t.Errorf("protocols: client side %s, upstream side %q; want HTTP/2.0 on both", resp.Proto, resp.Header.Get("X-Upstream-Proto"))
	}
	if got := resp.Trailer.Get("Grpc-Status"); resp.StatusCode != 200 || got != "0" || len(body) != 5 {
		t.Errorf("good call: got %d, %d body bytes, trailer grpc-status %q; want 200, 5, 0", resp.StatusCode, len(body), got)
	}
	if got := e.point("p").Window.Exceptions; got != 0 {
		t.Errorf("exceptions after a good call: got %d, want 0", got)
	}

	resp, _ = call("14")
	if got := resp.Trailer.Get("Grpc-Status"); got != "14" {
		t.Errorf("failing call: trailer grpc-status %q, want 14 relayed", got)
	}
	if !eventually(2*time.Second, func() bool { return e.point("p").Window.Exceptions == 1 }) {
		t.Errorf("exceptions after grpc-status 14 in the trailers: got %d, want 1", e.point("p").Window.Exceptions)
	}

	resp, body = call("0")
	if resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != "14" || resp.Header.Get("Grpc-Message") != "try later" ||
		resp.Header.Get("Sds-Degraded") != "exception; point=p" || len(body) != 0 {
		t.Errorf("degraded call: got %d grpc-status %q grpc-message %q Sds-Degraded %q body %q; want a trailers-only 200 with grpc-status 14 and \"try later\"",
			resp.StatusCode, resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message"), resp.Header.Get("Sds-Degraded"), body)
	}
}

// TestValidateGRPCWarning: an HTTP fallback on a config that carries gRPC,
// with no grpcStatus or grpcMessage, is a warning: validate prints it as
// FILE:LINE:COL: warning: message, then OK, and exits 0.
func TestValidateGRPCWarning(t *testing.T) {
	needBinaries(t)
	path := filepath.Join(t.TempDir(), "sds.yaml")
	config := "upstream: h2c://127.0.0.1:9\n" + pointRoute + "    visitThreshold: 5\n    fallback: {status: 503, body: busy}\n"
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := command("sds-proxy", "validate", "-config", path).CombinedOutput()
	if err != nil {
		t.Fatalf("validate: %v, output %q; want exit 0", err, out)
	}
	want := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:\d+:\d+: warning: point "p": gRPC clients \(the h2c:// upstream\) never get this fallback's HTTP status and body.*\nOK\n$`)
	if !want.Match(out) {
		t.Errorf("validate: got %q, want one warning line and OK", out)
	}
}

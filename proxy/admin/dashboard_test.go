package admin_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

func TestAdminDashboardPage(t *testing.T) {
	f := newAdminFixture(t)
	resp, body := f.get(t, http.MethodGet, "/")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /: got status %d, want 200", resp.StatusCode)
	}
	if got := resp.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
		t.Errorf("GET /: got Content-Type %q, want text/html; charset=utf-8", got)
	}
	for _, want := range []string{`const STATUS_URL = "status";`, `fetch(STATUS_URL`, `"disconnected"`} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /: page lacks %q", want)
		}
	}
	// Self-contained: nothing loaded from elsewhere, and no markup built
	// from strings.
	for _, bad := range []string{"<link", " src=", "@import", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"} {
		if strings.Contains(body, bad) {
			t.Errorf("GET /: page contains %q", bad)
		}
	}
	if n := strings.Count(body, "http"); n != 1 || !strings.Contains(body, `"http://www.w3.org/2000/svg"`) {
		t.Errorf("GET /: got %d mentions of http, want only the SVG namespace", n)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "connect-src 'self'", "script-src 'sha256-", "style-src 'sha256-"} {
		if !strings.Contains(csp, want) {
			t.Errorf("GET /: Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Count(csp, "'sha256-") != 2 {
		t.Errorf("GET /: Content-Security-Policy %q: want one hash for the script and one for the style", csp)
	}
}

// TestAdminDashboardChromium renders the dashboard in headless Chromium
// against a live admin port and reads the DOM it built.
func TestAdminDashboardChromium(t *testing.T) {
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no %s: %v", chromium, err)
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
	const evil = `q<img src=x onerror=alert(1)>`

	t.Run("live", func(t *testing.T) {
		f := newAdminFixture(t,
			adminPoint{name: "p", path: "/p", settings: func(s *limiter.Settings) { s.VisitThreshold = limiter.At(2) }},
			adminPoint{name: evil, path: "/q"},
		)
		for range 5 {
			f.send(t, "/p")
		}
		f.send(t, "/q")
		dom := dumpDOM(t, f.srv.URL+"/")
		for _, want := range []string{
			`<span id="conn" class="badge conn-live">live</span>`,
			`<h2 class="name">p</h2>`,
			`<h2 class="name">q&lt;img src=x onerror=alert(1)&gt;</h2>`,
			`<span class="badge state state-tripped">tripped</span>`,
			`<span class="badge state state-closed">closed</span>`,
			`<article class="card" data-state="tripped">`,
			`<code id="cfg-hash" title="` + f.status.Hash + `">` + f.status.Hash[:12] + `</code>`,
			`visitThreshold</dt><dd>2</dd>`,
			`visit: 3 against threshold 2`,
			`visits · max 5 · sum 5`,
			`window of 10s in 10 buckets of 1s, oldest left`,
		} {
			if !strings.Contains(dom, want) {
				t.Errorf("dashboard DOM lacks %q", want)
			}
		}
		if strings.Contains(dom, "<img") {
			t.Errorf("dashboard DOM has an <img> element: a point name was parsed as markup")
		}
		for _, series := range []string{"visits", "degraded", "exceptions", "timeouts"} {
			attr := `data-series="` + series + `" viewBox="0 0 100 30" preserveAspectRatio="none" role="img" data-buckets="10"`
			if got := strings.Count(dom, attr); got != 2 {
				t.Errorf("dashboard DOM: got %d %s charts of 10 buckets, want 2 (one per point)", got, series)
			}
		}
		if got := strings.Count(dom, "<rect "); got != 2*4*10 {
			t.Errorf("dashboard DOM: got %d chart bars, want %d", got, 2*4*10)
		}
		if t.Failed() {
			t.Logf("DOM:\n%s", dom)
		}
	})

	t.Run("no points", func(t *testing.T) {
		f := newAdminFixture(t)
		dom := dumpDOM(t, f.srv.URL+"/")
		if !strings.Contains(dom, `<p id="empty" class="muted">No points are configured`) || strings.Contains(dom, "<article") {
			t.Errorf("dashboard DOM with no points: want the no-points note and no cards:\n%s", dom)
		}
	})

	t.Run("disconnected", func(t *testing.T) {
		f := newAdminFixture(t)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/status" {
				http.Error(w, "gone", http.StatusBadGateway)
				return
			}
			f.admin.ServeHTTP(w, r)
		}))
		defer srv.Close()
		dom := dumpDOM(t, srv.URL+"/")
		if !strings.Contains(dom, `<span id="conn" class="badge conn-disconnected" title="HTTP 502">disconnected</span>`) {
			t.Errorf("dashboard DOM with /status failing: want the disconnected badge:\n%s", dom)
		}
	})
}

// dumpDOM loads url in headless Chromium, lets it run for 3s of virtual
// time (three polls of /status), and returns the serialized DOM.
func dumpDOM(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=3000", "--dump-dom", url)
	cmd.WaitDelay = 5 * time.Second // chromium's helpers may hold the pipes
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v (context: %v)\nstderr:\n%s", err, ctx.Err(), stderr.String())
	}
	return stdout.String()
}

package main_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the newcomer's first command, `sds-proxy demo`, on the
// repository's example sds.yaml (moved to free loopback ports) and follows
// the instructions it prints: orders.read trips on its 21st visit, slow
// trips on its third timeout and enters its delay, and once the demo
// service is fast again a probe ends the delay.
func TestDemo(t *testing.T) {
	needBinaries(t)
	example, err := os.ReadFile("../../sds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr, serviceAddr, adminAddr := freePort(t), freePort(t), freePort(t)
	config := string(example)
	for key, value := range map[string]string{"listen": proxyAddr, "upstream": "http://" + serviceAddr, "admin": adminAddr} {
		re := regexp.MustCompile(`(?m)^` + key + `: \S+`)
		if !re.MatchString(config) {
			t.Fatalf("the example sds.yaml has no top-level %s", key)
		}
		config = re.ReplaceAllString(config, key+": "+value)
	}
	path := filepath.Join(t.TempDir(), "sds.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}

	demo := startProcess(t, "sds-proxy", "demo", "-config", path)
	// The instructions end with "Watch it happen": wait for all of them.
	if _, ok := demo.stdout.find(0, 15*time.Second, demo.exited, func(s string) bool { return strings.Contains(s, "Watch it happen") }); !ok {
		t.Fatalf("the demo did not start:\n%s\n%s", demo.stdout, demo.stderr)
	}
	proxyURL, serviceURL := "http://"+proxyAddr, "http://"+serviceAddr
	if out := demo.stdout.String(); !strings.Contains(out, proxyURL+"/api/orders") || !strings.Contains(out, serviceURL+"/_control") {
		t.Errorf("the printed instructions do not name the proxy and service addresses:\n%s", out)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Sds-Degraded")
	}

	statuses := map[int]int{}
	for range 25 {
		code, _ := get(proxyURL + "/api/orders")
		statuses[code]++
	}
	if statuses[200] != 20 || statuses[429] != 5 {
		t.Errorf("25 GET /api/orders: got %v, want 20×200 and 5×429 (visitThreshold 20)", statuses)
	}

	var got []string
	for range 5 {
		code, degraded := get(proxyURL + "/api/slow")
		got = append(got, fmt.Sprintf("%d %s", code, degraded))
	}
	want := []string{"200 ", "200 ", "200 ", "503 timeout; point=slow", "503 timeout; point=slow; delay"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("5 GET /api/slow:\n got %q\nwant %q", got, want)
	}

	if code, _ := get(serviceURL + "/_control?slowLatency=10ms"); code != 200 {
		t.Fatalf("healing the demo service: got %d, want 200", code)
	}
	recovered := eventually(10*time.Second, func() bool {
		code, _ := get(proxyURL + "/api/slow")
		return code == 200
	})
	if !recovered {
		t.Errorf("slow did not recover within 10 s after the service was healed (retryInterval 2s)")
	}
}

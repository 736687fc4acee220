package main_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/internal/tooltest"
)

// demoProcess is a running `sds-proxy demo` and the URLs it printed.
type demoProcess struct {
	*process
	proxy, admin, service string
	out                   string // the walk-through
}

// startDemo runs sds-proxy demo with args in dir ("" for the test's own)
// and waits for the whole walk-through.
func startDemo(t *testing.T, dir string, args ...string) *demoProcess {
	t.Helper()
	cmd := command("sds-proxy", append([]string{"demo"}, args...)...)
	cmd.Dir = dir
	p, err := start(t, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.stdout.find(0, wait, p.exited, func(s string) bool { return strings.HasPrefix(s, "Watch it happen") }); !ok {
		t.Fatalf("the demo did not print its walk-through:\n%s\n%s", p.stdout, p.stderr)
	}
	d := &demoProcess{process: p, out: p.stdout.String()}
	for dst, re := range map[*string]string{
		&d.admin:   `Open the dashboard first: (http://\S+)/\n`,
		&d.proxy:   `\n  proxy +(http://\S+) `,
		&d.service: `\n  demo service +(http://\S+) `,
	} {
		m := regexp.MustCompile(re).FindStringSubmatch(d.out)
		if m == nil {
			t.Fatalf("the walk-through has no %s:\n%s", re, d.out)
		}
		*dst = m[1]
	}
	if !strings.HasPrefix(d.out, "sds-proxy demo is running. Open the dashboard first: "+d.admin+"/\n") {
		t.Errorf("the walk-through does not open with the dashboard's address:\n%s", d.out)
	}
	return d
}

// send sends n requests one after the other and returns each answer as
// "STATUS SDS-DEGRADED" (the header empty when absent), and the
// Sds-Shadow-Degraded headers seen.
func send(t *testing.T, n int, method, url string, header ...string) (answers, shadow []string) {
	t.Helper()
	client := &http.Client{Timeout: wait}
	for range n {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answers = append(answers, fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("Sds-Degraded")))
		if s := resp.Header.Get("Sds-Shadow-Degraded"); s != "" {
			shadow = append(shadow, s)
		}
	}
	return answers, shadow
}

// count returns how many answers are want.
func count(answers []string, want string) int {
	n := 0
	for _, a := range answers {
		if a == want {
			n++
		}
	}
	return n
}

// TestDemoWalkThrough runs the demo as a newcomer does after go install:
// from a directory without any sds.yaml (the built-in example), on ports
// given by flags, and follows each section of the walk-through it prints,
// point by point: orders.read trips on visits and turns pressure-test
// traffic away, orders.create runs out of tokens, slow trips on timeouts
// and recovers when the service is healed, flaky trips on exceptions, and
// everything-else, in shadow mode, only marks what it would degrade.
func TestDemoWalkThrough(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	d := startDemo(t, t.TempDir(), "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-upstream-listen", "127.0.0.1:0")
	for _, line := range []string{
		"for i in $(seq 25); do curl -s -o /dev/null -w '%{http_code} ' " + d.proxy + "/api/orders; done; echo",
		"curl -si -H 'X-Pressure-Test: 1' " + d.proxy + "/api/orders | grep -E '^HTTP|^Sds-Degraded'",
		"for i in $(seq 10); do curl -s -o /dev/null -w '%{http_code} ' -X POST " + d.proxy + "/api/orders; done; echo",
		"for i in $(seq 5); do curl -si " + d.proxy + "/api/slow | grep -E '^HTTP|^Sds-Degraded'; done",
		"curl -s '" + d.service + "/_control?slowLatency=10ms'",
		"The delay's end starts a recovery ramp of 20s: slow forwards 10% of the requests at first,",
		"Sds-Degraded: recovery; point=slow (a timeout on the way trips it again)",
		"for i in $(seq 20); do curl -s -o /dev/null -w '%{http_code} ' " + d.proxy + "/api/flaky; done; echo",
		"curl -s '" + d.service + "/_control?errorRate=0'",
		"curl -s -o /dev/null -D - '" + d.proxy + "/hello?[1-110]' | grep -i '^Sds-Shadow' | sort | uniq -c",
		"config        ", "a copy of the built-in example",
	} {
		if !strings.Contains(d.out, line) {
			t.Errorf("the walk-through lacks %q:\n%s", line, d.out)
		}
	}
	if answers, _ := send(t, 1, "GET", d.admin+"/"); answers[0] != "200 " {
		t.Errorf("the dashboard: got %q, want 200", answers[0])
	}

	answers, _ := send(t, 25, "GET", d.proxy+"/api/orders")
	if count(answers, "200 ") != 20 || count(answers, "429 visit; point=orders.read") != 5 {
		t.Errorf("orders.read, 25 GETs: got %q, want 20×200 then 5×429 visit", answers)
	}
	answers, _ = send(t, 1, "GET", d.proxy+"/api/orders", "X-Pressure-Test", "1")
	if answers[0] != "429 pressure_test; point=orders.read" {
		t.Errorf("orders.read, pressure test: got %q, want 429 pressure_test", answers[0])
	}

	answers, _ = send(t, 10, "POST", d.proxy+"/api/orders")
	if count(answers[:5], "201 ") != 5 || count(answers, "429 token_bucket; point=orders.create") == 0 {
		t.Errorf("orders.create, 10 POSTs: got %q, want 5×201 (the bucket's 5 tokens), then 429 token_bucket", answers)
	}

	answers, _ = send(t, 5, "GET", d.proxy+"/api/slow")
	if count(answers[:3], "200 ") != 3 || answers[3] != "503 timeout; point=slow" || answers[4] != "503 timeout; point=slow; delay" {
		t.Errorf("slow, 5 GETs: got %q, want 3×200, 503 timeout, 503 timeout; delay", answers)
	}
	// Healed, the next probe ends the delay and the recovery ramp starts:
	// some requests are forwarded, the others get the fallback, marked
	// recovery, as the walk-through says.
	send(t, 1, "GET", d.service+"/_control?slowLatency=10ms")
	seen := map[string]bool{}
	if !eventually(wait, func() bool {
		a, _ := send(t, 1, "GET", d.proxy+"/api/slow")
		seen[a[0]] = true
		return seen["200 "] && seen["503 recovery; point=slow"]
	}) {
		t.Errorf("slow within %v of the service being healed (retryInterval 2s): got answers %v, want 200 and 503 recovery (the ramp)", wait, seen)
	}

	answers, _ = send(t, 20, "GET", d.proxy+"/api/flaky")
	if count(answers, "500 ") == 0 || count(answers, "503 exception; point=flaky") == 0 {
		t.Errorf("flaky, 20 GETs: got %q, want 500s from the service, then 503 exception", answers)
	}
	send(t, 1, "GET", d.service+"/_control?errorRate=0")

	answers, shadow := send(t, 110, "GET", d.proxy+"/hello")
	if count(answers, "200 ") != 110 || len(shadow) == 0 || shadow[0] != "visit; point=everything-else" {
		t.Errorf("everything-else, 110 GETs: got %d×200 and Sds-Shadow-Degraded %q, want 110×200 and visit; point=everything-else", count(answers, "200 "), shadow)
	}
}

// TestTwoDemosAtOnce: two demos run side by side on ports given by flags,
// each with its own service, proxy and dashboard.
func TestTwoDemosAtOnce(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	flags := []string{"-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-upstream-listen", "127.0.0.1:0"}
	a := startDemo(t, t.TempDir(), flags...)
	b := startDemo(t, t.TempDir(), flags...)
	if a.proxy == b.proxy || a.admin == b.admin || a.service == b.service {
		t.Fatalf("the demos share an address: %+v and %+v", a, b)
	}
	for _, d := range []*demoProcess{a, b} {
		if answers, _ := send(t, 21, "GET", d.proxy+"/api/orders"); answers[20] != "429 visit; point=orders.read" {
			t.Errorf("%s: the 21st GET /api/orders got %q, want 429 visit (each demo counts its own)", d.proxy, answers[20])
		}
		if answers, _ := send(t, 1, "GET", d.admin+"/status"); answers[0] != "200 " {
			t.Errorf("%s/status: got %q, want 200", d.admin, answers[0])
		}
	}
}

// TestDemoBusyPort: a port in use stops the demo with exit code 1 and a
// message naming the port, what it is for and the flag that moves it.
func TestDemoBusyPort(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	for _, tc := range []struct {
		flag, what string
	}{
		{"-listen", "proxy port"},
		{"-admin", "admin port"},
		{"-upstream-listen", "demo service"},
	} {
		args := map[string]string{"-listen": "127.0.0.1:0", "-admin": "127.0.0.1:0", "-upstream-listen": "127.0.0.1:0"}
		args[tc.flag] = addr
		cmd := command("sds-proxy", "demo", "-listen", args["-listen"], "-admin", args["-admin"], "-upstream-listen", args["-upstream-listen"])
		cmd.Dir = t.TempDir()
		cmd.WaitDelay = wait
		out, ended, err := runWithin(cmd, wait)
		if !ended {
			t.Fatalf("%s busy: the demo did not exit within %v:\n%s", tc.flag, wait, out)
		}
		var exit *exec.ExitError
		want := fmt.Sprintf("sds-proxy: demo: the %s %s is in use by another program; move it with %s 127.0.0.1:PORT", tc.what, addr, tc.flag)
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), want) {
			t.Errorf("%s busy: got %v and\n%s\nwant exit code 1 and %q", tc.flag, err, out, want)
		}
	}
}

// TestDemoWalkThroughInShell runs the walk-through's commands as printed,
// in bash with curl, in order, and checks each shows what its text
// promises: the first 429s, the pressure-test and timeout headers, the
// delay, 503s from flaky and the shadow header.
func TestDemoWalkThroughInShell(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	tooltest.LookPath(t, "bash", "apt-get install bash")
	tooltest.LookPath(t, "curl", "apt-get install curl")
	d := startDemo(t, t.TempDir(), "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-upstream-listen", "127.0.0.1:0")
	var commands []string
	for line := range strings.SplitSeq(d.out, "\n") {
		if strings.HasPrefix(line, "  for ") || strings.HasPrefix(line, "  curl ") {
			commands = append(commands, strings.TrimSpace(line))
		}
	}
	wants := []string{
		"200 200 200 200 200 200 200 200 200 200 200 200 200 200 200 200 200 200 200 200 429 429 429 429 429",
		"Sds-Degraded: pressure_test; point=orders.read",
		"201 201 201 201 201 ", // then 429s, unless a token came back meanwhile
		"Sds-Degraded: timeout; point=slow; delay",
		`"slowLatency":"10ms"`,
		" 503 ",
		`"errorRate":0`,
		"Sds-Shadow-Degraded: visit; point=everything-else",
	}
	if len(commands) != len(wants) {
		t.Fatalf("got %d commands in the walk-through, want %d:\n%s", len(commands), len(wants), d.out)
	}
	for i, c := range commands {
		cmd := exec.Command("bash", "--norc", "--noprofile", "-c", c)
		cmd.WaitDelay = wait
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), wants[i]) {
			t.Errorf("%s\ngot %v and\n%s\nwant %q in it", c, err, out, wants[i])
		}
	}
}

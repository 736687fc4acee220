package main_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/admin"
)

// forcedStatus is a point's switch on /status.
type forcedStatus struct {
	Action, Reason string
	Since, Until   time.Time
}

// forcedOn returns point's switch on the proxy's /status, nil when none.
func (e *env) forcedOn(point string) *forcedStatus {
	e.t.Helper()
	var doc struct {
		Points []struct {
			Name   string
			Forced *forcedStatus
		}
	}
	r := e.getURL(e.proxy.admin + "/status")
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		e.t.Fatalf("/status: %v", err)
	}
	for _, p := range doc.Points {
		if p.Name == point {
			return p.Forced
		}
	}
	e.t.Fatalf("/status has no point %q", point)
	return nil
}

// adminSend sends method to the admin port's path with body and the
// Authorization header auth ("" for none), and returns the reply.
func (e *env) adminSend(method, path, auth, body string) reply {
	e.t.Helper()
	req, err := http.NewRequest(method, e.proxy.admin+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	r, err := e.do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

const forceBody = `{"action":"degrade","ttl":"10m","reason":"e2e"}`

// Without adminTokenFile the force endpoints do not exist, whatever the
// method or token; a reload that adds the file brings them.
func TestForceE2ENoTokenFile(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, pointRoute+"    visitThreshold: 1000\n")
	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodGet} {
		if r := e.adminSend(m, "/points/p/force", "Bearer whatever-token-0123456789", forceBody); r.status != http.StatusNotFound {
			t.Errorf("%s without adminTokenFile: got %v, want 404", m, r)
		}
	}
	token := filepath.Join(e.dir, "token")
	if err := os.WriteFile(token, []byte("e2e-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "force", "p", "degrade", "-ttl", "1m", "-reason", "e2e", "-admin", e.proxy.admin, "-token-file", token)
	if code != 1 || !strings.Contains(stderr, "404") || !strings.Contains(stderr, "no adminTokenFile") {
		t.Errorf("force against a proxy without adminTokenFile: exit %d, stdout %q, stderr %q; want 1 and a 404 that says why", code, stdout, stderr)
	}
	mark := e.proxy.stderr.mark()
	e.write(e.config, configHeader(e.upstream, "10s", 10)+"adminTokenFile: token\n"+pointRoute+"    visitThreshold: 1000\n")
	l := e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	if change, _ := l["change"].(string); !strings.Contains(change, "adminTokenFile") || strings.Contains(change, "e2e-token") {
		t.Errorf("reload change: got %q, want adminTokenFile named and the token not shown", change)
	}
	if r := e.adminSend(http.MethodPost, "/points/p/force", "Bearer e2e-token-0123456789abcdef", forceBody); r.status != http.StatusOK {
		t.Errorf("POST after the reload that added the token: got %v, want 200", r)
	}
}

// forceConfig is TestForceE2ESwitches' config: the admin token in the file
// token, p under a threshold it never reaches and q under qThreshold.
func forceConfig(upstream, qThreshold string) string {
	return configHeader(upstream, "10s", 10) + "adminTokenFile: token\n" +
		"routes:\n  - point: p\n    match: {pathPrefix: /p}\n  - point: q\n    match: {}\n" +
		"points:\n  p:\n    visitThreshold: 1000\n  q:\n    visitThreshold: " + qThreshold + "\n"
}

// The switches with the real binary: 401 without the token, a degrade
// switch seen by requests, /status and `sds-proxy status`, kept by a
// reload, a pass switch over a point that degrades everything, clear, and
// a short ttl that expires on its own.
func TestForceE2ESwitches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const token = "e2e-token-0123456789abcdef"
	tokenFile := filepath.Join(e.dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, forceConfig(e.upstream, "0"))
	e.proxy = startProxy(t, e.config)

	forceUnauthorized(t, e, token)
	sw := forceDegrade(t, e, tokenFile)

	// A reload that changes q keeps p's switch.
	mark := e.proxy.stderr.mark()
	e.write(e.config, forceConfig(e.upstream, "1000"))
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	if r := e.get("/p/2"); r.degraded() != "forced; point=p" {
		t.Errorf("p after the reload: got %v, want still forced", r)
	}
	if sw2 := e.forcedOn("p"); sw2 == nil || !sw2.Until.Equal(sw.Until) {
		t.Errorf("/status p forced after the reload: got %+v, want the same switch until %v", sw2, sw.Until)
	}

	// pass over q, which degrades every request once judged again.
	forcePass(t, e, tokenFile)

	// A short ttl ends on its own, with a reload between: p's switch
	// replaced by a 6s one, then a reload, then its end. The history's
	// order (force, reload, force_end by ttl) proves it outlived the
	// reload; a request between shows it too when the machine is quick
	// enough to send one before the end.
	forceShortTTL(t, e, token)
	checkForceHistory(t, e)
	e.metricIs(0, "sds_point_forced", "point", "p", "action", "degrade")
}

// forceUnauthorized: without the right bearer token the force endpoints
// answer 401, over HTTP and to the CLI, and p is not switched.
func forceUnauthorized(t *testing.T, e *env, token string) {
	for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Bearer " + token + "x", "Basic " + token} {
		for _, m := range []string{http.MethodPost, http.MethodDelete} {
			if r := e.adminSend(m, "/points/p/force", auth, forceBody); r.status != http.StatusUnauthorized {
				t.Errorf("%s with Authorization %q: got %v, want 401", m, auth, r)
			}
		}
	}
	wrongFile := filepath.Join(e.dir, "wrong")
	if err := os.WriteFile(wrongFile, []byte("wrong-token-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "force", "p", "degrade", "-ttl", "1m", "-reason", "e2e", "-admin", e.proxy.admin, "-token-file", wrongFile); code != 1 || !strings.Contains(stderr, "401") {
		t.Errorf("force with the wrong token: exit %d, stderr %q; want 1 and 401", code, stderr)
	}
	if r := e.get("/p/1"); r.status != http.StatusOK {
		t.Fatalf("p before any switch: %v", r)
	}
}

// forceDegrade degrades p for 10 minutes with the CLI, checks the switch
// in requests, the log, /status, `sds-proxy status` and the metrics, and
// returns it as /status shows it.
func forceDegrade(t *testing.T, e *env, tokenFile string) *forcedStatus {
	mark := e.proxy.stderr.mark()
	stdout, stderr, code := runCLI(t, "force", "p", "degrade", "-ttl", "10m", "-reason", "INC-7 drill", "-admin", e.proxy.admin, "-token-file", tokenFile)
	if code != 0 || !strings.HasPrefix(stdout, "p: degrade until ") || !strings.Contains(stdout, "(10m0s): INC-7 drill") {
		t.Fatalf("force p degrade: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	l := e.proxy.waitLog(t, mark, wait, pointLog("point forced", "p"))
	if l["action"] != "degrade" || l["reason"] != "INC-7 drill" {
		t.Errorf("the log line of the switch: %v", l)
	}
	if r := e.get("/p/1"); r.status != http.StatusServiceUnavailable || r.degraded() != "forced; point=p" {
		t.Errorf("p under the switch: got %v, want 503 forced; point=p", r)
	}
	sw := e.forcedOn("p")
	if sw == nil || sw.Action != "degrade" || sw.Reason != "INC-7 drill" || sw.Until.Sub(sw.Since) != 10*time.Minute {
		t.Fatalf("/status p forced: got %+v", sw)
	}
	out, _, code := runCLI(t, "status", "-admin", e.proxy.admin)
	if code != 0 || !strings.Contains(out, "forced:degrade") || !strings.Contains(out, "INC-7 drill") {
		t.Errorf("sds-proxy status: exit %d, got\n%s\nwant p shown forced:degrade with its reason", code, out)
	}
	e.metricIs(1, "sds_point_forced", "point", "p", "action", "degrade")
	e.metricIs(1, "sds_forced_requests_total", "point", "p", "action", "degrade")
	return sw
}

// forcePass sets q's visitThreshold to 0, so that it degrades every
// request, puts a pass switch over it with the CLI, then clears it.
func forcePass(t *testing.T, e *env, tokenFile string) {
	mark := e.proxy.stderr.mark()
	e.write(e.config, forceConfig(e.upstream, "0"))
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	if r := e.get("/q"); r.degraded() != "visit; point=q" {
		t.Fatalf("q with visitThreshold 0: got %v, want degraded by visit", r)
	}
	if _, stderr, code := runCLI(t, "force", "q", "pass", "-ttl", "10m", "-reason", "threshold typo", "-admin", e.proxy.admin, "-token-file", tokenFile); code != 0 {
		t.Fatalf("force q pass: exit %d, %s", code, stderr)
	}
	for i := range 5 {
		if r := e.get("/q"); r.status != http.StatusOK || r.degraded() != "" {
			t.Fatalf("q request %d under pass: got %v, want 200 from the upstream", i+1, r)
		}
	}
	if w := e.point("q").Window; w.Visits-w.Degraded < 5 {
		t.Errorf("q's window under pass: got %+v, want the 5 passed requests counted", w)
	}
	if stdout, stderr, code := runCLI(t, "force", "q", "clear", "-admin", e.proxy.admin, "-token-file", tokenFile); code != 0 || !strings.HasPrefix(stdout, "q: pass switch cleared") {
		t.Fatalf("force q clear: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if r := e.get("/q"); r.degraded() != "visit; point=q" {
		t.Errorf("q after clear: got %v, want degraded by visit again", r)
	}
}

// forceShortTTL replaces p's switch by a 6s one, reloads, and waits for
// the switch to end on its own.
func forceShortTTL(t *testing.T, e *env, token string) {
	if r := e.adminSend(http.MethodPost, "/points/p/force", "Bearer "+token, `{"action":"degrade","ttl":"6s","reason":"short"}`); r.status != http.StatusOK {
		t.Fatalf("POST a 6s switch: %v", r)
	}
	sw := e.forcedOn("p")
	if sw == nil || sw.Reason != "short" {
		t.Fatalf("/status p forced: got %+v, want the 6s switch", sw)
	}
	mark := e.proxy.stderr.mark()
	e.write(e.config, forceConfig(e.upstream, "999"))
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	if before := time.Now(); before.Before(sw.Until.Add(-time.Second)) {
		if r := e.get("/p/3"); r.degraded() != "forced; point=p" {
			t.Errorf("p after the reload, %v before its switch ends: got %v, want forced", sw.Until.Sub(before).Round(time.Millisecond), r)
		}
	} else {
		t.Logf("the reload ended %v after the switch's start: too late to send a request under it", before.Sub(sw.Since))
	}
	var freed time.Time
	if !eventually(wait, func() bool {
		r := e.get("/p/3")
		if r.degraded() == "" {
			freed = time.Now()
			return true
		}
		return false
	}) {
		t.Fatalf("p still forced %v after its 6s ttl", wait)
	}
	t.Logf("p answered unforced %v after the switch's until", freed.Sub(sw.Until).Round(time.Millisecond))
	if freed.Before(sw.Until) {
		t.Errorf("p unforced at %v, before its until %v", freed, sw.Until)
	}
	if got := e.forcedOn("p"); got != nil {
		t.Errorf("/status p forced after the ttl: got %+v", got)
	}
}

// checkForceHistory: the history has the 6s switch's force_end by ttl,
// after the force and the reload that preceded it.
func checkForceHistory(t *testing.T, e *env) {
	var history []admin.Event
	if !eventually(wait, func() bool {
		history = e.status().Events
		return slices.ContainsFunc(history, func(ev admin.Event) bool {
			return ev.Kind == "force_end" && ev.Point == "p" && ev.Detail == "degrade ended: its ttl passed"
		})
	}) {
		t.Fatalf("no force_end event for the expired switch: %+v", history)
	}
	// The last force of p, the reload after it, and its end by ttl after that.
	var order []string
	for _, ev := range history {
		switch {
		case ev.Kind == "force" && ev.Point == "p":
			order = []string{"force " + ev.Detail}
		case ev.Kind == "reload" && len(order) > 0, ev.Kind == "force_end" && ev.Point == "p" && len(order) > 0:
			order = append(order, ev.Kind)
		}
	}
	if want := []string{"force degrade for 6s: short", "reload", "force_end"}; !slices.Equal(order, want) {
		t.Errorf("history from p's last switch: got %q, want %q", order, want)
	}
}

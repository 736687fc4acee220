package admin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
)

const forceTestToken = "s3cret-token-of-the-test-0123456789"

// forceServer is an admin server over a fixture's Handler with its
// switches, whose token the test sets (nil: no adminTokenFile).
type forceServer struct {
	f     *adminFixture
	token atomic.Pointer[[]byte]
	srv   *httptest.Server
}

func newForceServer(t *testing.T, token string) *forceServer {
	t.Helper()
	fs := &forceServer{f: newAdminFixture(t, adminPoint{name: "orders.read", path: "/orders"}, adminPoint{name: "users", path: "/users"})}
	fs.setToken(token)
	fs.srv = httptest.NewServer(admin.New(admin.Options{
		Points: fs.f.h, Gatherer: prometheus.NewRegistry(), Now: fs.f.clock.Now, Events: fs.f.events,
		Switches: fs.f.h, Token: func() []byte { return *fs.token.Load() },
	}))
	t.Cleanup(fs.srv.Close)
	return fs
}

func (fs *forceServer) setToken(token string) {
	var b []byte
	if token != "" {
		b = []byte(token)
	}
	fs.token.Store(&b)
}

// do sends method path with body (as application/json unless header says
// otherwise) and the headers kv, and returns the status and body.
func (fs *forceServer) do(t *testing.T, method, path, body string, kv ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, fs.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := fs.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

const bearer = "Bearer " + forceTestToken

func TestForceEndpointsDoNotExistWithoutAToken(t *testing.T) {
	t.Parallel()
	fs := newForceServer(t, "")
	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodGet, http.MethodPut} {
		status, _, _ := fs.do(t, m, "/points/orders.read/force", `{"action":"degrade","ttl":"1m","reason":"r"}`, "Authorization", bearer)
		if status != http.StatusNotFound {
			t.Errorf("%s without a token: got %d, want 404", m, status)
		}
	}
	// A token that appears on a reload brings the endpoints.
	fs.setToken(forceTestToken)
	if status, _, body := fs.do(t, http.MethodPost, "/points/orders.read/force", `{"action":"degrade","ttl":"1m","reason":"r"}`, "Authorization", bearer); status != http.StatusOK {
		t.Errorf("POST once the token is set: got %d %s, want 200", status, body)
	}
}

func TestForceEndpointsNeedTheToken(t *testing.T) {
	t.Parallel()
	fs := newForceServer(t, forceTestToken)
	body := `{"action":"degrade","ttl":"1m","reason":"r"}`
	for _, tc := range []struct {
		name, auth string
	}{
		{"no header", ""},
		{"wrong token", "Bearer wrong"},
		{"token with one byte more", bearer + "x"},
		{"token prefix", bearer[:len(bearer)-1]},
		{"basic scheme", "Basic " + forceTestToken},
		{"no scheme", forceTestToken},
	} {
		for _, m := range []string{http.MethodPost, http.MethodDelete} {
			var kv []string
			if tc.auth != "" {
				kv = []string{"Authorization", tc.auth}
			}
			status, h, _ := fs.do(t, m, "/points/orders.read/force", body, kv...)
			if status != http.StatusUnauthorized {
				t.Errorf("%s %s: got %d, want 401", m, tc.name, status)
			}
			if !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s: WWW-Authenticate %q, want Bearer", m, tc.name, h.Get("WWW-Authenticate"))
			}
		}
	}
	if got := fs.f.h.Forces(fs.f.clock.Now()); len(got) != 0 {
		t.Errorf("switches after refused requests: %+v", got)
	}
	status, h, _ := fs.do(t, http.MethodGet, "/points/orders.read/force", "", "Authorization", bearer)
	if status != http.StatusMethodNotAllowed || h.Get("Allow") != "POST, DELETE" {
		t.Errorf("GET: got %d Allow %q, want 405 POST, DELETE", status, h.Get("Allow"))
	}
	// The scheme is case-insensitive (RFC 9110 §11.1).
	if status, _, got := fs.do(t, http.MethodPost, "/points/orders.read/force", body, "Authorization", "bearer "+forceTestToken); status != http.StatusOK {
		t.Errorf("lower-case scheme: got %d %s, want 200", status, got)
	}
}

func TestForceEndpointsRefuseBadInput(t *testing.T) {
	t.Parallel()
	fs := newForceServer(t, forceTestToken)
	for _, tc := range []struct {
		name, path, body, contentType string
		want                          int
		mention                       string
	}{
		{"unknown point", "/points/nope/force", `{"action":"degrade","ttl":"1m","reason":"r"}`, "", 404, "no such point"},
		{"bad action", "/points/users/force", `{"action":"off","ttl":"1m","reason":"r"}`, "", 400, `"off" is not an action`},
		{"bad ttl", "/points/users/force", `{"action":"pass","ttl":"ten minutes","reason":"r"}`, "", 400, "not a duration"},
		{"ttl without a unit", "/points/users/force", `{"action":"pass","ttl":"600","reason":"r"}`, "", 400, "not a duration"},
		{"ttl past 24h", "/points/users/force", `{"action":"pass","ttl":"25h","reason":"r"}`, "", 400, "ttl: 25h0m0s is not in (0, 24h0m0s]"},
		{"zero ttl", "/points/users/force", `{"action":"pass","ttl":"0s","reason":"r"}`, "", 400, "ttl"},
		{"empty reason", "/points/users/force", `{"action":"pass","ttl":"1m","reason":""}`, "", 400, "reason: is empty"},
		{"missing reason", "/points/users/force", `{"action":"pass","ttl":"1m"}`, "", 400, "reason: missing"},
		{"unknown field", "/points/users/force", `{"action":"pass","ttl":"1m","reason":"r","by":"me"}`, "", 400, `unknown field "by"`},
		{"wrong type", "/points/users/force", `{"action":"pass","ttl":60,"reason":"r"}`, "", 400, "ttl"},
		{"not an object", "/points/users/force", `["pass"]`, "", 400, "not a JSON object"},
		{"two objects", "/points/users/force", `{"action":"pass","ttl":"1m","reason":"r"}{}`, "", 400, "not a JSON object"},
		{"empty body", "/points/users/force", ``, "application/json", 400, "not a JSON object"},
		{"form body", "/points/users/force", `action=pass`, "application/x-www-form-urlencoded", 415, "application/json"},
		{"too large", "/points/users/force", `{"action":"pass","ttl":"1m","reason":"` + strings.Repeat("x", admin.MaxForceBody) + `"}`, "", 413, "larger than"},
	} {
		kv := []string{"Authorization", bearer}
		if tc.contentType != "" {
			kv = append(kv, "Content-Type", tc.contentType)
		}
		status, _, body := fs.do(t, http.MethodPost, tc.path, tc.body, kv...)
		if status != tc.want || !strings.Contains(body, tc.mention) {
			t.Errorf("%s: got %d %q, want %d mentioning %q", tc.name, status, body, tc.want, tc.mention)
		}
	}
	if got := fs.f.h.Forces(fs.f.clock.Now()); len(got) != 0 {
		t.Errorf("switches after bad requests: %+v", got)
	}
	if status, _, body := fs.do(t, http.MethodDelete, "/points/users/force", "", "Authorization", bearer); status != 404 || !strings.Contains(body, "has no switch") {
		t.Errorf("DELETE with no switch: got %d %q, want 404 has no switch", status, body)
	}
	if status, _, body := fs.do(t, http.MethodDelete, "/points/nope/force", "", "Authorization", bearer); status != 404 || !strings.Contains(body, "no such point") {
		t.Errorf("DELETE of an unknown point: got %d %q, want 404 no such point", status, body)
	}
}

// A switch set by POST shows in /status and on the request path until its
// ttl passes on the Handler's clock; DELETE ends it at once.
func TestForceEndpointsSetShowAndClear(t *testing.T) {
	t.Parallel()
	fs := newForceServer(t, forceTestToken)
	t0 := fs.f.clock.Now()
	status, _, body := fs.do(t, http.MethodPost, "/points/orders.read/force", `{"action":"degrade","ttl":"90s","reason":"INC-7 upstream melts"}`, "Authorization", bearer)
	if status != http.StatusOK {
		t.Fatalf("POST: got %d %s", status, body)
	}
	var sw struct {
		Point, Action, Reason string
		Since, Until          time.Time
	}
	if err := json.Unmarshal([]byte(body), &sw); err != nil {
		t.Fatal(err)
	}
	if sw.Point != "orders.read" || sw.Action != "degrade" || sw.Reason != "INC-7 upstream melts" || !sw.Since.Equal(t0) || !sw.Until.Equal(t0.Add(90*time.Second)) {
		t.Errorf("POST answered %+v", sw)
	}
	if resp := fs.f.send(t, "/orders/1"); resp.Header.Get("Sds-Degraded") != "forced; point=orders.read" {
		t.Errorf("a request under the switch: Sds-Degraded %q", resp.Header.Get("Sds-Degraded"))
	}
	forcedOf := func() map[string]any {
		t.Helper()
		_, body := fs.f.getStatusRaw(t, fs.srv.URL)
		var doc struct {
			Points []struct {
				Name   string
				Forced map[string]any
			}
			Events []struct{ Kind, Point, Detail string }
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		for _, p := range doc.Points {
			if p.Name == "users" && p.Forced != nil {
				t.Errorf("users shows a switch: %v", p.Forced)
			}
			if p.Name == "orders.read" {
				return p.Forced
			}
		}
		t.Fatal("no orders.read in /status")
		return nil
	}
	got := forcedOf()
	if got["action"] != "degrade" || got["reason"] != "INC-7 upstream melts" || got["until"] != t0.Add(90*time.Second).Format(time.RFC3339Nano) {
		t.Errorf("/status forced: got %v", got)
	}
	if _, ok := got["point"]; ok {
		t.Errorf("/status forced repeats the point: %v", got)
	}
	fs.f.clock.Set(t0.Add(90 * time.Second))
	if got := forcedOf(); got != nil {
		t.Errorf("/status forced after the ttl: got %v, want none", got)
	}
	if resp := fs.f.send(t, "/orders/1"); resp.Header.Get("Sds-Degraded") != "" {
		t.Errorf("a request after the ttl: Sds-Degraded %q", resp.Header.Get("Sds-Degraded"))
	}
	// pass, then DELETE.
	if status, _, body := fs.do(t, http.MethodPost, "/points/orders.read/force", `{"action":"pass","ttl":"1h","reason":"r"}`, "Authorization", bearer); status != 200 {
		t.Fatalf("POST pass: %d %s", status, body)
	}
	if got := forcedOf(); got["action"] != "pass" {
		t.Errorf("/status forced: got %v, want pass", got)
	}
	if status, _, body := fs.do(t, http.MethodDelete, "/points/orders.read/force", "", "Authorization", bearer); status != 200 || !strings.Contains(body, `"action":"pass"`) {
		t.Errorf("DELETE: got %d %s", status, body)
	}
	if got := forcedOf(); got != nil {
		t.Errorf("/status forced after DELETE: got %v", got)
	}
}

// getStatusRaw fetches base's /status.
func (f *adminFixture) getStatusRaw(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// The dashboard shows a switched point's switch, its end and its reason
// (escaped: the reason is the operator's text).
func TestForceDashboardChromium(t *testing.T) {
	needChromium(t)
	fs := newForceServer(t, forceTestToken)
	reason := `INC-7 <img src=x onerror=alert(1)>`
	if _, err := fs.f.h.Force("orders.read", proxy.ForceDegrade, time.Hour, reason); err != nil {
		t.Fatal(err)
	}
	dom := dumpDOM(t, fs.srv.URL+"/")
	until := fs.f.clock.Now().Add(time.Hour).UTC().Format("15:04:05")
	want := "forced degrade by an operator until " + until + ": INC-7 &lt;img src=x onerror=alert(1)&gt;"
	if !strings.Contains(dom, want) {
		t.Errorf("the dashboard does not show %q; DOM:\n%s", want, dom)
	}
	if strings.Contains(dom, "<img src=\"x\"") {
		t.Error("the reason was inserted as HTML")
	}
}

package adminclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
)

func TestParseForceFlags(t *testing.T) {
	t.Parallel()
	token := filepath.Join(t.TempDir(), "token")
	for _, tc := range []struct {
		name string
		args []string
		want forceFlags // zero: a usage error
	}{
		{"operands first", []string{"orders", "degrade", "-ttl", "10m", "-reason", "INC-1", "-token-file", token},
			forceFlags{point: "orders", action: "degrade", ttl: 10 * time.Minute, reason: "INC-1"}},
		{"flags first", []string{"-ttl", "1h", "-reason", "r", "-token-file", token, "orders", "pass"},
			forceFlags{point: "orders", action: "pass", ttl: time.Hour, reason: "r"}},
		{"flags between", []string{"orders", "-ttl", "5s", "pass", "-reason", "r", "-token-file", token},
			forceFlags{point: "orders", action: "pass", ttl: 5 * time.Second, reason: "r"}},
		{"clear needs no ttl or reason", []string{"orders", "clear", "-token-file", token},
			forceFlags{point: "orders", action: "clear"}},
		{"no ttl", []string{"orders", "degrade", "-reason", "r", "-token-file", token}, forceFlags{}},
		{"no reason", []string{"orders", "degrade", "-ttl", "1m", "-token-file", token}, forceFlags{}},
		{"bad action", []string{"orders", "off", "-token-file", token}, forceFlags{}},
		{"no action", []string{"orders", "-token-file", token}, forceFlags{}},
		{"three operands", []string{"orders", "pass", "extra", "-ttl", "1m", "-reason", "r", "-token-file", token}, forceFlags{}},
		{"no token file", []string{"orders", "clear", "-token-file", ""}, forceFlags{}},
		{"bad admin", []string{"orders", "clear", "-token-file", token, "-admin", "ftp://x"}, forceFlags{}},
	} {
		var stderr bytes.Buffer
		got, err := parseForceFlags(testFlags("force", &stderr), tc.args)
		if tc.want.point == "" {
			if !errors.Is(err, cli.ErrUsage) || !strings.Contains(stderr.String(), "usage: sds-proxy force") {
				t.Errorf("%s: got %v, stderr %q; want a usage error with the usage", tc.name, err, stderr.String())
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v (%s)", tc.name, err, stderr.String())
			continue
		}
		if got.point != tc.want.point || got.action != tc.want.action || got.ttl != tc.want.ttl || got.reason != tc.want.reason ||
			got.tokenFile != token || got.base != "http://127.0.0.1:9901" {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// The command against an admin port: what it sends, what it prints, and
// the errors it explains.
func TestForceCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("  the-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got struct {
		method, path, auth, contentType, body string
	}
	answer, status := "", http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.path, got.auth, got.contentType, got.body = r.Method, r.URL.EscapedPath(), r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(b)
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	defer srv.Close()

	answer = `{"point":"a/b","action":"degrade","reason":"INC-1","since":"2026-12-01T08:00:00Z","until":"2026-12-01T08:10:00Z"}`
	var out, errOut bytes.Buffer
	if err := Force(context.Background(), testFlags("force", &errOut), []string{"a/b", "degrade", "-ttl", "10m", "-reason", "INC-1", "-admin", srv.URL, "-token-file", token}, &out); err != nil {
		t.Fatal(err)
	}
	if got.method != http.MethodPost || got.path != "/points/a%2Fb/force" || got.auth != "Bearer the-token-0123456789" ||
		got.contentType != "application/json" || got.body != `{"action":"degrade","reason":"INC-1","ttl":"10m0s"}` {
		t.Errorf("sent %+v", got)
	}
	if want := "a/b: degrade until 2026-12-01T08:10:00Z (10m0s): INC-1\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}

	out.Reset()
	if err := Force(context.Background(), testFlags("force", &errOut), []string{"a/b", "clear", "-admin", srv.URL, "-token-file", token}, &out); err != nil {
		t.Fatal(err)
	}
	if got.method != http.MethodDelete || got.body != "" || !strings.HasPrefix(out.String(), "a/b: degrade switch cleared") {
		t.Errorf("clear: sent %+v, printed %q", got, out.String())
	}

	for _, c := range []struct {
		status       int
		answer, want string
	}{
		{http.StatusUnauthorized, "unauthorized\n", "401 Unauthorized: unauthorized (the token is not the proxy's"},
		{http.StatusNotFound, "404 page not found\n", "(the proxy has no adminTokenFile: its switches are off)"},
		{http.StatusNotFound, "point \"a/b\": no such point in the config in force\n", `404 Not Found: point "a/b": no such point`},
		{http.StatusBadRequest, "ttl: 25h0m0s is not in (0, 24h0m0s]\n", "400 Bad Request: ttl: 25h0m0s is not in"},
	} {
		status, answer = c.status, c.answer
		err := Force(context.Background(), testFlags("force", &errOut), []string{"a/b", "pass", "-ttl", "25h", "-reason", "r", "-admin", srv.URL, "-token-file", token}, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("answer %d %q: got %v, want it to contain %q", c.status, c.answer, err, c.want)
		}
	}
	if err := Force(context.Background(), testFlags("force", &errOut), []string{"a", "clear", "-admin", srv.URL, "-token-file", filepath.Join(dir, "missing")}, &out); err == nil || !strings.Contains(err.Error(), "-token-file") {
		t.Errorf("a missing token file: got %v", err)
	}
}

// TestForceNamesEveryProblem: one try names every missing flag, not the
// first alone; -ttl and -reason are asked of degrade and pass only.
func TestForceNamesEveryProblem(t *testing.T) {
	t.Parallel()
	const (
		ttl    = "sds-proxy force: -ttl: give how long the switch lasts, such as -ttl 10m (at most 24h)\n"
		reason = "sds-proxy force: -reason: say why, for whoever reads /status and the logs\n"
		token  = "sds-proxy force: -token-file: give the file holding the proxy's token (its adminTokenFile), or set $SDS_ADMIN_TOKEN_FILE\n"
	)
	for _, tc := range []struct {
		args []string
		want string // stderr before the usage
	}{
		{[]string{"orders", "degrade", "-token-file", ""}, ttl + reason + token},
		{[]string{"orders", "pass", "-token-file", "", "-ttl", "1m"}, reason + token},
		{[]string{"orders", "clear", "-token-file", ""}, token},
		{[]string{"orders", "-token-file", "", "-timeout", "0s", "-admin", "ftp://x"},
			"sds-proxy force: want a point and degrade, pass or clear; got [\"orders\"]\n" + token +
				"sds-proxy force: -admin \"ftp://x\": want host:port or http://host:port\n" +
				"sds-proxy force: -timeout 0s: want a positive duration\n"},
	} {
		var stderr bytes.Buffer
		_, err := parseForceFlags(testFlags("force", &stderr), tc.args)
		got, _, _ := strings.Cut(stderr.String(), "usage: ")
		if !errors.Is(err, cli.ErrUsage) || got != tc.want {
			t.Errorf("force %q: got %v and\n%s\nwant cli.ErrUsage and\n%s", tc.args, err, got, tc.want)
		}
	}
}

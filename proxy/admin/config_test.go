package admin_test

import (
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
)

// noPoints is a request path with no point.
type noPoints struct{}

func (noPoints) Snapshots(time.Time) iter.Seq[limiter.Snapshot] {
	return func(func(limiter.Snapshot) bool) {}
}

// TestAdminConfig: GET /config answers the bytes of the file in force as
// they are, its path in a header, never cached; HEAD the same headers;
// without a file, 404 with a reason.
func TestAdminConfig(t *testing.T) {
	const raw = "# the file, comments and all\nupstream: http://127.0.0.1:9000\n\xef\xbb\xbf\n"
	tests := []struct {
		name       string
		config     func() (string, []byte)
		wantStatus int
		wantBody   string
		wantType   string
		wantPath   string
	}{
		{"file", func() (string, []byte) { return "/etc/sds/sds.yaml", []byte(raw) }, 200, raw, "application/yaml", "/etc/sds/sds.yaml"},
		{"empty file", func() (string, []byte) { return "sds.yaml", []byte{} }, 200, "", "application/yaml", "sds.yaml"},
		{"no file", func() (string, []byte) { return "", nil }, 404,
			"no config file: this proxy runs from its command line (-upstream) alone\n", "text/plain; charset=utf-8", ""},
		{"no Config option", nil, 404,
			"no config file: this proxy runs from its command line (-upstream) alone\n", "text/plain; charset=utf-8", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(admin.New(admin.Options{Points: noPoints{}, Gatherer: prometheus.NewRegistry(), Config: tt.config}))
			defer srv.Close()
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				req, err := http.NewRequest(method, srv.URL+"/config", nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != tt.wantStatus {
					t.Errorf("%s: status: got %d, want %d", method, resp.StatusCode, tt.wantStatus)
				}
				wantBody := tt.wantBody
				if method == http.MethodHead {
					wantBody = ""
				}
				if string(body) != wantBody {
					t.Errorf("%s: body: got %q, want %q", method, body, wantBody)
				}
				h := resp.Header
				for name, want := range map[string]string{
					"Content-Type": tt.wantType, "Cache-Control": "no-store", admin.ConfigPathHeader: tt.wantPath,
				} {
					if got := h.Get(name); got != want {
						t.Errorf("%s: %s: got %q, want %q", method, name, got, want)
					}
				}
				if tt.wantStatus == 200 && resp.ContentLength != int64(len(tt.wantBody)) {
					t.Errorf("%s: Content-Length: got %d, want %d", method, resp.ContentLength, len(tt.wantBody))
				}
			}
		})
	}
}

// TestAdminConfigFollowsReloads: each request reads the file in force at
// that moment.
func TestAdminConfigFollowsReloads(t *testing.T) {
	files := []string{"window: 10s\n", "window: 20s\n"}
	var current atomic.Int32
	srv := httptest.NewServer(admin.New(admin.Options{Points: noPoints{}, Gatherer: prometheus.NewRegistry(),
		Config: func() (string, []byte) { return "sds.yaml", []byte(files[current.Load()]) }}))
	defer srv.Close()
	for i := range files {
		current.Store(int32(i))
		resp, err := srv.Client().Get(srv.URL + "/config")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != files[i] {
			t.Errorf("after reload %d: got %q, want %q", i, body, files[i])
		}
	}
}

// TestAdminConfigMethods: /config is read-only, as the rest of the port.
func TestAdminConfigMethods(t *testing.T) {
	srv := httptest.NewServer(admin.New(admin.Options{Points: noPoints{}, Gatherer: prometheus.NewRegistry(),
		Config: func() (string, []byte) { return "sds.yaml", []byte("x") }}))
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/config", "application/yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /config: got %d, want 405", resp.StatusCode)
	}
}

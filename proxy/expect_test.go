package proxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestH2ExpectMarkFound: h2ExpectsContinue finds net/http's HTTP/2
// server's mark of a client that waits for 100, and only that. It fails
// when a Go release moves the mark, which would otherwise silently send
// HTTP/2 uploads that wait for 100 to the upstream at once.
func TestH2ExpectMarkFound(t *testing.T) {
	got := make(chan bool, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- h2ExpectsContinue(r)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	for _, tc := range []struct {
		name   string
		http2  bool
		expect bool
		body   string
		want   bool
	}{
		{"HTTP/2 with Expect", true, true, "upload", true},
		{"HTTP/2 without Expect", true, false, "upload", false},
		{"HTTP/2 with Expect, no body", true, true, "", false},
		{"HTTP/1.1 with Expect (the header itself goes on)", false, true, "upload", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := srv.Client().Transport.(*http.Transport).Clone()
			defer tr.CloseIdleConnections()
			if !tc.http2 {
				var http1 http.Protocols
				http1.SetHTTP1(true)
				tr.Protocols = &http1
				tr.TLSClientConfig.NextProtos = nil
			}
			client := &http.Client{Transport: tr}
			req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.expect {
				req.Header.Set("Expect", "100-continue")
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if proto := resp.ProtoMajor == 2; proto != tc.http2 {
				t.Fatalf("answered over %s, want HTTP/2 %v", resp.Proto, tc.http2)
			}
			if g := <-got; g != tc.want {
				t.Errorf("h2ExpectsContinue: got %v, want %v", g, tc.want)
			}
		})
	}
}

// BenchmarkH2ExpectsContinue: the look into an HTTP/2 upload's body, on
// the request path, allocates nothing.
func BenchmarkH2ExpectsContinue(b *testing.B) {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("upload"))
	r.ProtoMajor, r.Body = 2, &markedBody{needsContinue: true}
	b.ReportAllocs()
	for b.Loop() {
		if !h2ExpectsContinue(r) {
			b.Fatal("mark not found")
		}
	}
}

// markedBody is a body with the field net/http's HTTP/2 server marks,
// not its first.
type markedBody struct {
	read          int
	needsContinue bool
}

func (*markedBody) Read([]byte) (int, error) { return 0, nil }
func (*markedBody) Close() error             { return nil }

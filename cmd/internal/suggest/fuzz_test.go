package suggest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/suggest"
)

// FuzzRead feeds Read any log: it never fails on content, every line is
// counted once as a request, a malformed line or another line, and the
// block it writes is written.
func FuzzRead(f *testing.F) {
	f.Add(accessLine("api", t0, 200, false, 12*time.Millisecond) + "\n" + accessLine("api", t0, 429, true, 0))
	f.Add(`{"logger":"access","msg":"request","ts":1764576000.5,"point":"p","status":503,"degraded":false,"upstream_latency":"1h"}`)
	f.Add("not json\n\n{}\n")
	f.Add(`{"logger":"access","msg":"request","ts":"9999-01-01T00:00:00.000Z","point":"p","status":200,"degraded":false,"upstream_latency":"2562047h"}`)
	f.Fuzz(func(t *testing.T, log string) {
		rep, err := suggest.Read(strings.NewReader(log), suggest.Options{Window: time.Second, Buckets: 4})
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if rep.Requests+rep.Malformed+rep.Other != rep.Lines {
			t.Errorf("requests %d + malformed %d + other %d != lines %d", rep.Requests, rep.Malformed, rep.Other, rep.Lines)
		}
		var out strings.Builder
		if err := rep.WriteYAML(&out, "fuzz"); err != nil {
			t.Fatal(err)
		}
	})
}

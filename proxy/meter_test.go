package proxy

import (
	"context"
	"testing"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// TestClassify is classify's table: every row of its doc comment, with
// the boundary rows that tell neighbouring rows apart.
func TestClassify(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		c    *call
		want classification
	}{
		{"timeout", &call{failure: failTimeout}, classification{limiter.Failed, false, errTimeout}},
		{"transport", &call{failure: failTransport}, classification{limiter.Failed, false, errTransport}},
		{"client body", &call{failure: failClientBody}, classification{outcome: limiter.Canceled}},
		{"client gone", &call{failure: failClientGone}, classification{outcome: limiter.Canceled}},
		{"200 copied", &call{copied: true}, classification{outcome: limiter.OK}},
		{"500 copied", &call{statusFailed: true, copied: true}, classification{limiter.Failed, true, 0}},
		{"200 stream", &call{streamed: true}, classification{outcome: limiter.OK}},
		{"gRPC error stream", &call{statusFailed: true, streamed: true}, classification{limiter.Failed, true, 0}},
		{"200 body broke", &call{bodyBroke: true, copied: true}, classification{limiter.Failed, false, errBody}},
		{"500 body broke", &call{statusFailed: true, bodyBroke: true}, classification{limiter.Failed, true, errBody}},
		{"200 body broke, client gone", &call{bodyBroke: true, ctx: callContext{Context: gone}}, classification{outcome: limiter.Canceled}},
		{"200 copy aborted", &call{}, classification{outcome: limiter.Canceled}},
		{"500 copy aborted", &call{statusFailed: true}, classification{limiter.Canceled, true, 0}},
	} {
		if got := classify(tc.c); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	cut := &call{bodyBroke: true, copied: true}
	cut.cut.Store(true)
	if got, want := classify(cut), (classification{limiter.Failed, false, errTimeout}); got != want {
		t.Errorf("body cut by UpstreamTimeout: got %+v, want %+v", got, want)
	}
}

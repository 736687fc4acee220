package main_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestDelayRetryAfter: a point tripped into its delay (delayTime 30s,
// retryInterval 2s) answers 503 with Retry-After, the seconds until its
// next probe: 1 or 2. The requests all ask the upstream for a 500, so a
// probe that goes through fails and the delay goes on, however slowly the
// machine runs.
func TestDelayRetryAfter(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, pointRoute+"    exceptionThreshold: 1\n    delayTime: 30s\n    retryInterval: 2s\n")
	if r := e.get("/x?status=500"); r.status != http.StatusInternalServerError || r.degraded() != "" {
		t.Fatalf("first call: got %v, want the upstream's 500", r)
	}
	trip := e.get("/x?status=500")
	if trip.status != http.StatusServiceUnavailable || trip.degraded() != "exception; point=p" {
		t.Fatalf("second call: got %v, want 503, the trip", trip)
	}
	var inDelay reply
	deadline := time.Now().Add(wait)
	for inDelay.status == 0 && time.Now().Before(deadline) {
		switch r := e.get("/x?status=500"); {
		case r.degraded() == "exception; point=p; delay":
			inDelay = r
		case r.status != http.StatusInternalServerError: // only a failed probe may pass
			t.Fatalf("in the delay: got %v, want 503 in the delay or a failed probe", r)
		}
	}
	if inDelay.status != http.StatusServiceUnavailable {
		t.Fatalf("in the delay: got %v within %v, want 503", inDelay, wait)
	}
	got := inDelay.header.Values("Retry-After")
	if n, err := strconv.Atoi(inDelay.header.Get("Retry-After")); len(got) != 1 || err != nil || n < 1 || n > 2 {
		t.Errorf("in the delay: Retry-After got %q, want one value from 1 to 2 (seconds to the next probe)", got)
	}
}

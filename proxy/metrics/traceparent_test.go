package metrics

import (
	"net/http"
	"testing"
)

func TestTraceID(t *testing.T) {
	const (
		trace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent = "00f067aa0ba902b7"
		valid  = "00-" + trace + "-" + parent + "-01"
	)
	for _, tt := range []struct {
		name   string
		values []string // the traceparent header's values
		want   string
	}{
		{"valid, sampled", []string{valid}, trace},
		{"valid, not sampled", []string{"00-" + trace + "-" + parent + "-00"}, trace},
		{"other flags", []string{"00-" + trace + "-" + parent + "-ff"}, trace},
		{"none", nil, ""},
		{"empty", []string{""}, ""},
		{"two headers", []string{valid, valid}, ""},
		{"version 01", []string{"01-" + trace + "-" + parent + "-01"}, ""},
		{"version ff", []string{"ff-" + trace + "-" + parent + "-01"}, ""},
		{"version 00 with more fields", []string{valid + "-what"}, ""},
		{"one character short", []string{valid[:len(valid)-1]}, ""},
		{"trace id all zeros", []string{"00-00000000000000000000000000000000-" + parent + "-01"}, ""},
		{"parent id all zeros", []string{"00-" + trace + "-0000000000000000-01"}, ""},
		{"upper-case hex", []string{"00-4BF92F3577B34DA6A3CE929D0E0E4736-" + parent + "-01"}, ""},
		{"upper-case flags", []string{"00-" + trace + "-" + parent + "-0A"}, ""},
		{"not hex", []string{"00-4bf92f3577b34da6a3ce929d0e0e473g-" + parent + "-01"}, ""},
		{"underscore separators", []string{"00_" + trace + "_" + parent + "_01"}, ""},
		{"trace id one short, parent one long", []string{"00-" + trace[:31] + "-" + parent + "0-01"}, ""},
		{"spaces around", []string{" " + valid[:len(valid)-1]}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.values != nil {
				h["Traceparent"] = tt.values
			}
			if got := TraceID(h); got != tt.want {
				t.Errorf("TraceID(%q): got %q, want %q", tt.values, got, tt.want)
			}
		})
	}
}

func TestTraceIDAllocs(t *testing.T) {
	h := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	none := http.Header{}
	if n := testing.AllocsPerRun(100, func() { TraceID(h); TraceID(none); TraceID(nil) }); n != 0 {
		t.Errorf("traceID allocates %v times a call, want 0", n)
	}
}

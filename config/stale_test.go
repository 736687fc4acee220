package config

import (
	"slices"
	"testing"
	"time"
)

func TestStaleProblems(t *testing.T) {
	checkProblemCases(t, []problemCase{
		{"stale with defaults", withPoint("visitThreshold: 1\nstale: {}"), nil},
		{"maxAge under a second", withPoint("stale: {maxAge: 500ms}"), []string{"7:21: stale.maxAge: 500ms is not from 1s to 168h0m0s"}},
		{"no cache to keep in", "staleCache: {maxBytes: 0}\n" + withPoint("stale: {}"), []string{"8:5: stale is set but staleCache.maxBytes is 0, so no answer is ever kept"}},
		{"size without B", "staleCache: {maxBytes: 64Mi}\n" + withPoint("visitThreshold: 1"), []string{`1:24: maxBytes: want a size such as 64MiB, 512KiB or 1GiB, or an integer of bytes, got "64Mi" (the units are B, KiB, MiB and GiB)`}},
		{"size past 4GiB", "staleCache: {maxBytes: 5GiB}\n" + withPoint("visitThreshold: 1"), []string{"1:24: staleCache.maxBytes: 5GiB is not a size from 0B to 4GiB"}},
		{"negative size", "staleCache: {maxBytes: -1}\n" + withPoint("visitThreshold: 1"), []string{`1:24: maxBytes: want a size such as 64MiB, 512KiB or 1GiB, or an integer of bytes, got "-1"`}},
		{"unknown key", withPoint("stale: {maxage: 1m}"), []string{`7:13: unknown key "maxage" in the stale of point "p"; did you mean "maxAge"?`}},
	})
}

// TestStaleDecodes: stale: {} is on with maxAge's default; staleCache's
// maxBytes takes a size in any unit, or bytes, and defaults to 64 MiB
// when the file has no staleCache.
func TestStaleDecodes(t *testing.T) {
	f := mustParse(t, withPoint("stale: {}"))
	if got := f.Points[0].Stale; got != (Stale{On: true, MaxAge: 10 * time.Minute}) {
		t.Errorf("stale: {} decodes to %+v, want on with maxAge 10m", got)
	}
	if f.StaleCache.MaxBytes != 64<<20 {
		t.Errorf("no staleCache: maxBytes %d, want 64 MiB", f.StaleCache.MaxBytes)
	}
	for src, want := range map[string]int64{"512KiB": 512 << 10, "1GiB": 1 << 30, "1500": 1500, "1500B": 1500, "0": 0, `"2MiB"`: 2 << 20} {
		f := mustParse(t, "staleCache: {maxBytes: "+src+"}\n"+withPoint("visitThreshold: 1"))
		if f.StaleCache.MaxBytes != want {
			t.Errorf("maxBytes: %s decodes to %d, want %d", src, f.StaleCache.MaxBytes, want)
		}
	}
	from := mustParse(t, withPoint("stale: {maxAge: 1m}"))
	to := mustParse(t, "staleCache: {maxBytes: 128MiB}\n"+withPoint("stale: {maxAge: 2m}"))
	if got, _ := FileSettings(from, to); !slices.Equal(got, []Setting{{Key: "staleCache.maxBytes", From: "64MiB", To: "128MiB"}}) {
		t.Errorf("FileSettings = %q, want staleCache.maxBytes from 64MiB to 128MiB", got)
	}
	if got, want := PointSettings(&from.Points[0], &to.Points[0]), []Setting{{Key: "stale.maxAge", From: "1m0s", To: "2m0s"}}; !slices.Equal(got, want) {
		t.Errorf("PointSettings = %q, want %q", got, want)
	}
}

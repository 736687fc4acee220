package main

import (
	"strings"
	"testing"
)

func TestSampleValue(t *testing.T) {
	exp := "# HELP sds_stale_cache_bytes x\nsds_stale_cache_bytes_total 9\nsds_stale_cache_bytes 1.048492e+06\nsds_stale_cache_entries 289\n"
	if v, err := sampleValue([]byte(exp), "sds_stale_cache_bytes"); err != nil || v != 1048492 {
		t.Errorf("sampleValue = %v, %v; want 1048492", v, err)
	}
	if _, err := sampleValue([]byte(exp), "sds_stale_cache_max_bytes"); err == nil {
		t.Error("sampleValue of an absent metric: no error")
	}
}

// The flags' bounds, and the config each setup writes.
func TestFlagsAndConfig(t *testing.T) {
	for _, args := range [][]string{
		{"-rounds", "0"}, {"-rounds", "51"}, {"-requests", "999"}, {"-conns", "0"}, {"-conns", "513"},
		{"-body", "-1"}, {"-urls", "0"}, {"-flood", "2000001"}, {"-max-bytes", "64MB"},
		{"-max-bytes", "1MiB\npoints: {}"}, {"-o", "yaml"}, {"extra"},
	} {
		if _, err := parseFlags(args, nil); err == nil {
			t.Errorf("parseFlags(%q): no error", args)
		}
	}
	if o, err := parseFlags([]string{"-max-bytes", "1048576", "-flood", "0"}, nil); err != nil || o.maxBytes != "1048576" || o.flood != 0 {
		t.Errorf("parseFlags: %+v, %v", o, err)
	}
	plain := string(proxyConfig("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "64MiB", false))
	stale := string(proxyConfig("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "64MiB", true))
	if strings.Contains(plain, "stale:") || stale != plain+"    stale: {maxAge: 10m}\n" {
		t.Errorf("the configs differ by more than stale:\nplain:\n%s\nstale:\n%s", plain, stale)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

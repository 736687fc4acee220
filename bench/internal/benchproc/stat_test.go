package benchproc

import (
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     time.Duration
		ok       bool
	}{
		{"plain", "4242 (sds-proxy) S 1 4242 4242 0 -1 4194560 1500 0 0 0 250 37 0 0 20 0 9 0 100 0 0", 287 * clockTick, true},
		{"a name with spaces and parentheses", "7 (a b) (c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0", 7 * clockTick, true},
		{"too short", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 3", 0, false},
		{"no name", "7 x R", 0, false},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 a 4 0 0", 0, false},
	} {
		got, err := ParseStat([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: ParseStat = %v, %v; want %v, ok %v", tc.name, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseStatus(t *testing.T) {
	in := "Name:\tsds-proxy\nVmPeak:\t 1300000 kB\nVmHWM:\t   22912 kB\nVmRSS:\t   20000 kB\nThreads:\t9\n"
	hwm, rss, err := ParseStatus([]byte(in))
	if err != nil || hwm != 22912<<10 || rss != 20000<<10 {
		t.Errorf("ParseStatus = %d, %d, %v; want %d, %d", hwm, rss, err, 22912<<10, 20000<<10)
	}
	if _, _, err := ParseStatus([]byte("Name:\tx\nVmRSS:\t1 kB\n")); err == nil {
		t.Error("parseStatus without VmHWM: no error")
	}
}

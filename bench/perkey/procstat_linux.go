package main

import "github.com/sds-proxy/sds-proxy/bench/internal/benchproc"

// procUsage reads process pid's peak and current resident set size
// (VmHWM and VmRSS, in bytes) and the CPU time it has used, in seconds.
func procUsage(pid int) (peak, rss int64, cpu float64, err error) {
	if peak, rss, err = benchproc.Memory(pid); err != nil {
		return 0, 0, 0, err
	}
	t, err := benchproc.CPUTime(pid)
	return peak, rss, t.Seconds(), err
}

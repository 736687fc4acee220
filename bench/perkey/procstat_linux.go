package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's CPU
// times: 100 on every Linux architecture Go supports.
const clockTicks = 100

// procUsage reads process pid's peak and current resident set size
// (/proc/PID/status VmHWM and VmRSS, in bytes) and the CPU time it has
// used (/proc/PID/stat utime + stime, in seconds).
func procUsage(pid int) (peak, rss int64, cpu float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("/proc/%d/status %s: %q", pid, name, value)
		}
		if name == "VmHWM" {
			peak = kb << 10
		} else {
			rss = kb << 10
		}
	}
	if peak == 0 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields after
	// it start at its last ')'. utime and stime are fields 14 and 15.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	return peak, rss, float64(utime+stime) / clockTicks, nil
}

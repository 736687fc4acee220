package benchproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/PID/stat's utime and stime: 100
// on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// CPUTime returns the CPU time process pid has used so far, user and
// system, from /proc/PID/stat (Linux).
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseStat(b)
}

// ParseStat reads utime + stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name, field 2, is in parentheses and may hold spaces
// and parentheses: fields are counted after the last ')'.
func ParseStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("/proc/PID/stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat: %d fields after the name, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/PID/stat: %w", err)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// Memory returns VmHWM (the peak resident set) and VmRSS of process pid,
// in bytes, from /proc/PID/status (Linux).
func Memory(pid int) (hwm, rss int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return ParseStatus(b)
}

// ParseStatus reads VmHWM and VmRSS, in kB, of a /proc/PID/status.
func ParseStatus(b []byte) (hwm, rss int64, err error) {
	found := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || name != "VmHWM" && name != "VmRSS" {
			continue
		}
		kb, perr := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("/proc/PID/status: %s: %w", name, perr)
		}
		if name == "VmHWM" {
			hwm = kb << 10
		} else {
			rss = kb << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("/proc/PID/status: no VmHWM and VmRSS")
	}
	return hwm, rss, nil
}

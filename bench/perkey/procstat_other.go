//go:build !linux

package main

import "errors"

// procUsage needs Linux's /proc: elsewhere the report says so.
func procUsage(pid int) (peak, rss int64, cpu float64, err error) {
	return 0, 0, 0, errors.New("peak RSS is read from /proc/PID/status: Linux only")
}

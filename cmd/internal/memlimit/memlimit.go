// Package memlimit sets Go's soft memory limit from the container's, so
// that the garbage collector works harder before the kernel kills the
// process rather than after. The limit comes from the Kubernetes downward
// API (SDS_MEMORY_LIMIT) or from the cgroup (v2 or v1); GOMEMLIMIT, when
// set, wins.
//
// The proxy leaves GOGC at Go's default of 100. A proxy's live heap is
// small and steady (a few MiB), so the heap goal is Go's floor of
// 4 MiB × GOGC/100, and raising GOGC mostly raises that floor: a doubled
// GOGC saves a little CPU for more memory in every pod (measured in
// docs/benchmarks.md, "Figures behind the code's choices"), and a sidecar
// sits beside every replica, so memory is the dearer of the two. Set GOGC
// to trade the other way.
package memlimit

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// limitEnv names the environment variable that carries the container's
// memory limit in bytes, as the Kubernetes downward API gives it
// (resourceFieldRef: {resource: limits.memory}).
const limitEnv = "SDS_MEMORY_LIMIT"

// cgroupMemoryMax is the cgroup v2 file that holds the container's memory
// limit in bytes, or "max" for none.
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// cgroupV1MemoryLimit is the cgroup v1 file that holds the container's
// memory limit in bytes, on nodes that still run cgroup v1 (Kubernetes
// runs on them up to 1.34). No limit reads as the kernel's largest count,
// rounded down to a page: cgroupV1Unlimited or more.
const cgroupV1MemoryLimit = "/sys/fs/cgroup/memory/memory.limit_in_bytes"

// cgroupV1Unlimited is the least cgroup v1 limit read as no limit: 2^62
// bytes, far below the kernel's 9223372036854771712 (2^63 less a page)
// and far above any machine's memory.
const cgroupV1Unlimited = 1 << 62

// memoryLimitShare is the percentage of the container's memory limit given
// to Go's soft memory limit. The rest is for what the Go runtime does not
// count (its own stacks' slack, and the kernel's socket buffers, which the
// container is charged for): without a limit, the GC lets the heap grow to
// twice its live size and a burst can pass the container's limit.
const memoryLimitShare = 90

// Limit returns the soft memory limit to set, in bytes, and where the
// container's limit came from; 0 when none should be set. GOMEMLIMIT, when
// set, wins: the Go runtime has applied it already. Otherwise the limit is
// memoryLimitShare% of SDS_MEMORY_LIMIT, or of the cgroup's memory.max
// (v2), or of its memory.limit_in_bytes (v1). readFile reads a file
// (os.ReadFile; tests pass their own). A limit that cannot be parsed is an
// error; a missing cgroup file, "max" or v1's largest count is no limit.
func Limit(getenv func(string) string, readFile func(string) ([]byte, error)) (int64, string, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, "", nil
	}
	if v := getenv(limitEnv); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 {
			return 0, "", fmt.Errorf("%s=%q: want the container's memory limit in bytes, such as 134217728", limitEnv, v)
		}
		return n / 100 * memoryLimitShare, limitEnv, nil
	}
	data, err := readFile(cgroupMemoryMax)
	if err != nil {
		return cgroupV1Limit(readFile)
	}
	v := strings.TrimSpace(string(data))
	if v == "max" {
		return 0, "", nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, "", fmt.Errorf("%s holds %q: want a byte count or max", cgroupMemoryMax, v)
	}
	return n / 100 * memoryLimitShare, cgroupMemoryMax, nil
}

// cgroupV1Limit is Limit's answer in a cgroup v1 container.
func cgroupV1Limit(readFile func(string) ([]byte, error)) (int64, string, error) {
	data, err := readFile(cgroupV1MemoryLimit)
	if err != nil {
		return 0, "", nil // in no cgroup the proxy can read: nothing to follow
	}
	v := strings.TrimSpace(string(data))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, "", fmt.Errorf("%s holds %q: want a byte count", cgroupV1MemoryLimit, v)
	}
	if n >= cgroupV1Unlimited {
		return 0, "", nil
	}
	return n / 100 * memoryLimitShare, cgroupV1MemoryLimit, nil
}

// Apply sets Go's soft memory limit from the container's (Limit, read
// from the environment and the cgroup files) and logs it; without a
// container limit, or with GOMEMLIMIT set, it sets nothing. A limit that
// cannot be parsed is an error.
func Apply(log *zap.Logger) error {
	limit, from, err := Limit(os.Getenv, os.ReadFile)
	if err != nil || limit == 0 {
		return err
	}
	debug.SetMemoryLimit(limit)
	log.Info("memory limit", zap.Int64("bytes", limit), zap.String("from", from))
	return nil
}

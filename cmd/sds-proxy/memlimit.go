package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// memoryLimitEnv names the environment variable that carries the
// container's memory limit in bytes, as the Kubernetes downward API gives
// it (resourceFieldRef: {resource: limits.memory}).
const memoryLimitEnv = "SDS_MEMORY_LIMIT"

// cgroupMemoryMax is the cgroup v2 file that holds the container's memory
// limit in bytes, or "max" for none.
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// memoryLimitShare is the percentage of the container's memory limit given
// to Go's soft memory limit. The rest is for what the Go runtime does not
// count (its own stacks' slack, and the kernel's socket buffers, which the
// container is charged for): without a limit, the GC lets the heap grow to
// twice its live size and a burst can pass the container's limit.
const memoryLimitShare = 90

// memoryLimit returns the soft memory limit to set, in bytes, and where the
// container's limit came from; 0 when none should be set. GOMEMLIMIT, when
// set, wins: the Go runtime has applied it already. Otherwise the limit is
// memoryLimitShare% of SDS_MEMORY_LIMIT, or of the cgroup's memory.max.
// readFile reads a file (os.ReadFile; tests pass their own). A limit that
// cannot be parsed is an error; a missing cgroup file or "max" is no limit.
func memoryLimit(getenv func(string) string, readFile func(string) ([]byte, error)) (int64, string, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, "", nil
	}
	if v := getenv(memoryLimitEnv); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 {
			return 0, "", fmt.Errorf("%s=%q: want the container's memory limit in bytes, such as 134217728", memoryLimitEnv, v)
		}
		return n / 100 * memoryLimitShare, memoryLimitEnv, nil
	}
	data, err := readFile(cgroupMemoryMax)
	if err != nil {
		return 0, "", nil // not in a cgroup v2 container: nothing to follow
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

// The proxy leaves GOGC at Go's default of 100. A proxy's live heap is
// small and steady (a few MiB), so the heap goal is Go's floor of
// 4 MiB × GOGC/100, and raising GOGC mostly raises that floor: a doubled
// GOGC saves a little CPU for more memory in every pod (measured in
// docs/benchmarks.md, "Figures behind the code's choices"), and a sidecar
// sits beside every replica, so memory is the dearer of the two. Set GOGC
// to trade the other way.
// applyMemoryLimit sets Go's soft memory limit from the container's
// (memoryLimit) and logs it.
func applyMemoryLimit(log *zap.Logger) error {
	limit, from, err := memoryLimit(os.Getenv, os.ReadFile)
	if err != nil || limit == 0 {
		return err
	}
	debug.SetMemoryLimit(limit)
	log.Info("memory limit", zap.Int64("bytes", limit), zap.String("from", from))
	return nil
}

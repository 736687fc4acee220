package memlimit_test

import (
	"fmt"
	"io/fs"

	"github.com/sds-proxy/sds-proxy/cmd/internal/memlimit"
)

// ExampleLimit reads a container limit of 128 MiB from a cgroup v2 file:
// Go's soft limit is 90% of it.
func ExampleLimit() {
	getenv := func(string) string { return "" } // no GOMEMLIMIT, no SDS_MEMORY_LIMIT
	readFile := func(name string) ([]byte, error) {
		if name == "/sys/fs/cgroup/memory.max" {
			return []byte("134217728\n"), nil
		}
		return nil, fs.ErrNotExist
	}
	limit, from, err := memlimit.Limit(getenv, readFile)
	fmt.Println(limit, from, err)
	// Output: 120795930 /sys/fs/cgroup/memory.max <nil>
}

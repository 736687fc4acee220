package memlimit

import (
	"io/fs"
	"strings"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		cgroup  string // "" when the file does not exist
		want    int64
		from    string
		wantErr string
	}{
		{"nothing to follow", nil, "", 0, "", ""},
		{"cgroup without a limit", nil, "max\n", 0, "", ""},
		{"cgroup limit", nil, "134217728\n", 120795930, cgroupMemoryMax, ""},
		{"downward API", map[string]string{limitEnv: "134217728"}, "", 120795930, limitEnv, ""},
		{"downward API before cgroup", map[string]string{limitEnv: "200"}, "134217728\n", 180, limitEnv, ""},
		{"GOMEMLIMIT wins", map[string]string{"GOMEMLIMIT": "64MiB", limitEnv: "134217728"}, "134217728\n", 0, "", ""},
		{"a limit that is not bytes", map[string]string{limitEnv: "128Mi"}, "", 0, "", "want the container's memory limit in bytes"},
		{"a zero limit", map[string]string{limitEnv: "0"}, "", 0, "", "want the container's memory limit in bytes"},
		{"a cgroup file that lies", nil, "lots\n", 0, "", "want a byte count or max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkMemoryLimit(t, tc.env, map[string]string{cgroupMemoryMax: tc.cgroup}, tc.want, tc.from, tc.wantErr)
		})
	}
}

// checkMemoryLimit runs Limit with the environment env and the
// files files (a name missing or mapped to "" does not exist) and checks
// its limit and source, or that its error holds wantErr.
func checkMemoryLimit(t *testing.T, env, files map[string]string, want int64, wantFrom, wantErr string) {
	t.Helper()
	readFile := func(name string) ([]byte, error) {
		if files[name] == "" {
			return nil, fs.ErrNotExist
		}
		return []byte(files[name]), nil
	}
	got, from, err := Limit(func(k string) string { return env[k] }, readFile)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("got %d, %v; want an error containing %q", got, err, wantErr)
		}
		return
	}
	if err != nil || got != want || from != wantFrom {
		t.Errorf("got %d from %q (%v), want %d from %q", got, from, err, want, wantFrom)
	}
}

// TestMemoryLimitCgroupV1: on a cgroup v1 node (no memory.max), the limit
// is read from memory.limit_in_bytes, where no limit is the kernel's
// largest count; a v2 file wins over a v1 file.
func TestMemoryLimitCgroupV1(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v2, v1  string // "" when the file does not exist
		want    int64
		from    string
		wantErr string
	}{
		{"limit", "", "134217728\n", 134217728 / 100 * 90, cgroupV1MemoryLimit, ""},
		{"no limit", "", "9223372036854771712\n", 0, "", ""},
		{"the least no limit", "", "4611686018427387904\n", 0, "", ""},
		{"just below it", "", "4611686018427387900\n", 4611686018427387900 / 100 * 90, cgroupV1MemoryLimit, ""},
		{"v2 before v1", "268435456\n", "134217728\n", 268435456 / 100 * 90, cgroupMemoryMax, ""},
		{"neither", "", "", 0, "", ""},
		{"a file that lies", "", "lots\n", 0, "", "want a byte count"},
		{"a negative count", "", "-1\n", 0, "", "want a byte count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkMemoryLimit(t, nil, map[string]string{cgroupMemoryMax: tc.v2, cgroupV1MemoryLimit: tc.v1}, tc.want, tc.from, tc.wantErr)
		})
	}
}

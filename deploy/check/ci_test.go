package check

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCIClusterStep: the Kubernetes step of .ci/run, run as root with
// none of the cluster's tools on the PATH, installs them (apt-get) and
// then runs or skips the cluster test as deploy/cluster/cluster.sh check
// says; with SDS_CLUSTER=0 it installs nothing and says it skipped. The
// step runs as it is written in .ci/run, from its echo line to the end of
// the file, under bash, with stand-ins for id (root), apt-get (which
// records its calls) and cluster.sh.
func TestCIClusterStep(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("missing tool bash: not on PATH; install: apt-get install bash")
	}
	data, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	const start = `echo "== a real Kubernetes (deploy/cluster/cluster.sh e2e)"`
	i := strings.Index(string(data), start)
	if i < 0 {
		t.Fatalf(".ci/run has no line %s", start)
	}
	step := "set -euo pipefail\n" + string(data[i:])

	for _, tc := range []struct {
		cluster string // SDS_CLUSTER; "" unset
		out     string
		apt     string // the calls of apt-get, one a line
	}{
		{"0", start[6:len(start)-1] + "\nskipped: SDS_CLUSTER=0\n", ""},
		{"", start[6:len(start)-1] + "\nskipped: no containerd here\n",
			"update -qq\ninstall -y -qq --no-install-recommends containerd runc containernetworking-plugins etcd-server kubectl\n"},
	} {
		dir := t.TempDir()
		bin := filepath.Join(dir, "bin")
		log := filepath.Join(dir, "apt-get.log")
		for name, script := range map[string]string{
			"bin/id":                    "#!" + bash + "\necho 0\n",
			"bin/apt-get":               "#!" + bash + "\necho \"$*\" >> " + log + "\n",
			"deploy/cluster/cluster.sh": "#!" + bash + "\n[ \"$1\" = check ] && { echo no containerd here; exit 3; }\necho \"cluster.sh $*\"\n",
		} {
			path := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(bash, "-c", step)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + bin}
		if tc.cluster != "" {
			cmd.Env = append(cmd.Env, "SDS_CLUSTER="+tc.cluster)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("SDS_CLUSTER=%q: the step failed: %v\n%s", tc.cluster, err, out)
		}
		apt, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if string(out) != tc.out || string(apt) != tc.apt {
			t.Errorf("SDS_CLUSTER=%q: got output %q and apt-get calls %q; want %q and %q", tc.cluster, out, apt, tc.out, tc.apt)
		}
	}
}

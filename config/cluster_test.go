package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// withCluster returns valid with the lines of cluster: before it and the
// lines of point p's settings after it.
func withCluster(cluster, point string) string {
	var b strings.Builder
	if cluster != "" {
		b.WriteString("cluster:\n")
		for line := range strings.SplitSeq(strings.TrimSuffix(cluster, "\n"), "\n") {
			b.WriteString("  " + line + "\n")
		}
	}
	return b.String() + withPoint(point)
}

// TestClusterProblems: every rule of cluster: and clusterTokenBucket:,
// reported at its key's line and column.
func TestClusterProblems(t *testing.T) {
	const bucket = "clusterTokenBucket: {tokensPerSecond: 100, size: 100}"
	const addr = "addresses: [127.0.0.1:6379]"
	tests := []struct {
		name          string
		cluster, pt   string
		want          []string
		wantWarnPoint bool
	}{
		{"valid", addr, bucket, nil, false},
		{"bucket without cluster", "", bucket, []string{`7:5: point "p": clusterTokenBucket needs a top-level cluster:`}, false},
		{"no addresses", "replicas: 2", bucket, []string{`1:1: cluster: needs addresses`}, false},
		{"address without port", "addresses: [redis]", bucket, []string{`2:15: cluster.addresses: "redis" is not a host:port address`}, false},
		{"address with port 0", "addresses: [redis:0]", bucket, []string{`2:15: cluster.addresses: "redis:0" has no port from 1 to 65535`}, false},
		{"no rate", addr, "clusterTokenBucket: {size: 10}", []string{`9:5: point "p": clusterTokenBucket needs tokensPerSecond`}, false},
		{"rate 0", addr, "clusterTokenBucket: {tokensPerSecond: 0}", []string{`9:43: clusterTokenBucket.tokensPerSecond: 0 is not from 1 to 1000000000`}, false},
		{"size 0", addr, "clusterTokenBucket: {tokensPerSecond: 1, size: 0}", []string{`9:52: clusterTokenBucket.size: 0 is not from 1`}, false},
		{"unknown bucket key", addr, "clusterTokenBucket: {rate: 1}", []string{`9:5: point "p": clusterTokenBucket needs tokensPerSecond`, `9:26: unknown key "rate" in the clusterTokenBucket of point "p"`}, false},
		{"unknown cluster key", addr + "\nusrname: x", bucket, []string{`3:3: unknown key "usrname" in cluster; did you mean "username"?`}, false},
		{"timeout 0", addr + "\ntimeout: 0s", bucket, []string{`3:12: cluster.timeout: 0s is not from 1ms to 10s`}, false},
		{"replicas 0", addr + "\nreplicas: 0", bucket, []string{`3:13: cluster.replicas: 0 is not from 1 to 10000`}, false},
		{"negative db", addr + "\ndb: -1", bucket, []string{`3:7: cluster.db: -1 is negative`}, false},
		{"db on a Redis Cluster", "addresses: [a:1, b:1]\ndb: 2", bucket, []string{`3:7: cluster.db: 2 with several addresses`}, false},
		{"db with sentinels", "addresses: [a:1, b:1]\nmasterName: m\ndb: 2", bucket, nil, false},
		{"half a client certificate", addr + "\ntls: {certFile: c.pem}", bucket, []string{`3:3: cluster.tls: certFile and keyFile go together`, `3:19: cluster.tls.certFile: c.pem does not exist`}, false},
		{"unused cluster warns", addr, "visitThreshold: 1", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := withCluster(tc.cluster, tc.pt)
			checkProblems(t, problemsOf(t, src, Options{}), tc.want)
			if tc.want != nil {
				return
			}
			f, err := Parse("sds.yaml", []byte(src), Options{})
			if err != nil {
				t.Fatal(err)
			}
			warned := len(f.Warnings) > 0 && strings.Contains(f.Warnings[0].Msg, "no point has a clusterTokenBucket")
			if warned != tc.wantWarnPoint {
				t.Errorf("warning about an unused cluster: got %v, want %v (%v)", warned, tc.wantWarnPoint, f.Warnings)
			}
		})
	}
	// A password file that is not there (yet) is a warning: the proxy
	// reads it for each connection.
	f, err := Parse("sds.yaml", []byte(withCluster(addr+"\npasswordFile: nope", bucket)), Options{})
	if err != nil {
		t.Fatalf("a missing password file: %v, want a warning", err)
	}
	if len(f.Warnings) != 1 || f.Warnings[0].Line != 3 || f.Warnings[0].Col != 17 || !strings.Contains(f.Warnings[0].Msg, "cluster.passwordFile: nope does not exist") {
		t.Errorf("a missing password file: warnings %v, want one at 3:17", f.Warnings)
	}
}

// TestClusterDefaults: what an absent key means, and files resolved
// against the config file's directory.
func TestClusterDefaults(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sds.yaml")
	src := withCluster("addresses: [redis:6379]\npasswordFile: pw", "clusterTokenBucket: {tokensPerSecond: 7}")
	f, err := Parse(path, []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := f.Cluster
	if c.Timeout != 50*time.Millisecond || c.KeyPrefix != "sds:" || c.Replicas != 1 || c.DB != 0 {
		t.Errorf("defaults: got timeout %v prefix %q replicas %d db %d, want 50ms sds: 1 0", c.Timeout, c.KeyPrefix, c.Replicas, c.DB)
	}
	if want := filepath.Join(dir, "pw"); c.PasswordFile != want {
		t.Errorf("passwordFile: got %q, want %q", c.PasswordFile, want)
	}
	if b := f.Points[0].ClusterTokenBucket; !b.On() || b.TokensPerSecond != 7 || b.Size != 7 {
		t.Errorf("clusterTokenBucket: got %+v, want rate 7 and size 7 (the rate)", b)
	}
	if strings.Contains(string(f.Raw), "secret") {
		t.Error("the password is in the config")
	}
}

// TestClusterDiff: a change of cluster: needs a restart; a point's bucket
// change is a point change that applies on a reload.
func TestClusterDiff(t *testing.T) {
	parse := func(cluster, point string) *File {
		t.Helper()
		f, err := Parse("sds.yaml", []byte(withCluster(cluster, point)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a := parse("addresses: [a:1]", "clusterTokenBucket: {tokensPerSecond: 1}")
	b := parse("addresses: [b:1]", "clusterTokenBucket: {tokensPerSecond: 1}")
	if d := Diff(a, b); len(d.NeedsRestart) != 1 || d.NeedsRestart[0] != "cluster" {
		t.Errorf("a new address: needs restart %v, want [cluster]", d.NeedsRestart)
	}
	c := parse("addresses: [a:1]", "clusterTokenBucket: {tokensPerSecond: 2}")
	if d := Diff(a, c); len(d.NeedsRestart) != 0 || !strings.Contains(d.String(), "changed [p]") {
		t.Errorf("a new rate: got %q needing restart %v, want point p changed and no restart", d.String(), d.NeedsRestart)
	}
}

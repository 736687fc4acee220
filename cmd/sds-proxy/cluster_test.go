package main

import (
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/proxy/cluster"
)

// TestClusterDefaultsAgree: the file's default timeout and key prefix are
// the cluster package's own.
func TestClusterDefaultsAgree(t *testing.T) {
	if config.DefaultClusterTimeout != cluster.DefaultTimeout || config.DefaultClusterKeyPrefix != cluster.DefaultKeyPrefix {
		t.Errorf("config defaults %v %q, cluster defaults %v %q", config.DefaultClusterTimeout, config.DefaultClusterKeyPrefix,
			cluster.DefaultTimeout, cluster.DefaultKeyPrefix)
	}
}

// TestTranslateSharedBuckets: a point with clusterTokenBucket gets its
// shared bucket, the others none; a reload that leaves a point's bucket
// unchanged keeps the bucket (and its lease), one that changes it gets a
// new one.
func TestTranslateSharedBuckets(t *testing.T) {
	parse := func(rate int) *config.File {
		t.Helper()
		src := "upstream: http://127.0.0.1:9000\ncluster: {addresses: [127.0.0.1:1], replicas: 3}\n" +
			"routes: [{point: a, match: {path: /a}}, {point: b, match: {}}]\n" +
			"points:\n  a: {clusterTokenBucket: {tokensPerSecond: " + strconv.Itoa(rate) + "}}\n  b: {visitThreshold: 1}\n"
		f, err := config.Parse("sds.yaml", []byte(src), config.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := parse(100)
	cl, err := newClusterClient(f.Cluster, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	shared, buckets := sharedBuckets(cl, f)
	cfg, err := translateShared(f, nil, shared)
	if err != nil {
		t.Fatal(err)
	}
	cl.Use(buckets)
	if len(cfg.Points) != 2 || shared["a"] == nil || shared["b"] != nil || len(buckets) != 1 {
		t.Fatalf("shared buckets: a %v, b %v, %d in use; want a's only", shared["a"], shared["b"], len(buckets))
	}
	st := cl.Status(time.Now())
	if st.Replicas != 3 || len(st.Buckets) != 1 || st.Buckets[0].TokensPerSecond != 100 || st.Buckets[0].LocalSize != 33 {
		t.Errorf("status: got %+v, want 3 replicas and a's bucket of 100/s with a local share of 33", st)
	}
	same, _ := sharedBuckets(cl, parse(100))
	if same["a"] != shared["a"] {
		t.Error("an unchanged bucket is not kept across a reload")
	}
	changed, _ := sharedBuckets(cl, parse(200))
	if changed["a"] == shared["a"] {
		t.Error("a bucket with a new rate is the old one")
	}
}

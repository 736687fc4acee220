package admin

import (
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/cluster"
)

// statusCluster returns the connection as JSON and the buckets by point.
func statusCluster(st cluster.Status) (*Cluster, map[string]cluster.BucketStatus) {
	j := &Cluster{Up: st.Up, Since: statusTime(st.Since), LastError: st.LastError, Replicas: st.Replicas, Timeout: st.Timeout.String()}
	buckets := make(map[string]cluster.BucketStatus, len(st.Buckets))
	for _, b := range st.Buckets {
		buckets[b.Name] = b
	}
	return j, buckets
}

func statusBucket(b cluster.BucketStatus) *ClusterBucket {
	return &ClusterBucket{Shared: b.Shared, TokensPerSecond: b.TokensPerSecond, Size: b.Size, Level: b.Level,
		LevelAt: statusTime(b.LevelAt), Lease: b.Lease, Credit: b.Credit, Share: b.Share, ReplicasHeard: b.ReplicasHeard, LocalTokens: b.LocalTokens, LocalSize: b.LocalSize}
}

// bucketReading is the shared bucket as a strategy reading: the tokens
// used against the size, from the shared bucket's level while shared, from
// the local share otherwise; it trips when this proxy has no token now.
func bucketReading(b cluster.BucketStatus) StrategyReading {
	r := StrategyReading{Reading: Reading{Strategy: limiter.ClusterTokenBucket.String()}}
	if b.Shared {
		r.Count, r.Threshold = b.Size-min(max(b.Level, 0), b.Size), b.Size
		r.Trips = b.Lease+b.Credit < 1
	} else {
		r.Count, r.Threshold = b.LocalSize-b.LocalTokens, b.LocalSize
		r.Trips = b.LocalTokens < 1
	}
	return r
}

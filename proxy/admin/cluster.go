package admin

import (
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/cluster"
)

// The /status document's shared token buckets; see New for their shape.
type (
	clusterJSON struct {
		Up        bool      `json:"up"`
		Since     time.Time `json:"since,omitzero"`
		LastError string    `json:"lastError,omitempty"`
		Replicas  int64     `json:"replicas"`
		Timeout   string    `json:"timeout"`
	}
	bucketJSON struct {
		Shared          bool      `json:"shared"`
		TokensPerSecond int64     `json:"tokensPerSecond"`
		Size            int64     `json:"size"`
		Level           int64     `json:"level"`
		LevelAt         time.Time `json:"levelAt,omitzero"`
		Lease           int64     `json:"lease"`
		Credit          int64     `json:"credit"`
		Share           float64   `json:"share"`
		ReplicasHeard   int64     `json:"replicasHeard"`
		LocalTokens     int64     `json:"localTokens"`
		LocalSize       int64     `json:"localSize"`
	}
)

// statusCluster returns the connection as JSON and the buckets by point.
func statusCluster(st cluster.Status) (*clusterJSON, map[string]cluster.BucketStatus) {
	j := &clusterJSON{Up: st.Up, Since: statusTime(st.Since), LastError: st.LastError, Replicas: st.Replicas, Timeout: st.Timeout.String()}
	buckets := make(map[string]cluster.BucketStatus, len(st.Buckets))
	for _, b := range st.Buckets {
		buckets[b.Name] = b
	}
	return j, buckets
}

func statusBucket(b cluster.BucketStatus) *bucketJSON {
	return &bucketJSON{Shared: b.Shared, TokensPerSecond: b.TokensPerSecond, Size: b.Size, Level: b.Level,
		LevelAt: statusTime(b.LevelAt), Lease: b.Lease, Credit: b.Credit, Share: b.Share, ReplicasHeard: b.ReplicasHeard, LocalTokens: b.LocalTokens, LocalSize: b.LocalSize}
}

// bucketReading is the shared bucket as a strategy reading: the tokens
// used against the size, from the shared bucket's level while shared, from
// the local share otherwise; it trips when this proxy has no token now.
func bucketReading(b cluster.BucketStatus) readingJSON {
	r := readingJSON{Strategy: limiter.ClusterTokenBucket.String()}
	var trips bool
	if b.Shared {
		r.Count, r.Threshold = b.Size-min(max(b.Level, 0), b.Size), b.Size
		trips = b.Lease+b.Credit < 1
	} else {
		r.Count, r.Threshold = b.LocalSize-b.LocalTokens, b.LocalSize
		trips = b.LocalTokens < 1
	}
	r.Trips = &trips
	return r
}

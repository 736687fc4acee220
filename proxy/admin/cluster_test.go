package admin_test

import (
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
	"github.com/sds-proxy/sds-proxy/proxy/cluster"
)

// snapshots is a Points of fixed limiter points.
type snapshots []*limiter.Point

func (s snapshots) Snapshots(now time.Time) iter.Seq[limiter.Snapshot] {
	return func(yield func(limiter.Snapshot) bool) {
		for _, p := range s {
			if !yield(p.Snapshot(now)) {
				return
			}
		}
	}
}

// clusterStatusDoc is what TestStatusCluster reads of /status.
type clusterStatusDoc struct {
	Cluster *struct {
		Up        bool   `json:"up"`
		LastError string `json:"lastError"`
		Replicas  int64  `json:"replicas"`
		Timeout   string `json:"timeout"`
	} `json:"cluster"`
	Points []struct {
		Name       string `json:"name"`
		Strategies []struct {
			Strategy  string `json:"strategy"`
			Count     int64  `json:"count"`
			Threshold int64  `json:"threshold"`
			Trips     bool   `json:"trips"`
		} `json:"strategies"`
		Cluster *struct {
			Shared bool  `json:"shared"`
			Level  int64 `json:"level"`
			Size   int64 `json:"size"`
		} `json:"cluster"`
	} `json:"points"`
}

// TestStatusCluster: /status shows the Redis connection, and for a point
// with a shared bucket its level as this proxy sees it, as an object and
// as a strategy reading after the limiter's (from the shared level while
// shared, from the local share while Redis is down).
func TestStatusCluster(t *testing.T) {
	a, _ := limiter.NewPoint("a", limiter.Settings{Policy: limiter.Policy{VisitThreshold: limiter.At(10)}})
	b, _ := limiter.NewPoint("b", limiter.Settings{})
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		st        cluster.Status
		wantUp    bool
		wantCount int64
		wantMax   int64
		wantTrips bool
	}{
		{"shared", cluster.Status{Up: true, Since: at, Replicas: 4, Timeout: 50 * time.Millisecond, Buckets: []cluster.BucketStatus{
			{Name: "a", TokensPerSecond: 100, Size: 100, Shared: true, Level: 30, LevelAt: at, Lease: 3, Credit: 7, LocalTokens: 25, LocalSize: 25},
		}}, true, 70, 100, false},
		{"shared, empty", cluster.Status{Up: true, Since: at, Replicas: 4, Timeout: 50 * time.Millisecond, Buckets: []cluster.BucketStatus{
			{Name: "a", TokensPerSecond: 100, Size: 100, Shared: true, Level: -2, LevelAt: at, Lease: 0, Credit: 0, LocalTokens: 25, LocalSize: 25},
		}}, true, 100, 100, true},
		{"local share", cluster.Status{Since: at, LastError: "dial tcp: connection refused", Replicas: 4, Timeout: 50 * time.Millisecond, Buckets: []cluster.BucketStatus{
			{Name: "a", TokensPerSecond: 100, Size: 100, LocalTokens: 5, LocalSize: 25},
		}}, false, 20, 25, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := admin.New(admin.Options{Points: snapshots{a, b}, Gatherer: prometheus.NewRegistry(), Now: func() time.Time { return at },
				Cluster: func(time.Time) cluster.Status { return tc.st }})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
			var doc clusterStatusDoc
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
				t.Fatalf("%v: %s", err, rec.Body)
			}
			if doc.Cluster == nil || doc.Cluster.Up != tc.wantUp || doc.Cluster.Replicas != 4 || doc.Cluster.Timeout != "50ms" || (doc.Cluster.LastError != "") == tc.wantUp {
				t.Errorf("cluster: got %+v, want up %v, replicas 4, timeout 50ms, an error only when down", doc.Cluster, tc.wantUp)
			}
			pa, pb := doc.Points[0], doc.Points[1]
			if pa.Cluster == nil || pa.Cluster.Shared != tc.st.Buckets[0].Shared || pa.Cluster.Size != 100 {
				t.Errorf("point a's cluster: got %+v, want shared %v, size 100", pa.Cluster, tc.st.Buckets[0].Shared)
			}
			if pb.Cluster != nil {
				t.Errorf("point b's cluster: got %+v, want none (it has no shared bucket)", pb.Cluster)
			}
			if n := len(pa.Strategies); n != 2 || pa.Strategies[0].Strategy != "visit" {
				t.Fatalf("point a's strategies: got %+v, want visit then cluster_token_bucket", pa.Strategies)
			}
			r := pa.Strategies[1]
			if r.Strategy != "cluster_token_bucket" || r.Count != tc.wantCount || r.Threshold != tc.wantMax || r.Trips != tc.wantTrips {
				t.Errorf("reading: got %+v, want count %d threshold %d trips %v", r, tc.wantCount, tc.wantMax, tc.wantTrips)
			}
		})
	}
	// Without cluster: the document has no cluster object.
	h := admin.New(admin.Options{Points: snapshots{b}, Gatherer: prometheus.NewRegistry()})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	var doc map[string]any
	json.Unmarshal(rec.Body.Bytes(), &doc)
	if _, ok := doc["cluster"]; ok {
		t.Error("a proxy without cluster: shows a cluster object")
	}
}

// TestDashboardCluster: the dashboard draws a point's shared bucket as a
// strategy row ("shared tokens used", count against size) and says, under
// the window, the shared level, or the local share while Redis is down.
func TestDashboardCluster(t *testing.T) {
	needChromium(t)
	a, _ := limiter.NewPoint("orders", limiter.Settings{Policy: limiter.Policy{VisitThreshold: limiter.At(10)}})
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		st    cluster.Status
		wants []string
	}{
		{"shared", cluster.Status{Up: true, Since: at, Replicas: 4, Timeout: 50 * time.Millisecond, Buckets: []cluster.BucketStatus{
			{Name: "orders", TokensPerSecond: 100, Size: 100, Shared: true, Level: 30, LevelAt: at, Lease: 3, Credit: 7, LocalTokens: 25, LocalSize: 25},
		}}, []string{`data-strategy="cluster_token_bucket"`, `shared tokens used`, `70 / 100`, `shared&nbsp;bucket&nbsp;30/100`}},
		{"down", cluster.Status{Since: at, LastError: "connection refused", Replicas: 4, Timeout: 50 * time.Millisecond, Buckets: []cluster.BucketStatus{
			{Name: "orders", TokensPerSecond: 100, Size: 100, LocalTokens: 5, LocalSize: 25},
		}}, []string{`shared tokens used`, `20 / 25`, `Redis&nbsp;down:&nbsp;local&nbsp;share&nbsp;5/25`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(admin.New(admin.Options{Points: snapshots{a}, Gatherer: prometheus.NewRegistry(),
				Now: func() time.Time { return at }, Cluster: func(time.Time) cluster.Status { return tc.st }}))
			defer srv.Close()
			card := cardHTML(t, dumpDOM(t, srv.URL+"/"), "orders")
			for _, want := range tc.wants {
				if !strings.Contains(card, want) {
					t.Errorf("the card has no %q:\n%s", want, card)
				}
			}
		})
	}
}

// Package metrics is the request path's Prometheus metrics: each point's
// counters as plain atomics the request path increments (Point), reported
// at scrape time by one collector with label pairs shared by every point
// (Set), the upstream time as a native histogram with exemplars, the
// operators' switches (Forces), and the traffic figures the admin port
// shows, read back from the same series (Sample, Traffic). It knows the
// points in force only as their limiters (Source).
package metrics

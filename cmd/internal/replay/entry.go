// Package replay runs the requests of sds-proxy's access log again
// through a candidate config (`sds-proxy replay`, issue 23): Reader turns
// the log into Entries in the order the requests arrived, and Run judges
// each on the candidate's points with the real limiter, on the logged
// instants, and reports what would have changed.
package replay

import "time"

// Entry is one request as the access log tells it (docs/operations.md,
// Logs): what it carried, what the proxy decided and what its upstream
// call did. The zero value of a field is "not logged".
type Entry struct {
	// Line is the line's number in its input, from 1, for messages.
	Line int
	// Point is the point the request was routed to in the logged config.
	Point string
	// Arrived is when it was judged on its point (the log's "arrived").
	Arrived time.Time
	// Written is when its line was written (the log's "ts"): at its end.
	Written time.Time
	// Host, Method and Path are the request's, Path escaped and
	// normalised as it was routed.
	Host, Method, Path string
	// Priority is "critical", "default" or "sheddable".
	Priority string
	// Status is the status written to the client (499: it went away).
	Status int
	// Strategy is the strategy that degraded it or would have ("" none).
	Strategy string
	// Degraded: answered by the fallback or a kept answer. Shadow: marked
	// and forwarded. Stale: answered with a kept answer.
	Degraded, Shadow, Stale bool
	// Forced is the operator's switch it was answered under ("" none).
	Forced string
	// PressureTest: marked as pressure-test traffic.
	PressureTest bool
	// Keys are each per-key rule's label of its key, in rule order ("" for
	// none); nil for a point without rules.
	Keys []string
	// Start and Ended are when its forwarded call entered the point and
	// ended in the limiter; zero for a request not forwarded.
	Start, Ended time.Time
	// UpstreamLatency is the call's upstream time.
	UpstreamLatency time.Duration
	// Outcome is "ok", "failed" or "canceled"; Error "upstream_timeout",
	// "transport", "body" or "status_5xx"; "" when not forwarded.
	Outcome, Error string
	// Waited is how long it waited in its point's queue.
	Waited time.Duration
}

// Forwarded reports whether the request's call reached the limiter's
// Exit: it has an end and an outcome.
func (e *Entry) Forwarded() bool { return !e.Ended.IsZero() && e.Outcome != "" }

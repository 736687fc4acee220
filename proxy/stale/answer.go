package stale

import (
	"net/http"
	"strconv"
	"time"
)

// Answer is a kept answer, as Lookup finds it. It never changes: it may be
// served from any goroutine, any number of times, after the cache has
// dropped it.
type Answer struct {
	status     int
	header     http.Header // without hop-by-hop fields, Age, Content-Length
	body       []byte
	arrived    time.Time     // when the upstream's header arrived
	initialAge time.Duration // the Age the upstream sent, if any
}

// Age is the answer's age at now (RFC 9111 §4.2.3, simplified): the time
// since its header arrived plus the Age the upstream sent with it; never
// negative.
func (a *Answer) Age(now time.Time) time.Duration {
	return max(now.Sub(a.arrived), 0) + a.initialAge
}

// Status is the answer's status code.
func (a *Answer) Status() int { return a.status }

// Serve writes the answer to w: its status and a copy of its header (over
// any of the same names w already has), Content-Length (the body's; none
// for 204), Age (whole seconds at now, RFC 9111 §5.1), Sds-Degraded:
// degraded (none if ""), then the body unless head. It returns the
// status. A body write error is the client's and is not reported.
func (a *Answer) Serve(w http.ResponseWriter, head bool, degraded string, now time.Time) int {
	h := w.Header()
	n := 0
	for _, vv := range a.header {
		n += len(vv)
	}
	vals := make([]string, n) // one allocation for every value, as Header.Clone
	for k, vv := range a.header {
		n = copy(vals, vv)
		h[k] = vals[:n:n]
		vals = vals[n:]
	}
	if a.status == http.StatusNoContent {
		delete(h, "Content-Length")
	} else {
		h["Content-Length"] = []string{strconv.Itoa(len(a.body))}
	}
	h["Age"] = []string{strconv.FormatInt(int64(a.Age(now)/time.Second), 10)}
	if degraded != "" {
		h["Sds-Degraded"] = []string{degraded}
	}
	w.WriteHeader(a.status)
	if !head && a.status != http.StatusNoContent && len(a.body) > 0 {
		_, _ = w.Write(a.body)
	}
	return a.status
}

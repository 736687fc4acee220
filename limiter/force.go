package limiter

import "time"

// Admit counts one request at now that an operator's switch forwards
// without judging (the proxy's "pass" switch), and fills c as Enter does
// for a forwarded request: the caller must call c.Exit once the call ends.
//
// The request is counted as a visit that passed, takes a concurrency slot
// and has its outcome (timeout, exception) recorded by Exit, so the window
// and the calls in flight show the traffic the switch lets through, and
// requests judged beside it (or after the switch ends) see that load. No
// strategy is judged, no delay is started or ended by it, no token is
// taken and the call is never a probe. Admit does not allocate and is safe
// for concurrent use.
func (p *Point) Admit(c *Call, now time.Time) {
	c.reset()
	cur := p.st.win.bucket(now)
	p.start(c, p.st.win.record(cur, false), now, false, false)
}

// Refuse counts one request at now that an operator's switch degrades
// without judging (the proxy's "degrade" switch): a visit, and a degraded
// one, as a request degraded by a strategy is counted, so that the window
// shows the traffic the switch turns away and the visit strategy's
// visits-degraded is not changed by it. Nothing else changes: no slot, no
// token, no delay, no trip. Refuse does not allocate and is safe for
// concurrent use.
func (p *Point) Refuse(now time.Time) {
	p.st.win.record(p.st.win.bucket(now), true)
}

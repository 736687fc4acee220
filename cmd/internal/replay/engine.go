package replay

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/route"
)

// Options shape a Run. The zero Options reports what the log cannot tell
// as unknown and invents nothing.
type Options struct {
	// AssumeNeighbours gives a request the log has no upstream call for
	// (degraded in reality) that the candidate forwards the upstream time,
	// call length and outcome of the last request forwarded in reality on
	// the same candidate point, or none (its call ends at once, OK) when
	// there was none yet. Without it, every such call ends at once, OK.
	// Either way it is counted in Unknown.
	AssumeNeighbours bool
}

// Report is what a Run found: per candidate point, what the log says
// happened to the requests routed there and what the candidate would
// have done with them. It is the JSON of `sds-proxy replay -o json`.
type Report struct {
	// Points are the candidate's points, in config order, each with the
	// requests the candidate routes to it.
	Points []PointReport `json:"points"`
	// Requests, Degraded, WouldDegrade, BecameDegraded, BecameForwarded
	// and Unknown are the sums of the points'.
	Requests        int `json:"requests"`
	Degraded        int `json:"degraded"`
	WouldDegrade    int `json:"wouldDegrade"`
	BecameDegraded  int `json:"becameDegraded"`
	BecameForwarded int `json:"becameForwarded"`
	Unknown         int `json:"unknown"`
	// Unrouted counts the requests no route of the candidate matches:
	// they would be forwarded unprotected, and are judged on no point.
	Unrouted int `json:"unrouted"`
	// Late counts lines the reader could not put in arrival order; Run
	// leaves it 0, for its caller to set.
	Late int `json:"late,omitempty"`
	// Approximate counts, by reason (the Approx constants), the requests
	// judged with an approximation: the sums of the points'.
	// ApproximateRequests counts the requests with at least one.
	Approximate         map[string]int `json:"approximate"`
	ApproximateRequests int            `json:"approximateRequests"`
}

// PointReport is one candidate point's part of a Report. Strategies are
// named as in the access log ("visit", "key_concurrent", ...), and
// "forced" for an operator's switch.
type PointReport struct {
	Point string `json:"point"`
	// Requests counts the requests the candidate routes to the point.
	Requests int `json:"requests"`
	// Degraded counts, by strategy, those the log says were degraded;
	// WouldDegrade those the candidate degrades.
	Degraded     map[string]int `json:"degraded"`
	WouldDegrade map[string]int `json:"wouldDegrade"`
	// BecameDegraded counts the requests not degraded in reality that the
	// candidate degrades; BecameForwarded those degraded in reality that
	// the candidate does not degrade.
	BecameDegraded  int `json:"becameDegraded"`
	BecameForwarded int `json:"becameForwarded"`
	// FirstTrip is the arrival of the first request the candidate degraded
	// (or, on a shadow point, marked) by one of the point's own strategies
	// or its delay: not a per-key rule, a pressure test, a sheddable
	// share, the fleet's bucket or a switch. nil (JSON null) when none.
	FirstTrip *time.Time `json:"firstTrip"`
	// Shadow and WouldShadow count, by strategy, the requests marked
	// would-be degraded and forwarded, in the log and by the candidate.
	Shadow      map[string]int `json:"shadow,omitempty"`
	WouldShadow map[string]int `json:"wouldShadow,omitempty"`
	// Unknown counts the requests the candidate forwards whose upstream
	// call the log does not have (Options.AssumeNeighbours).
	Unknown int `json:"unknown"`
	// Approximate counts, by reason, the requests judged with an
	// approximation; ApproximateRequests those with at least one.
	Approximate         map[string]int `json:"approximate,omitempty"`
	ApproximateRequests int            `json:"approximateRequests,omitempty"`
}

// The reasons a request is judged with an approximation, as
// Report.Approximate counts them. Everything else is judged exactly as
// the proxy judged it: with the config that produced the log, Run
// reproduces each decision that no reason below touches.
const (
	// ApproxForced: an operator's switch was in force; the request is
	// taken as the log says (degrade or pass), whatever the candidate.
	ApproxForced = "forced"
	// ApproxCluster: the fleet-wide bucket (clusterTokenBucket) judged the
	// request. Its tokens are the fleet's, not in the log: it refuses the
	// requests the log says it refused, and passes the others.
	ApproxCluster = "cluster_token_bucket"
	// ApproxQueue: the point has a queue. Nothing waits in a replay: each
	// request is judged once, at its arrival, as if the queue were empty.
	ApproxQueue = "queue"
	// ApproxDraw: a downgradeRate draw the log does not tell (the logged
	// request was not tripped on this point), drawn afresh.
	ApproxDraw = "downgrade_rate"
	// ApproxAdaptive: the point has adaptiveConcurrency, whose limit
	// follows latencies the candidate would have changed.
	ApproxAdaptive = "adaptive_concurrency"
	// ApproxTimeout: the call's timeout is counted while it is in flight,
	// at its start + timeoutThreshold; the proxy counts it within
	// proxy.AlarmTick after, later by any time its clock stood still on
	// the client.
	ApproxTimeout = "timeout_in_flight"
	// ApproxUpstreamTimeout: the candidate's upstreamTimeout would cut the
	// call where the logged config did not, or would let run longer a
	// call the logged config cut (its length is then unknown: taken as
	// logged).
	ApproxUpstreamTimeout = "upstream_timeout"
	// ApproxKeyLabel: a per-key rule of the candidate has no label in the
	// log (the logged point had fewer rules, or was another point): the
	// rule does not judge the request.
	ApproxKeyLabel = "perkey_label"
	// ApproxKeySketch: a per-key rule saw more keys than its table surely
	// tracks exactly: which keys share a shard or a sketch cell depends
	// on the hashes, and the logged process's are secret.
	ApproxKeySketch = "perkey_sketch"
	// ApproxLate: the request came out of arrival order (the reader's
	// Late: it lasted longer than its horizon): judged at the arrival of
	// the request replayed before it, as if it had arrived then.
	ApproxLate = "late"
)

// approxReasons are the reasons by bit of an approx.
var approxReasons = [...]string{ApproxForced, ApproxCluster, ApproxQueue, ApproxDraw, ApproxAdaptive,
	ApproxTimeout, ApproxUpstreamTimeout, ApproxKeyLabel, ApproxKeySketch, ApproxLate}

// approx is a set of reasons, bit i for approxReasons[i].
type approx uint16

const (
	apForced approx = 1 << iota
	apCluster
	apQueue
	apDraw
	apAdaptive
	apTimeout
	apUpstreamTimeout
	apKeyLabel
	apKeySketch
	apLate
)

// Run replays the entries next returns, in arrival order, through the
// candidate config f, and reports what would have changed. Each entry is
// routed by f's routes and judged on its point as proxy.Handler judges a
// request (the operator's switch, then the per-key rules, then the
// limiter), at its logged arrival; the upstream call of a request the
// candidate forwards ends at its logged instant with its logged outcome
// (Options for one the log has none of). The calls' ends and in-flight
// timeouts are applied in time order between arrivals; one at the same
// instant as an arrival comes before it, as a call that ends frees its
// slot for the request that follows (the log's instants are to the
// microsecond: within one, the proxy's order is unknown).
//
// Run fails on a config the limiter refuses (f is meant to be
// validated), and on an entry without an arrival, or arriving before the
// one before it. Run is deterministic: the same inputs give the same
// Report.
func Run(f *config.File, next func() (Entry, bool), opts Options) (*Report, error) {
	en, err := newEngine(f, opts)
	if err != nil {
		return nil, err
	}
	for {
		e, ok := next()
		if !ok {
			break
		}
		if err := en.replay(&e); err != nil {
			return nil, err
		}
	}
	return en.report(), nil
}

// engine is one Run's state: the candidate's points and routes, built as
// cmd/sds-proxy builds them, and the calls in flight.
type engine struct {
	opts     Options
	pressure bool // the candidate names a pressureTestHeader
	routes   *route.Table
	byRoute  []candidateRoute
	points   []*point
	pending  events
	seq      uint64
	free     []*flight
	last     time.Time // the previous arrival
	rng      *rand.Rand
	req      http.Request // the entry being routed
	url      url.URL
	unrouted int
}

// candidateRoute is a route of the candidate: its point and the priority
// it gives.
type candidateRoute struct {
	pt       *point
	priority limiter.Priority
}

// point is a candidate point: its limiter and per-key tables, and what
// judging a request there needs besides.
type point struct {
	name            string
	lim             *limiter.Point
	keys            []keyRule
	gate            *gate // nil without clusterTokenBucket
	draw            *draw
	upstreamTimeout time.Duration
	shadow          bool
	queue           bool
	adaptive        bool
	rep             PointReport
	// last is the call of the last request forwarded in reality that was
	// routed here (Options.AssumeNeighbours); ok once there is one.
	last struct {
		shape callShape
		ok    bool
	}
}

// keyRule is a per-key rule of a candidate point.
type keyRule struct {
	table   *perkey.Table
	missing string // "pass" ("" too), "degrade" or "shared"
	// seen holds the keys the rule judged while they may all be tracked
	// exactly (up to sure); nil once they may not (overflow).
	seen     map[uint64]struct{}
	sure     int
	overflow bool
}

func newEngine(f *config.File, opts Options) (*engine, error) {
	en := &engine{opts: opts, pressure: f.PressureTestHeader != "", rng: rand.New(rand.NewPCG(23, 23))}
	byName := make(map[string]*point, len(f.Points))
	for i := range f.Points {
		cp := &f.Points[i]
		pt, err := en.newPoint(f, cp)
		if err != nil {
			return nil, fmt.Errorf("point %s: %w", cp.Name, err)
		}
		byName[cp.Name] = pt
		en.points = append(en.points, pt)
	}
	rules := make([]route.Rule, 0, len(f.Routes))
	for i, r := range f.Routes {
		pt, ok := byName[r.Point]
		if !ok {
			return nil, fmt.Errorf("route %d names unknown point %q", i+1, r.Point)
		}
		// The proxy's own normal form, so that a route matches the paths
		// it matched when the log was written.
		rt, err := proxy.NewRoute(proxy.Route{Rule: r.Rule()})
		if err != nil {
			return nil, fmt.Errorf("route %d: %w", i+1, err)
		}
		rules = append(rules, rt.Rule)
		en.byRoute = append(en.byRoute, candidateRoute{pt: pt, priority: r.Priority})
	}
	en.routes = route.NewTable(rules)
	en.req.URL = &en.url
	return en, nil
}

// newPoint builds candidate point cp of f as cmd/sds-proxy does (its
// translate.go), with a draw the log can decide.
func (en *engine) newPoint(f *config.File, cp *config.Point) (*point, error) {
	pt := &point{name: cp.Name, draw: &draw{logged: -1, rng: en.rng}, upstreamTimeout: cp.UpstreamTimeout}
	s := f.Settings(cp)
	s.Percent = pt.draw.percent
	lim, err := limiter.NewPoint(cp.Name, s)
	if err != nil {
		return nil, err
	}
	pt.lim = lim
	ls := lim.Settings()
	pt.shadow, pt.queue, pt.adaptive = ls.Shadow, ls.Queue.On, ls.AdaptiveConcurrency.On
	if cp.ClusterTokenBucket.On() {
		pt.gate = &gate{}
	}
	if len(cp.PerKey) > proxy.MaxKeyRules {
		return nil, fmt.Errorf("%d per-key rules, at most %d", len(cp.PerKey), proxy.MaxKeyRules)
	}
	for i, k := range cp.PerKey {
		t, err := perkey.New(f.KeySettings(k))
		if err != nil {
			return nil, fmt.Errorf("perKey[%d]: %w", i, err)
		}
		// perkey spreads a table's keys over at most 16 shards, each
		// tracking its share of MaxKeys exactly: up to MaxKeys/16 keys,
		// every key is tracked exactly whatever the hashes.
		sure := t.Settings().MaxKeys / 16
		pt.keys = append(pt.keys, keyRule{table: t, missing: k.Missing, seen: make(map[uint64]struct{}), sure: sure})
	}
	pt.rep = PointReport{Point: cp.Name, Degraded: map[string]int{}, WouldDegrade: map[string]int{}}
	return pt, nil
}

// flight is a call in flight in the replay: the limiter's and the
// per-key rules' tickets, and how it ends.
type flight struct {
	lim     limiter.Call
	keys    [proxy.MaxKeyRules]perkey.Call
	outcome limiter.Outcome
	// exclude is the call's time not spent upstream (Call.Exclude), given
	// to the limiter just before Exit, after any in-flight timeout.
	exclude time.Duration
}

func (en *engine) flight() *flight {
	if n := len(en.free); n > 0 {
		f := en.free[n-1]
		en.free = en.free[:n-1]
		return f
	}
	return new(flight)
}

// exitKeys frees the places in flight f holds on per-key rules.
func (f *flight) exitKeys() {
	for i := range f.keys {
		f.keys[i].Exit()
	}
}

// verdict is the candidate's judgement of one request.
type verdict struct {
	allowed  bool
	shadow   bool
	forced   bool
	strategy limiter.Strategy
	// trip: a point's own strategy or its delay degraded (or marked) it.
	trip bool
}

// name is the verdict's strategy as the report counts it.
func (v verdict) name() string {
	if v.forced {
		return "forced"
	}
	return v.strategy.String()
}

// replay judges one entry on the candidate.
func (en *engine) replay(e *Entry) error {
	if e.Arrived.IsZero() {
		return fmt.Errorf("line %d: no arrival instant", e.Line)
	}
	late := e.Arrived.Before(en.last)
	if late {
		e.Arrived = en.last // time never runs backwards in the limiter
	}
	en.last = e.Arrived
	en.settle(e.Arrived)

	cr := en.route(e)
	if cr == nil {
		en.unrouted++
		return nil
	}
	pt := cr.pt
	shape, known, err := en.shape(pt, e)
	if err != nil {
		return err
	}
	var ap approx
	if late {
		ap |= apLate
	}
	f := en.flight()
	v, err := en.judge(pt, cr.priority, e, f, &ap)
	if err != nil {
		return err
	}
	if v.allowed {
		if !known {
			pt.rep.Unknown++
		}
		en.start(pt, f, e.Arrived, shape, &ap)
	} else {
		f.exitKeys() // a degraded request's places are freed once it is answered
		en.free = append(en.free, f)
	}
	if known {
		pt.last.shape, pt.last.ok = shape, true
	}
	en.count(pt, e, v, ap)
	return nil
}

// route returns the candidate route of e, or nil.
func (en *engine) route(e *Entry) *candidateRoute {
	r := &en.req
	r.Method, r.Host = e.Method, e.Host
	en.url = url.URL{Path: e.Path, RawPath: e.Path}
	if p, err := url.PathUnescape(e.Path); err == nil {
		en.url.Path = p
	}
	// Find reads the method, the host and, for a host without a port, the
	// scheme's default port: the log does not say whether a request came
	// over TLS, so it is taken as 80.
	if i := en.routes.Find(r, e.Path); i >= 0 {
		return &en.byRoute[i]
	}
	return nil
}

// judge judges e on pt at its arrival as proxy.Handler's enter does, in
// its order: the operator's switch in force, else the per-key rules,
// then the limiter. f receives the calls of a request it allows.
func (en *engine) judge(pt *point, priority limiter.Priority, e *Entry, f *flight, ap *approx) (verdict, error) {
	now := e.Arrived
	if e.Forced != "" {
		action, ok := proxy.ParseForceAction(e.Forced)
		if !ok {
			return verdict{}, fmt.Errorf("line %d: forced %q is not degrade or pass", e.Line, e.Forced)
		}
		*ap |= apForced
		if action == proxy.ForceDegrade {
			pt.lim.Refuse(now)
			return verdict{forced: true}, nil
		}
		pt.lim.Admit(&f.lim, now)
		return verdict{allowed: true, forced: true}, nil
	}
	key := perkey.Verdict{Allowed: true}
	if len(pt.keys) > 0 {
		key = en.judgeKeys(pt, e, f, ap)
		if !key.Allowed && !pt.shadow {
			pt.lim.Refuse(now)
			return verdict{strategy: key.Strategy}, nil
		}
	}
	// Nothing waits in a replay: the queue is empty for every request,
	// so a sheddable one may use every slot (proxy.Handler's enter).
	req := limiter.Request{Priority: priority, WholeLimit: pt.queue}
	req.PressureTest = en.pressure && e.PressureTest
	if pt.gate != nil {
		pt.gate.deny = e.Point == pt.name && e.Strategy == limiter.ClusterTokenBucket.String()
		pt.gate.took = false
		req.Gate = pt.gate
	}
	pt.draw.logged, pt.draw.called = loggedDraw(pt, e), false
	lv := pt.lim.Enter(&f.lim, now, req)
	if pt.gate != nil && pt.gate.took {
		*ap |= apCluster
	}
	if pt.draw.called && pt.draw.logged < 0 {
		*ap |= apDraw
	}
	if pt.queue {
		*ap |= apQueue
	}
	if pt.adaptive {
		*ap |= apAdaptive
	}
	if len(pt.keys) > 0 && !key.Allowed && lv.Allowed && !lv.Shadow {
		// A shadow point's key rule would have degraded it.
		lv.Shadow, lv.Strategy = true, key.Strategy
	}
	v := verdict{allowed: lv.Allowed, shadow: lv.Shadow, strategy: lv.Strategy}
	v.trip = (!lv.Allowed || lv.Shadow) && !lv.Sheddable && lv.Strategy >= limiter.Recovery && lv.Strategy <= limiter.ExceptionRate
	return v, nil
}

// judgeKeys judges e on pt's per-key rules in order, as proxy's
// judgeKeys does, with the log's labels for keys: each rule that admits
// it counts it, and the first that does not frees the places of the
// rules before and decides.
func (en *engine) judgeKeys(pt *point, e *Entry, f *flight, ap *approx) perkey.Verdict {
	now := e.Arrived
	for i := range pt.keys {
		rule := &pt.keys[i]
		if e.Point != pt.name || i >= len(e.Keys) {
			*ap |= apKeyLabel
			continue
		}
		var key uint64
		if label := e.Keys[i]; label != "" {
			key = labelKey(label)
		} else {
			switch rule.missing {
			case "", "pass":
				continue
			case "degrade":
				f.exitKeys()
				return perkey.Verdict{Strategy: limiter.KeyVisit}
			}
			key = missingKey
		}
		if rule.see(key) {
			*ap |= apKeySketch
		}
		if v := rule.table.Enter(&f.keys[i], now, key); !v.Allowed {
			f.exitKeys()
			return v
		}
	}
	return perkey.Verdict{Allowed: true}
}

// see notes that the rule judges key, and reports whether the rule has
// seen more keys than it surely tracks exactly.
func (k *keyRule) see(key uint64) bool {
	if k.overflow {
		return true
	}
	k.seen[key] = struct{}{}
	if len(k.seen) > k.sure {
		k.overflow, k.seen = true, nil
	}
	return k.overflow
}

// missingKey is the one key of the requests without one under missing:
// shared (a label is 8 hex digits, so no label hashes from it).
var missingKey = labelKey("\x00missing")

// labelKey is the 64-bit key of a logged label: FNV-1a, then mixed
// (murmur3's finaliser) so that the top bits, which pick a table's shard,
// depend on every byte. The logged process hashed the raw keys with a
// secret seed; within one log, a label stands for one key.
func labelKey(label string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(label); i++ {
		h ^= uint64(label[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// loggedDraw returns the downgradeRate draw that gives the logged
// decision of e on pt, or -1 when the log does not tell one: the logged
// request was not tripped on pt's own strategies. A tripped request is
// degraded when the draw is below the rate (0 < rate < 100 when it
// draws), so 0 degrades and 99 lets through.
func loggedDraw(pt *point, e *Entry) int {
	if e.Point != pt.name || e.Forced != "" || e.Strategy == "" {
		return -1
	}
	st, ok := strategyNamed[e.Strategy]
	if !ok || st.PerKey() || st == limiter.ClusterTokenBucket {
		return -1
	}
	if e.Degraded || e.Shadow {
		return 0
	}
	return 99
}

// strategyNamed maps the log's strategy names to the limiter's.
var strategyNamed = func() map[string]limiter.Strategy {
	m := make(map[string]limiter.Strategy, limiter.LastStrategy)
	for s := limiter.Strategy(1); s <= limiter.LastStrategy; s++ {
		m[s.String()] = s
	}
	return m
}()

// draw is a point's downgradeRate draw (limiter.Settings.Percent): the
// log's decision when it tells one, else a seeded draw.
type draw struct {
	logged int  // the draw loggedDraw gave for the request judged; -1: none
	called bool // the limiter drew for it
	rng    *rand.Rand
}

func (d *draw) percent() int {
	d.called = true
	if d.logged >= 0 {
		return d.logged
	}
	return d.rng.IntN(100)
}

// gate stands for the fleet-wide bucket (limiter.Request.Gate): it
// refuses the request the log says it refused.
type gate struct {
	deny bool
	took bool // asked for the request judged
}

func (g *gate) Take(time.Time) bool {
	g.took = true
	return !g.deny
}

// callShape is an upstream call as the log has it: its length from its
// start to its end in the limiter, its upstream time, its outcome, and
// whether upstreamTimeout cut it.
type callShape struct {
	length, upstream time.Duration
	outcome          limiter.Outcome
	cut              bool
}

// shape returns the call of e if the log has it (known), else the one
// Options give a request without one.
func (en *engine) shape(pt *point, e *Entry) (s callShape, known bool, err error) {
	if !e.Forwarded() {
		if en.opts.AssumeNeighbours && pt.last.ok {
			return pt.last.shape, false, nil
		}
		return callShape{outcome: limiter.OK}, false, nil
	}
	switch e.Outcome {
	case "ok":
		s.outcome = limiter.OK
	case "failed":
		s.outcome = limiter.Failed
	case "canceled":
		s.outcome = limiter.Canceled
	default:
		return s, false, fmt.Errorf("line %d: outcome %q is not ok, failed or canceled", e.Line, e.Outcome)
	}
	start := e.Start
	if start.IsZero() {
		start = e.Arrived
	}
	// A queued request's call starts when it was admitted; a replayed one
	// starts at its arrival and lasts as long. The log's instants are cut
	// to the microsecond, its upstream time is not: a call is never
	// shorter than its upstream time.
	s.upstream = max(e.UpstreamLatency, 0)
	s.length = max(e.Ended.Sub(start), s.upstream)
	s.cut = e.Error == "upstream_timeout"
	return s, true, nil
}

// start puts the call of a request the candidate forwards in flight at
// begin: its end, and its timeout when the candidate counts one before
// the end.
func (en *engine) start(pt *point, f *flight, begin time.Time, s callShape, ap *approx) {
	if u := pt.upstreamTimeout; u > 0 || s.cut {
		s = cutAt(u, s, ap)
	}
	f.outcome, f.exclude = s.outcome, s.length-s.upstream
	if t := pt.lim.TimeoutThreshold(); t > 0 && s.upstream >= t && t < s.length {
		// Counted in flight, once the upstream time reaches t (Exit would
		// count it only at the end).
		en.push(begin.Add(t), f, true)
		*ap |= apTimeout
	}
	en.push(begin.Add(s.length), f, false)
}

// cutAt returns call s under an upstreamTimeout of u (0: none). The
// proxy cuts a call within proxy.AlarmTick after its upstream time
// reaches u: a call that ran on past that is cut at u, as an exception;
// one that ended within it may have been cut or not, and is kept.
func cutAt(u time.Duration, s callShape, ap *approx) callShape {
	switch {
	case u > 0 && s.upstream >= u+proxy.AlarmTick:
		*ap |= apUpstreamTimeout
		return callShape{length: u, upstream: u, outcome: limiter.Failed, cut: true}
	case s.cut && (u == 0 || u > s.upstream):
		*ap |= apUpstreamTimeout // it would have run longer: for how long, the log cannot say
	case !s.cut && u > 0 && s.upstream >= u:
		*ap |= apUpstreamTimeout
	}
	return s
}

// count adds the judgement v of e on pt to the report.
func (en *engine) count(pt *point, e *Entry, v verdict, ap approx) {
	r := &pt.rep
	r.Requests++
	logged := e.Strategy
	if e.Forced == "degrade" {
		logged = "forced"
	}
	switch {
	case e.Degraded:
		r.Degraded[logged]++
	case e.Shadow:
		r.Shadow = inc(r.Shadow, logged)
	}
	switch {
	case !v.allowed:
		r.WouldDegrade[v.name()]++
	case v.shadow:
		r.WouldShadow = inc(r.WouldShadow, v.name())
	}
	// A request whose client went away while it waited in a queue was
	// neither degraded nor forwarded: it becomes neither.
	gone := !e.Degraded && !e.Forwarded() && e.Status == proxy.StatusClientClosedRequest
	switch {
	case !v.allowed && !e.Degraded && !gone:
		r.BecameDegraded++
	case v.allowed && e.Degraded:
		r.BecameForwarded++
	}
	if v.trip && r.FirstTrip == nil {
		at := e.Arrived
		r.FirstTrip = &at
	}
	if ap != 0 {
		r.ApproximateRequests++
		for i, reason := range approxReasons {
			if ap&(1<<i) != 0 {
				r.Approximate = inc(r.Approximate, reason)
			}
		}
	}
}

func inc(m map[string]int, k string) map[string]int {
	if m == nil {
		m = make(map[string]int)
	}
	m[k]++
	return m
}

// report sums the points' reports.
func (en *engine) report() *Report {
	rep := &Report{Unrouted: en.unrouted, Approximate: map[string]int{}}
	for _, pt := range en.points {
		r := pt.rep
		rep.Points = append(rep.Points, r)
		rep.Requests += r.Requests
		for _, n := range r.Degraded {
			rep.Degraded += n
		}
		for _, n := range r.WouldDegrade {
			rep.WouldDegrade += n
		}
		rep.BecameDegraded += r.BecameDegraded
		rep.BecameForwarded += r.BecameForwarded
		rep.Unknown += r.Unknown
		rep.ApproximateRequests += r.ApproximateRequests
		for k, n := range r.Approximate {
			rep.Approximate[k] += n
		}
	}
	return rep
}

// event is an instant a call in flight reaches: its timeout counted in
// flight, or its end.
type event struct {
	at      int64 // Unix nanoseconds
	seq     uint64
	f       *flight
	timeout bool
}

// events is a min-heap of events by instant, then by the order they were
// scheduled in (a call's timeout before its end, earlier calls first).
type events []event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*h = old[:len(old)-1]
	return e
}

func (en *engine) push(at time.Time, f *flight, timeout bool) {
	en.seq++
	heap.Push(&en.pending, event{at: at.UnixNano(), seq: en.seq, f: f, timeout: timeout})
}

// settle applies every event at or before now, in order: as proxy's exit
// and call.end do, a call's per-key places are freed, then its time not
// spent upstream excluded, then it exits with its outcome (counting its
// timeout unless counted in flight already).
func (en *engine) settle(now time.Time) {
	n := now.UnixNano()
	for len(en.pending) > 0 && en.pending[0].at <= n {
		ev := heap.Pop(&en.pending).(event)
		at := time.Unix(0, ev.at)
		f := ev.f
		if ev.timeout {
			f.lim.Timeout(at)
			continue
		}
		f.exitKeys()
		f.lim.Exclude(f.exclude)
		f.lim.Exit(at, f.outcome)
		en.free = append(en.free, f)
	}
}

package admin

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"iter"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/cluster"
	"github.com/sds-proxy/sds-proxy/proxy/events"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/proxy/queue"
	"github.com/sds-proxy/sds-proxy/proxy/stale"
)

// ReloadStatus is the config state shown on /status. cmd fills it on each
// load; its zero value shows an empty config with no reload attempt.
type ReloadStatus struct {
	// Path and Hash are the file and the hex sha256 of the config in force.
	Path, Hash string
	// LoadedAt is when the config in force was applied.
	LoadedAt time.Time
	// LastAttempt, LastOK, LastError and LastChange describe the last
	// reload attempt, applied or rejected; LastAttempt is zero when there
	// was none.
	LastAttempt time.Time
	LastOK      bool
	LastError   string
	// LastChange says what the last attempt changed: "" when it was
	// rejected or found the config in force unchanged, never the change
	// of an earlier reload.
	LastChange string
}

// Points is the request path as the admin port reads it: the state of
// the points in force. *proxy.Handler implements it.
type Points interface {
	// Snapshots yields one snapshot per point in force, in config order,
	// each taken at now without side effects as it is yielded, so that a
	// reader holds one point's at a time. It is called once per /status
	// request, concurrently with requests on the points.
	Snapshots(now time.Time) iter.Seq[limiter.Snapshot]
}

// Options are the admin port's sources. Points and Gatherer are required;
// the other fields default when nil.
type Options struct {
	// Points is the request path whose points /status shows.
	Points Points
	// Gatherer is the registry the proxy's metrics were registered on.
	Gatherer prometheus.Gatherer
	// Metrics is the request path's metrics, registered on Gatherer: when
	// set, GET /metrics writes their per-point families itself
	// (metrics.Set's Handler) at a cost that does not grow with a
	// dto.Metric per series; nil serves Gatherer through promhttp alone.
	// The answer is the same either way.
	Metrics *metrics.Set
	// Ready reports false while draining (SIGTERM) or before serving; nil
	// means always ready.
	Ready func() bool
	// Status returns the config state; nil shows a zero ReloadStatus.
	Status func() ReloadStatus
	// Now is the clock of the points' snapshots; nil means time.Now.
	Now func() time.Time
	// Config returns the path and the raw bytes of the config file in
	// force, served as GET /config; nil, or a nil raw, when the proxy runs
	// without a config file (GET /config then answers 404).
	Config func() (path string, raw []byte)
	// Events is the event history shown on /status; nil shows none.
	Events *events.Log
	// Traffic returns a point's recent traffic figures (metrics.Set's
	// Traffic); nil, or ok false, omits them.
	Traffic func(point string, now time.Time) (metrics.Traffic, bool)
	// Version is the build's version, shown on /status.
	Version string
	// Switches are the operators' switches: set and cleared by the
	// force endpoints, shown on /status. nil: no switch is shown and the
	// force endpoints do not exist.
	Switches Switches
	// Token returns the bearer token of the force endpoints, read from
	// adminTokenFile on each load of the config; nil, or a nil or empty
	// token, and the force endpoints do not exist (404), as when the
	// file names none.
	Token func() []byte
	// Cluster returns the shared token buckets' Redis connection and
	// buckets as this proxy sees them at now (cluster.Client's Status);
	// nil shows none.
	Cluster func(now time.Time) cluster.Status
	// Sources returns the points in force as the metrics read them
	// (proxy.Handler's Sources): /status shows the queue and the per-key
	// rules of each point that has them. nil shows neither.
	Sources func() []metrics.Source
	// KeyLabel returns the label of a key's 64-bit sum, as the request
	// path labels it (clientkey.Hasher.Label, the proxy's Hasher): /status
	// lists each per-key rule's heaviest keys by it. nil lists none.
	KeyLabel func(sum uint64) string
	// Stale is the stale cache of the request path (proxy.Options.Stale),
	// whose figures /status shows; nil shows none.
	Stale *stale.Cache
}

// History is how far back /status shows events: the dashboard's timeline,
// and the span the event history keeps under its bounds (events.Span).
const History = events.Span

// Most events /status shows: overall, and per point.
const (
	MaxEvents      = 500
	MaxPointEvents = 50
)

// New returns the admin port (the README's "Admin port"). It
// answers GET and HEAD only (other methods: 405 with Allow), but for the
// force endpoints below, 404 for unknown paths, and never logs a request
// (a switch set or ended is logged by the request path). It is safe for
// concurrent use.
//
//	GET /healthz  200 "ok" while the process runs.
//	GET /readyz   200 "ready" while Ready reports true, else 503 "draining".
//	GET /metrics  the Gatherer's metrics, in the Prometheus formats.
//	GET /status   the config state and every point in force: the Status document.
//	GET /config   the config file in force, as it was read (application/yaml), its path
//	              in the Sds-Config-Path header; 404 without a config file.
//	GET /         the dashboard: one self-contained page that polls /status.
//
// With Switches and a Token (adminTokenFile), and only then, the port also
// answers the operators' switches (docs/admin.md, "Runtime switches"):
//
//	POST   /points/{name}/force  body {"action": "degrade"|"pass", "ttl": "10m", "reason": "..."}:
//	                             sets the point's switch, replacing any; 200 with the switch as JSON
//	                             {"point", "action", "reason", "since", "until"}.
//	DELETE /points/{name}/force  clears it; 200 with the switch, "until" now; 404 when it has none.
//
// Both need "Authorization: Bearer <token>" (compared in constant time;
// 401 with WWW-Authenticate otherwise). Other methods get 405. The body is
// application/json (else 415), at most MaxForceBody bytes (else 413), one
// object with exactly the three fields; a bad action, a ttl that is not a
// Go duration in (0, 24h], a missing, empty or multi-line reason: 400; a
// point not in force: 404. Without a token every method gets 404.
func New(opts Options) http.Handler {
	a := &server{opts: opts}
	if a.opts.Now == nil {
		a.opts.Now = time.Now
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		plainText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	exposition := promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true, DisableCompression: true})
	if opts.Metrics != nil {
		exposition = opts.Metrics.Handler(opts.Gatherer)
	}
	mux.Handle("GET /metrics", fastGzip(exposition))
	mux.HandleFunc("GET /status", a.status)
	mux.HandleFunc("GET /config", a.config)
	mux.HandleFunc("GET /{$}", serveDashboard)
	mux.HandleFunc("/points/{name}/force", a.force)
	return mux
}

// server is the admin port's state: its options, read-only after New.
type server struct {
	opts Options
}

func (a *server) readyz(w http.ResponseWriter, r *http.Request) {
	if a.opts.Ready != nil && !a.opts.Ready() {
		plainText(w, http.StatusServiceUnavailable, "draining")
		return
	}
	plainText(w, http.StatusOK, "ready")
}

func plainText(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// status writes the /status document as it goes: its head, then each
// point as it is built, through a 64 KiB buffer, so that the many points
// of a large config (megabytes of JSON: docs/benchmarks.md, "Figures
// behind the code's choices") never stand in memory at once, as a
// document, as its points' JSON values or as their snapshots. The bytes are json.Marshal's
// of the whole document and a newline.
func (a *server) status(w http.ResponseWriter, r *http.Request) {
	var rs ReloadStatus
	if a.opts.Status != nil {
		rs = a.opts.Status()
	}
	now := a.opts.Now()
	doc := Status{
		Now:    now.UTC(),
		Build:  Build{Version: a.opts.Version, GoVersion: runtime.Version()},
		Config: statusConfig(rs),
		Events: []Event{},
		Points: []PointStatus{},
	}
	var buckets map[string]cluster.BucketStatus
	if a.opts.Cluster != nil {
		doc.Cluster, buckets = statusCluster(a.opts.Cluster(now))
	}

	since := now.Add(-History)
	forces := a.statusForces(now)
	sources := a.statusSources()
	doc.StaleCache = a.statusStaleCache(sources)
	if a.opts.Events != nil {
		doc.Events = statusEvents(a.opts.Events.Since(since), MaxEvents)
	}
	head, err := json.Marshal(doc)
	if err != nil { // cannot happen: the document holds no unsupported values
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// head ends with the empty points array, the last field: "points":[]}
	head = head[:len(head)-len("]}")]
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	out := bufio.NewWriterSize(w, 64<<10)
	out.Write(head)
	first := true
	// One point's JSON value and its encoding, reused from point to point.
	var p PointStatus
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for sn := range a.opts.Points.Snapshots(now) {
		p = statusPoint(sn)
		if a.opts.Traffic != nil {
			if t, ok := a.opts.Traffic(sn.Name, now); ok {
				p.Traffic = statusTraffic(t)
			}
		}
		p.Forced = forces[sn.Name]
		if src := sources[sn.Name]; src != nil {
			if src.Queue != nil {
				p.Queue = statusQueue(src.Queue, sn.Settings.Queue)
			}
			if len(src.Keys) > 0 {
				p.PerKey = a.statusKeys(src.Keys, now)
			}
			if src.StaleMaxAge > 0 {
				p.Stale = &Stale{MaxAge: src.StaleMaxAge.String()}
			}
		}
		if b, ok := buckets[sn.Name]; ok {
			p.Cluster = statusBucket(b)
			p.Strategies = append(p.Strategies, bucketReading(b))
		}
		p.Events = []Event{}
		if a.opts.Events != nil {
			p.Events = statusEvents(a.opts.Events.PointSince(sn.Name, since), MaxPointEvents)
		}
		body.Reset()
		enc.Encode(&p) // a point holds no unsupported values either; json.Marshal's bytes and a newline
		if !first {
			out.WriteByte(',')
		}
		first = false
		if _, err := out.Write(bytes.TrimSuffix(body.Bytes(), []byte("\n"))); err != nil {
			return // the client went away
		}
	}
	out.WriteString("]}\n")
	out.Flush()
}

func statusConfig(rs ReloadStatus) ConfigStatus {
	c := ConfigStatus{Path: rs.Path, Hash: rs.Hash, LoadedAt: statusTime(rs.LoadedAt)}
	if !rs.LastAttempt.IsZero() {
		c.LastReload = &Reload{At: statusTime(rs.LastAttempt), OK: rs.LastOK, Error: rs.LastError, Change: rs.LastChange}
	}
	return c
}

func statusPoint(sn limiter.Snapshot) PointStatus {
	s := &sn.Settings
	st := &sn.Status
	p := PointStatus{
		Name:       sn.Name,
		Mode:       "enforce",
		State:      st.State.String(),
		Strategies: make([]StrategyReading, len(st.Readings)),
		Window:     Window{Counts: statusCounts(sn.Counts), InFlight: sn.InFlight},
		Thresholds: Thresholds{
			TimeoutThreshold:       statusDuration(s.TimeoutThreshold),
			TimeoutCountThreshold:  statusThreshold(s.TimeoutCountThreshold),
			VisitThreshold:         statusThreshold(s.VisitThreshold),
			ConcurrentThreshold:    statusThreshold(s.ConcurrentThreshold),
			ExceptionThreshold:     statusThreshold(s.ExceptionThreshold),
			ExceptionRateThreshold: statusThreshold(s.ExceptionRateThreshold),
			DowngradeRate:          s.DowngradePercent(),
			DelayTime:              statusDuration(s.DelayTime),
			RetryInterval:          statusDuration(s.RetryInterval),
			PressureTestDowngrade:  s.PressureTestDowngrade,
		},
		Series: Series{BucketSeconds: sn.BucketWidth.Seconds(), Buckets: make([]Counts, len(sn.Series))},
	}
	if s.Shadow {
		p.Mode = "shadow"
	}
	if sn.Tokens >= 0 {
		tokens := sn.Tokens // a copy: a pointer into sn would move all of it to the heap
		p.Tokens = &tokens
	}
	if st.Reason.Strategy != 0 {
		p.Reason = &Reading{Strategy: st.Reason.Strategy.String(), Count: st.Reason.Count, Threshold: st.Reason.Threshold}
	}
	if st.InDelay {
		p.Delay = &Delay{Strategy: st.DelayStrategy.String(), Until: statusTime(st.DelayUntil),
			NextProbe: statusTime(st.NextProbe), Probing: st.Probing}
	}
	for i, r := range st.Readings {
		p.Strategies[i] = StrategyReading{Reading{Strategy: r.Strategy.String(), Count: r.Count, Threshold: r.Threshold}, r.Trips}
	}
	if t := sn.LastTrip; t.Strategy != 0 {
		p.LastTrip = &Trip{Strategy: t.Strategy.String(), At: statusTime(t.At), Count: t.Count, Threshold: t.Threshold,
			Window: statusCounts(t.Counts), InFlight: t.InFlight}
	}
	if _, on := s.ExceptionRateThreshold.Get(); on {
		start := s.ExceptionRateStart
		p.Thresholds.ExceptionRateStart = &start
	}
	if rate := statusThreshold(s.TokensPerSecond); rate != nil {
		p.Thresholds.TokensPerSecond = rate
		p.Thresholds.TokenBucketSize = statusThreshold(s.TokenBucketSize)
	}
	for i, c := range sn.Series {
		p.Series.Buckets[i] = statusCounts(c)
	}
	statusProtection(&p, sn)
	return p
}

// statusProtection fills the recovery ramp, the adaptive limit and the
// sheddable share of p from sn.
func statusProtection(p *PointStatus, sn limiter.Snapshot) {
	s, st := &sn.Settings, &sn.Status
	if st.Recovering {
		p.Recovery = &Recovery{Share: float64(st.RecoveryShare) / limiter.RecoveryShareWhole, Until: statusTime(st.RecoveryUntil)}
	}
	if s.RecoveryTime > 0 {
		start := s.RecoveryStartPercent()
		p.Thresholds.RecoveryTime, p.Thresholds.RecoveryStart = statusDuration(s.RecoveryTime), &start
	}
	p.Thresholds.SheddableShare = statusThreshold(s.SheddableShare)
	if a := s.AdaptiveConcurrency; a.On {
		tolerance, _ := a.Tolerance.Get()
		p.Thresholds.AdaptiveConcurrency = &AdaptiveSettings{MinLimit: a.MinLimit, MaxLimit: a.MaxLimit,
			Interval: a.Interval.String(), Tolerance: tolerance, MinLatencyInterval: a.MinLatencyInterval.String()}
		ad := sn.Adaptive
		p.Adaptive = &Adaptive{Limit: ad.Limit, Measuring: ad.Measuring, MinLatency: ad.MinLatency.Seconds(), Latency: ad.Latency.Seconds()}
	}
}

// statusSources returns the points in force, as the metrics read them,
// by name; nil without Options.Sources.
func (a *server) statusSources() map[string]*metrics.Source {
	if a.opts.Sources == nil {
		return nil
	}
	live := a.opts.Sources()
	out := make(map[string]*metrics.Source, len(live))
	for i := range live {
		out[live[i].Limiter.Name()] = &live[i]
	}
	return out
}

// statusStaleCache returns the stale cache's figures, or nil without a
// cache, or when no point in force has stale: and the cache holds nothing
// (the common case says nothing of it).
func (a *server) statusStaleCache(sources map[string]*metrics.Source) *StaleCache {
	if a.opts.Stale == nil {
		return nil
	}
	n, entries := a.opts.Stale.Stats()
	used := entries > 0
	for _, src := range sources {
		used = used || src.StaleMaxAge > 0
	}
	if !used {
		return nil
	}
	return &StaleCache{MaxBytes: a.opts.Stale.MaxBytes(), Bytes: n, Entries: entries}
}

// HeaviestKeys is the number of keys /status lists for each per-key rule.
const HeaviestKeys = 10

// statusKeys returns a point's per-key rules as JSON at now: each with
// its heaviest keys by label.
func (a *server) statusKeys(rules []metrics.KeySource, now time.Time) []KeyRule {
	out := make([]KeyRule, len(rules))
	for i, r := range rules {
		s := r.Table.Settings()
		out[i] = KeyRule{Key: r.Source, Tracked: r.Table.Len(), MaxKeys: s.MaxKeys, Heaviest: []KeyFigures{}}
		if a.opts.KeyLabel == nil {
			continue
		}
		for _, k := range r.Table.Heaviest(now, HeaviestKeys) {
			out[i].Heaviest = append(out[i].Heaviest, KeyFigures{Label: a.opts.KeyLabel(k.Key), Visits: k.Visits, InFlight: k.InFlight})
		}
	}
	return out
}

// statusQueue returns q, of settings s, as JSON: its state now and its
// settings with their defaults.
func statusQueue(q *queue.Queue, s limiter.Queue) *Queue {
	st, s := q.Status(), s.WithDefaults()
	return &Queue{Length: st.Length, Standing: st.Standing, Target: st.Target.String(),
		MaxWait: s.MaxWait.String(), Interval: s.Interval.String(), MaxLength: s.MaxLength}
}

// statusTraffic returns t as JSON: the error percentage and quantiles only
// when calls were forwarded in its span.
func statusTraffic(t metrics.Traffic) *Traffic {
	j := &Traffic{
		Seconds:                 t.Span.Seconds(),
		RequestsPerSecond:       t.RequestsPerSecond,
		DegradedPerSecond:       t.DegradedPerSecond,
		ShadowDegradedPerSecond: t.ShadowDegradedPerSecond,
	}
	if t.Calls > 0 {
		j.ErrorPercent, j.P50, j.P99 = &t.ErrorPercent, &t.P50, &t.P99
	}
	return j
}

// statusEvents returns the last max of evs as JSON, oldest first.
func statusEvents(evs []events.Event, max int) []Event {
	evs = evs[len(evs)-min(len(evs), max):]
	out := make([]Event, len(evs))
	for i, e := range evs {
		out[i] = Event{At: statusTime(e.At), Kind: string(e.Kind), Point: e.Point, Strategy: e.Strategy, Shadow: e.Shadow,
			Detail: e.Detail, Repeats: e.Repeats, Last: statusTime(e.Last)}
	}
	return out
}

func statusCounts(c limiter.Counts) Counts {
	return Counts{Visits: c.Visits, Degraded: c.Degraded, Exceptions: c.Exceptions, Timeouts: c.Timeouts}
}

// statusThreshold returns the threshold's value, or nil when it is off.
func statusThreshold(t limiter.Threshold) *int64 {
	n, on := t.Get()
	if !on {
		return nil
	}
	return &n
}

// statusDuration formats a positive duration ("250ms"), or "" for off.
func statusDuration(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}

func statusTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

//go:embed dashboard.html
var dashboardHTML []byte

// dashboardCSP allows the dashboard its own inline script and style (by
// hash) and its fetches of /status, and nothing else: no other origin, no
// injected script.
var dashboardCSP = "default-src 'none'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'" +
	"; script-src " + inlineHashes(string(dashboardHTML), "script") +
	"; style-src " + inlineHashes(string(dashboardHTML), "style")

// inlineHashes returns the CSP sources of every <tag>...</tag> block of
// page, as 'sha256-...' hashes of their text.
func inlineHashes(page, tag string) string {
	open, end := "<"+tag+">", "</"+tag+">"
	var srcs []string
	for {
		i := strings.Index(page, open)
		if i < 0 {
			break
		}
		page = page[i+len(open):]
		j := strings.Index(page, end)
		if j < 0 {
			break
		}
		sum := sha256.Sum256([]byte(page[:j]))
		srcs = append(srcs, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
		page = page[j+len(end):]
	}
	if len(srcs) == 0 {
		return "'none'"
	}
	return strings.Join(srcs, " ")
}

func serveDashboard(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	w.Write(dashboardHTML)
}

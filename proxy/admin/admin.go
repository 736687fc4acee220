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
//	GET /status   the config state and every point in force, as JSON (below).
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
//
// The /status document (application/json; field names are stable, times
// are RFC 3339 in UTC, durations are Go duration strings such as "250ms",
// latencies are seconds). The README's "State model" defines the states.
//
//	{
//	  "now": time,                         // the instant every figure was read at
//	  "build": {"version": "v1.2.3", "goVersion": "go1.26.8"},
//	  "config": {
//	    "path": "sds.yaml", "hash": "<hex sha256>",
//	    "loadedAt": time,                  // omitted when zero
//	    "lastReload": {                    // omitted when no reload was attempted
//	      "at": time, "ok": bool,
//	      "error": "...",                  // omitted when empty
//	      "change": "..."                  // what this attempt changed; omitted when empty (rejected, unchanged)
//	    }
//	  },
//	  "events": [event, ...],              // every event that happened or repeated in the last 15 minutes, oldest first by "at", at most 500
//	  "cluster": {                         // the Redis of the shared token buckets; omitted without cluster:
//	    "up": bool,                        // Redis answered the last call; false before the first
//	    "since": time,                     // when up last changed; omitted before the first call
//	    "lastError": "...",                // the last failed call's error; omitted when none failed
//	    "replicas": n, "timeout": "50ms"   // the share's divisor, the bound of each call
//	  },
//	  "points": [                          // config order; [] when none
//	    {
//	      "name": "orders.read",
//	      "mode": "enforce" | "shadow",
//	      "state": "closed" | "open" | "delay" | "shadow" | "recovering", // what the next plain request would get now
//	      "reason": {"strategy": "visit", "count": n, "threshold": n},
//	                                       // state open, or shadow outside a delay: the first strategy that would trip
//	      "delay": {"strategy": "visit", "until": time, "nextProbe": time, "probing": bool},
//	                                       // while in the delay (state delay; shadow for a shadow point);
//	                                       // nextProbe omitted without retryInterval
//	      "recovery": {"share": f, "until": time},
//	                                       // while the recovery ramp runs: the share of requests it admits
//	                                       // now (recoveryStart/100 to 1) and the ramp's end
//	      "adaptive": {"limit": n, "measuring": bool, "minLatency": f, "latency": f},
//	                                       // with adaptiveConcurrency: the limit in force, whether the minimum
//	                                       // latency is being measured (the limit is then minLimit), the last
//	                                       // measured minimum and the last interval's mean, seconds (0: none yet)
//	      "strategies": [                  // each enabled strategy, judging order; [] when none
//	        {"strategy": "visit", "count": n, "threshold": n, "trips": bool}
//	      ],
//	      "window": {"visits": n, "degraded": n, "exceptions": n, "timeouts": n, "inFlight": n},
//	      "tokens": n,                     // tokens in the bucket; omitted when the bucket is off
//	      "traffic": {                     // omitted until two samples a second apart exist
//	        "seconds": 10,                 // the span measured, up to 10
//	        "requestsPerSecond": f, "degradedPerSecond": f, "shadowDegradedPerSecond": f,
//	        "errorPercent": f,             // upstream errors per forwarded call; omitted with none forwarded
//	        "p50": f, "p99": f             // upstream latency quantiles, seconds; omitted with none forwarded
//	      },
//	      "lastTrip": {                    // omitted if the point never tripped
//	        "strategy": "visit", "at": time, "count": n, "threshold": n,
//	        "window": {"visits": n, "degraded": n, "exceptions": n, "timeouts": n},
//	        "inFlight": n                  // the window and calls in flight at the trip
//	      },
//	      "thresholds": {                  // a disabled threshold is omitted
//	        "timeoutThreshold": "250ms", "timeoutCountThreshold": n,
//	        "visitThreshold": n, "concurrentThreshold": n,
//	        "exceptionThreshold": n, "exceptionRateThreshold": n, "exceptionRateStart": n,
//	        "tokenBucketGeneratedTokensInSecond": n, "tokenBucketSize": n,
//	        "downgradeRate": n,            // always present
//	        "delayTime": "30s", "retryInterval": "2s",
//	        "pressureTestDowngrade": true, // omitted when false
//	        "recoveryTime": "10s", "recoveryStart": n,   // omitted without recoveryTime
//	        "sheddableShare": n,           // omitted when not set (default 80)
//	        "adaptiveConcurrency": {"minLimit": n, "maxLimit": n, "interval": "100ms", "tolerance": n,
//	          "minLatencyInterval": "1m0s"}  // defaults filled; omitted when off
//	      },
//	      "series": {
//	        "bucketSeconds": 1,
//	        "buckets": [{"visits": n, "degraded": n, "exceptions": n, "timeouts": n}, ...]  // oldest first
//	      },
//	      "events": [event, ...],          // this point's events that happened or repeated in the last 15 minutes, oldest first by "at", at most 50
//	      "cluster": {                     // the point's shared token bucket; omitted without clusterTokenBucket
//	        "shared": bool,                // true: requests spend Redis's lease; false: the local share
//	        "tokensPerSecond": n, "size": n,
//	        "level": n, "levelAt": time,   // the shared bucket's level at Redis's last answer (below 0 by
//	                                       // tokens spent on credit); levelAt omitted before the first
//	        "lease": n, "credit": n,       // tokens in hand (below 0 by credit spent), credit allowed
//	        "share": x, "replicasHeard": n, // this proxy's fair share (tokens a second) and the proxies
//	                                       // Redis heard from in the last 3 s, at its last answer (0 before)
//	        "localTokens": n, "localSize": n  // the local share: tokensPerSecond / replicas per second
//	      },
//	                                       // and in "strategies", after the limiter's: {"strategy":
//	                                       // "cluster_token_bucket", "count": size - level (shared) or
//	                                       // localSize - localTokens (local), "threshold": size or localSize,
//	                                       // "trips": no token for this proxy now}
//	      "forced": {"action": "degrade" | "pass", "reason": "...", "since": time, "until": time}
//	                                       // an operator's switch in force; omitted when none. While it is,
//	                                       // state and strategies are still the limiter's: what requests get
//	                                       // once it ends
//	    }
//	  ]
//	}
//
// An event is
//
//	{"at": time, "kind": "trip" | "recover" | "delay_start" | "delay_end" | "probe" | "probe_failed" | "reload" | "reload_rejected" |
//	       "force" | "force_end",  // force: "degrade for 10m0s: <reason>"; force_end: "<action> ended: <cause>"
//	 "point": "orders.read",   // omitted for reloads
//	 "strategy": "visit",      // trip, delay_start, probe, probe_failed
//	 "shadow": true,           // omitted when false: an event of a shadow point, nothing was degraded
//	 "detail": "visit 21 > 20",
//	 "repeats": n, "last": time}  // later occurrences folded into this event and when the last was; omitted when 0
//
// A point's trip, recovery, delay start or end, probe or failed probe
// folds into its latest event of the same kind, strategy and shadow (and
// but for a trip the same detail) when that last happened within 1m
// (events.FoldWithin), or whenever it did while the history holds only
// events of the last 15 minutes: "at" and "detail" stay the first
// occurrence's. A point's recovery enters the history 2s after it
// happened, unless the point trips again meanwhile (the trip then folds
// into the trip before, and the recovery is dropped).
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
	doc := statusDoc{
		Now:    now.UTC(),
		Build:  buildJSON{Version: a.opts.Version, GoVersion: runtime.Version()},
		Config: statusConfig(rs),
		Events: []eventJSON{},
		Points: []pointJSON{},
	}
	var buckets map[string]cluster.BucketStatus
	if a.opts.Cluster != nil {
		doc.Cluster, buckets = statusCluster(a.opts.Cluster(now))
	}
	since := now.Add(-History)
	forces := a.statusForces(now)
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
	var p pointJSON
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
		if b, ok := buckets[sn.Name]; ok {
			p.Cluster = statusBucket(b)
			p.Strategies = append(p.Strategies, bucketReading(b))
		}
		p.Events = []eventJSON{}
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

// The /status document; see New for its shape.
type (
	statusDoc struct {
		Now     time.Time    `json:"now"`
		Build   buildJSON    `json:"build"`
		Config  configDoc    `json:"config"`
		Events  []eventJSON  `json:"events"`
		Cluster *clusterJSON `json:"cluster,omitempty"`
		Points  []pointJSON  `json:"points"`
	}
	buildJSON struct {
		Version   string `json:"version"`
		GoVersion string `json:"goVersion"`
	}
	eventJSON struct {
		At       time.Time `json:"at"`
		Kind     string    `json:"kind"`
		Point    string    `json:"point,omitempty"`
		Strategy string    `json:"strategy,omitempty"`
		Shadow   bool      `json:"shadow,omitempty"`
		Detail   string    `json:"detail,omitempty"`
		Repeats  int       `json:"repeats,omitempty"`
		Last     time.Time `json:"last,omitzero"`
	}
	configDoc struct {
		Path       string      `json:"path"`
		Hash       string      `json:"hash"`
		LoadedAt   time.Time   `json:"loadedAt,omitzero"`
		LastReload *reloadJSON `json:"lastReload,omitempty"`
	}
	reloadJSON struct {
		At     time.Time `json:"at"`
		OK     bool      `json:"ok"`
		Error  string    `json:"error,omitempty"`
		Change string    `json:"change,omitempty"`
	}
	pointJSON struct {
		Name       string         `json:"name"`
		Mode       string         `json:"mode"`
		State      string         `json:"state"`
		Reason     *readingJSON   `json:"reason,omitempty"`
		Delay      *delayJSON     `json:"delay,omitempty"`
		Recovery   *recoveryJSON  `json:"recovery,omitempty"`
		Adaptive   *adaptiveJSON  `json:"adaptive,omitempty"`
		Strategies []readingJSON  `json:"strategies"`
		Window     windowJSON     `json:"window"`
		Tokens     *int64         `json:"tokens,omitempty"`
		Traffic    *trafficJSON   `json:"traffic,omitempty"`
		LastTrip   *tripJSON      `json:"lastTrip,omitempty"`
		Thresholds thresholdsJSON `json:"thresholds"`
		Series     seriesJSON     `json:"series"`
		Events     []eventJSON    `json:"events"`
		Forced     *forcedJSON    `json:"forced,omitempty"`
		Cluster    *bucketJSON    `json:"cluster,omitempty"`
	}
	readingJSON struct {
		Strategy  string `json:"strategy"`
		Count     int64  `json:"count"`
		Threshold int64  `json:"threshold"`
		Trips     *bool  `json:"trips,omitempty"` // in strategies, not in reason
	}
	trafficJSON struct {
		Seconds                 float64  `json:"seconds"`
		RequestsPerSecond       float64  `json:"requestsPerSecond"`
		DegradedPerSecond       float64  `json:"degradedPerSecond"`
		ShadowDegradedPerSecond float64  `json:"shadowDegradedPerSecond"`
		ErrorPercent            *float64 `json:"errorPercent,omitempty"`
		P50                     *float64 `json:"p50,omitempty"`
		P99                     *float64 `json:"p99,omitempty"`
	}
	windowJSON struct {
		countsJSON
		InFlight int64 `json:"inFlight"`
	}
	countsJSON struct {
		Visits     int64 `json:"visits"`
		Degraded   int64 `json:"degraded"`
		Exceptions int64 `json:"exceptions"`
		Timeouts   int64 `json:"timeouts"`
	}
	delayJSON struct {
		Strategy  string    `json:"strategy"`
		Until     time.Time `json:"until"`
		NextProbe time.Time `json:"nextProbe,omitzero"`
		Probing   bool      `json:"probing"`
	}
	recoveryJSON struct {
		Share float64   `json:"share"`
		Until time.Time `json:"until"`
	}
	adaptiveJSON struct {
		Limit      int64   `json:"limit"`
		Measuring  bool    `json:"measuring"`
		MinLatency float64 `json:"minLatency"`
		Latency    float64 `json:"latency"`
	}
	adaptiveSettingsJSON struct {
		MinLimit           int64  `json:"minLimit"`
		MaxLimit           int64  `json:"maxLimit"`
		Interval           string `json:"interval"`
		Tolerance          int64  `json:"tolerance"`
		MinLatencyInterval string `json:"minLatencyInterval"`
	}
	tripJSON struct {
		Strategy  string     `json:"strategy"`
		At        time.Time  `json:"at"`
		Count     int64      `json:"count"`
		Threshold int64      `json:"threshold"`
		Window    countsJSON `json:"window"`
		InFlight  int64      `json:"inFlight"`
	}
	thresholdsJSON struct {
		TimeoutThreshold       string `json:"timeoutThreshold,omitempty"`
		TimeoutCountThreshold  *int64 `json:"timeoutCountThreshold,omitempty"`
		VisitThreshold         *int64 `json:"visitThreshold,omitempty"`
		ConcurrentThreshold    *int64 `json:"concurrentThreshold,omitempty"`
		ExceptionThreshold     *int64 `json:"exceptionThreshold,omitempty"`
		ExceptionRateThreshold *int64 `json:"exceptionRateThreshold,omitempty"`
		ExceptionRateStart     *int64 `json:"exceptionRateStart,omitempty"`
		TokensPerSecond        *int64 `json:"tokenBucketGeneratedTokensInSecond,omitempty"`
		TokenBucketSize        *int64 `json:"tokenBucketSize,omitempty"`
		DowngradeRate          int    `json:"downgradeRate"`
		DelayTime              string `json:"delayTime,omitempty"`
		RetryInterval          string `json:"retryInterval,omitempty"`
		PressureTestDowngrade  bool   `json:"pressureTestDowngrade,omitempty"`
		RecoveryTime           string `json:"recoveryTime,omitempty"`
		RecoveryStart          *int64 `json:"recoveryStart,omitempty"`
		SheddableShare         *int64 `json:"sheddableShare,omitempty"`

		AdaptiveConcurrency *adaptiveSettingsJSON `json:"adaptiveConcurrency,omitempty"`
	}
	seriesJSON struct {
		BucketSeconds float64      `json:"bucketSeconds"`
		Buckets       []countsJSON `json:"buckets"`
	}
)

func statusConfig(rs ReloadStatus) configDoc {
	c := configDoc{Path: rs.Path, Hash: rs.Hash, LoadedAt: statusTime(rs.LoadedAt)}
	if !rs.LastAttempt.IsZero() {
		c.LastReload = &reloadJSON{At: statusTime(rs.LastAttempt), OK: rs.LastOK, Error: rs.LastError, Change: rs.LastChange}
	}
	return c
}

func statusPoint(sn limiter.Snapshot) pointJSON {
	s := &sn.Settings
	st := &sn.Status
	p := pointJSON{
		Name:       sn.Name,
		Mode:       "enforce",
		State:      st.State.String(),
		Strategies: make([]readingJSON, len(st.Readings)),
		Window:     windowJSON{countsJSON: statusCounts(sn.Counts), InFlight: sn.InFlight},
		Thresholds: thresholdsJSON{
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
		Series: seriesJSON{BucketSeconds: sn.BucketWidth.Seconds(), Buckets: make([]countsJSON, len(sn.Series))},
	}
	if s.Shadow {
		p.Mode = "shadow"
	}
	if sn.Tokens >= 0 {
		tokens := sn.Tokens // a copy: a pointer into sn would move all of it to the heap
		p.Tokens = &tokens
	}
	if st.Reason.Strategy != 0 {
		p.Reason = &readingJSON{Strategy: st.Reason.Strategy.String(), Count: st.Reason.Count, Threshold: st.Reason.Threshold}
	}
	if st.InDelay {
		p.Delay = &delayJSON{Strategy: st.DelayStrategy.String(), Until: statusTime(st.DelayUntil),
			NextProbe: statusTime(st.NextProbe), Probing: st.Probing}
	}
	for i, r := range st.Readings {
		trips := r.Trips
		p.Strategies[i] = readingJSON{Strategy: r.Strategy.String(), Count: r.Count, Threshold: r.Threshold, Trips: &trips}
	}
	if t := sn.LastTrip; t.Strategy != 0 {
		p.LastTrip = &tripJSON{Strategy: t.Strategy.String(), At: statusTime(t.At), Count: t.Count, Threshold: t.Threshold,
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
func statusProtection(p *pointJSON, sn limiter.Snapshot) {
	s, st := &sn.Settings, &sn.Status
	if st.Recovering {
		p.Recovery = &recoveryJSON{Share: float64(st.RecoveryShare) / limiter.RecoveryShareWhole, Until: statusTime(st.RecoveryUntil)}
	}
	if s.RecoveryTime > 0 {
		start := s.RecoveryStartPercent()
		p.Thresholds.RecoveryTime, p.Thresholds.RecoveryStart = statusDuration(s.RecoveryTime), &start
	}
	p.Thresholds.SheddableShare = statusThreshold(s.SheddableShare)
	if a := s.AdaptiveConcurrency; a.On {
		tolerance, _ := a.Tolerance.Get()
		p.Thresholds.AdaptiveConcurrency = &adaptiveSettingsJSON{MinLimit: a.MinLimit, MaxLimit: a.MaxLimit,
			Interval: a.Interval.String(), Tolerance: tolerance, MinLatencyInterval: a.MinLatencyInterval.String()}
		ad := sn.Adaptive
		p.Adaptive = &adaptiveJSON{Limit: ad.Limit, Measuring: ad.Measuring, MinLatency: ad.MinLatency.Seconds(), Latency: ad.Latency.Seconds()}
	}
}

// statusTraffic returns t as JSON: the error percentage and quantiles only
// when calls were forwarded in its span.
func statusTraffic(t metrics.Traffic) *trafficJSON {
	j := &trafficJSON{
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
func statusEvents(evs []events.Event, max int) []eventJSON {
	evs = evs[len(evs)-min(len(evs), max):]
	out := make([]eventJSON, len(evs))
	for i, e := range evs {
		out[i] = eventJSON{At: statusTime(e.At), Kind: string(e.Kind), Point: e.Point, Strategy: e.Strategy, Shadow: e.Shadow,
			Detail: e.Detail, Repeats: e.Repeats, Last: statusTime(e.Last)}
	}
	return out
}

func statusCounts(c limiter.Counts) countsJSON {
	return countsJSON{Visits: c.Visits, Degraded: c.Degraded, Exceptions: c.Exceptions, Timeouts: c.Timeouts}
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

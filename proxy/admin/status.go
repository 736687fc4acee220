package admin

import "time"

// Status is the /status document (application/json): GET /status writes
// it, and `sds-proxy status`, the dashboard's tests and the end-to-end
// tests read it. These types are its one definition; docs/admin.md points
// here. Field names are stable. Times are RFC 3339 in UTC; durations are
// Go duration strings such as "250ms"; latencies are seconds, as float64.
// docs/semantics.md, "State model", defines the states. A reader should
// ignore fields it does not know (encoding/json does), so that a newer
// proxy's document still reads.
type Status struct {
	// Now is the instant every figure in the document was read at.
	Now time.Time `json:"now"`
	// Build is the proxy's build.
	Build Build `json:"build"`
	// Config is the config in force and the last reload attempt.
	Config ConfigStatus `json:"config"`
	// Events are the events that happened or repeated in the last
	// History, oldest first by At, at most MaxEvents of them; [] when
	// none.
	Events []Event `json:"events"`
	// Cluster is the Redis of the shared token buckets; nil (omitted)
	// without cluster:.
	Cluster *Cluster `json:"cluster,omitempty"`
	// StaleCache is the memory the points' kept answers share; nil
	// (omitted) without Options.Stale, or when no point in force has
	// stale: and no answer is kept.
	StaleCache *StaleCache `json:"staleCache,omitempty"`
	// Points are the points in force, in config order; [] when none. It
	// is the last field: the handler streams the points after the rest.
	Points []PointStatus `json:"points"`
}

// Build is the proxy's build, as /status shows it.
type Build struct {
	// Version is the version stamped at build time, or the module's
	// version, or "dev" (Options.Version).
	Version string `json:"version"`
	// GoVersion is the Go release that built the binary, such as
	// "go1.26.8".
	GoVersion string `json:"goVersion"`
}

// ConfigStatus is the config in force and the last reload attempt.
type ConfigStatus struct {
	// Path is the config file; "" when the proxy runs from -upstream
	// alone.
	Path string `json:"path"`
	// Hash is the hex sha256 of the file in force; "" without a file.
	Hash string `json:"hash"`
	// LoadedAt is when the config in force was applied; omitted when zero.
	LoadedAt time.Time `json:"loadedAt,omitzero"`
	// LastReload is the last reload attempt, applied or rejected; nil
	// (omitted) when none was attempted.
	LastReload *Reload `json:"lastReload,omitempty"`
}

// Reload is one reload attempt of the config file.
type Reload struct {
	// At is when the attempt was made.
	At time.Time `json:"at"`
	// OK is true when the attempt was applied (or found the file
	// unchanged), false when it was rejected.
	OK bool `json:"ok"`
	// Error is why a rejected attempt was rejected; omitted when empty.
	Error string `json:"error,omitempty"`
	// Change says what this attempt changed; omitted when it was rejected
	// or changed nothing. It is never an earlier reload's change.
	Change string `json:"change,omitempty"`
}

// Event is an event of the history (docs/admin.md, "The event history",
// says how repeats fold).
type Event struct {
	// At is when the event first happened; an event with repeats may be
	// older than History.
	At time.Time `json:"at"`
	// Kind is one of trip, recover, delay_start, delay_end, probe,
	// probe_failed, reload, reload_rejected, force and force_end.
	Kind string `json:"kind"`
	// Point is the point's name; omitted for reloads.
	Point string `json:"point,omitempty"`
	// Strategy is the strategy of a trip, delay_start, probe or
	// probe_failed; omitted otherwise.
	Strategy string `json:"strategy,omitempty"`
	// Shadow is true for an event of a shadow point, which degraded
	// nothing; omitted when false.
	Shadow bool `json:"shadow,omitempty"`
	// Detail is the first occurrence's text, such as "visit 21 > 20";
	// force: "degrade for 10m0s: REASON"; force_end: "ACTION ended:
	// CAUSE". Omitted when empty.
	Detail string `json:"detail,omitempty"`
	// Repeats counts the later occurrences folded into the event; omitted
	// when 0.
	Repeats int `json:"repeats,omitempty"`
	// Last is when the last repeat happened; omitted (zero) without
	// repeats.
	Last time.Time `json:"last,omitzero"`
}

// PointStatus is one point in force, read at Status.Now.
type PointStatus struct {
	// Name is the point's name in the config.
	Name string `json:"name"`
	// Mode is "enforce" or "shadow".
	Mode string `json:"mode"`
	// State is what the next plain request would get now: "closed",
	// "open", "delay", "shadow" or "recovering".
	State string `json:"state"`
	// Reason is the first strategy that would trip, in state open, or for
	// a shadow point outside a delay; nil (omitted) otherwise.
	Reason *Reading `json:"reason,omitempty"`
	// Delay is the delay the point is in (state delay; shadow for a
	// shadow point); nil (omitted) outside one.
	Delay *Delay `json:"delay,omitempty"`
	// Recovery is the recovery ramp while it runs; nil (omitted)
	// otherwise.
	Recovery *Recovery `json:"recovery,omitempty"`
	// Adaptive is the adaptive concurrency limit; nil (omitted) without
	// adaptiveConcurrency.
	Adaptive *Adaptive `json:"adaptive,omitempty"`
	// Queue is the point's queue at its limit; nil (omitted) without
	// queue.
	Queue *Queue `json:"queue,omitempty"`
	// PerKey are the point's per-key rules in judging order; nil
	// (omitted) without perKey.
	PerKey []KeyRule `json:"perKey,omitempty"`
	// Stale is the point's stale: setting; nil (omitted) without one.
	Stale *Stale `json:"stale,omitempty"`
	// Strategies are the enabled strategies in judging order, then the
	// shared token bucket's ("cluster_token_bucket", see Cluster); []
	// when none.
	Strategies []StrategyReading `json:"strategies"`
	// Window is the sliding window's counts and the calls in flight.
	Window Window `json:"window"`
	// Tokens is the tokens in the bucket; nil (omitted) when the token
	// bucket is off.
	Tokens *int64 `json:"tokens,omitempty"`
	// Traffic is the recent traffic; nil (omitted) until two samples a
	// second apart exist.
	Traffic *Traffic `json:"traffic,omitempty"`
	// LastTrip is the point's last trip; nil (omitted) if it never
	// tripped.
	LastTrip *Trip `json:"lastTrip,omitempty"`
	// Thresholds are the settings in force.
	Thresholds Thresholds `json:"thresholds"`
	// Series is the window bucket by bucket.
	Series Series `json:"series"`
	// Events are this point's events that happened or repeated in the
	// last History, oldest first by At, at most MaxPointEvents; [] when
	// none.
	Events []Event `json:"events"`
	// Forced is an operator's switch in force; nil (omitted) when none.
	// While it is, State and Strategies are still the limiter's: what
	// requests get once it ends.
	Forced *Switch `json:"forced,omitempty"`
	// Cluster is the point's shared token bucket; nil (omitted) without
	// clusterTokenBucket.
	Cluster *ClusterBucket `json:"cluster,omitempty"`
}

// Reading is a strategy's count against its threshold.
type Reading struct {
	// Strategy is the strategy's name, such as "visit".
	Strategy string `json:"strategy"`
	// Count is what the strategy judges: visits, exceptions, a percentage,
	// calls in flight or tokens used, in its threshold's unit.
	Count int64 `json:"count"`
	// Threshold is the strategy's threshold.
	Threshold int64 `json:"threshold"`
}

// StrategyReading is an enabled strategy's reading in
// PointStatus.Strategies.
type StrategyReading struct {
	Reading
	// Trips is true when the strategy would trip now.
	Trips bool `json:"trips"`
}

// Counts are a window's (or a bucket's) requests.
type Counts struct {
	// Visits counts the requests, degraded ones included.
	Visits int64 `json:"visits"`
	// Degraded counts the requests answered by the fallback.
	Degraded int64 `json:"degraded"`
	// Exceptions counts the upstream calls that failed.
	Exceptions int64 `json:"exceptions"`
	// Timeouts counts the upstream calls slower than timeoutThreshold.
	Timeouts int64 `json:"timeouts"`
}

// Window is the sliding window's counts and the calls in flight.
type Window struct {
	Counts
	// InFlight is the calls in flight now.
	InFlight int64 `json:"inFlight"`
}

// Delay is a point's delay after a trip.
type Delay struct {
	// Strategy is the strategy whose trip started the delay.
	Strategy string `json:"strategy"`
	// Until is when the delay ends.
	Until time.Time `json:"until"`
	// NextProbe is when the next probe may pass; omitted (zero) without
	// retryInterval.
	NextProbe time.Time `json:"nextProbe,omitzero"`
	// Probing is true while a probe is in flight.
	Probing bool `json:"probing"`
}

// Recovery is the recovery ramp after a delay.
type Recovery struct {
	// Share is the share of requests the ramp admits now, from
	// recoveryStart/100 to 1.
	Share float64 `json:"share"`
	// Until is when the ramp ends and every request is admitted.
	Until time.Time `json:"until"`
}

// Adaptive is a point's adaptive concurrency limit.
type Adaptive struct {
	// Limit is the limit in force, in calls.
	Limit int64 `json:"limit"`
	// Measuring is true while the minimum latency is being measured; the
	// limit is then minLimit.
	Measuring bool `json:"measuring"`
	// MinLatency is the last measured minimum latency, in seconds; 0 when
	// none yet.
	MinLatency float64 `json:"minLatency"`
	// Latency is the last interval's mean latency, in seconds; 0 when
	// none yet.
	Latency float64 `json:"latency"`
}

// Queue is a point's queue at its limit (queue: in sds.yaml), read at
// Status.Now, with its settings in force, defaults filled.
type Queue struct {
	// Length is the number of requests waiting now.
	Length int `json:"length"`
	// Standing is true while the requests of a priority stand (package
	// proxy/queue says when they start and stop): those are then served
	// newest first, and, but critical ones, shed once they waited longer
	// than Target.
	Standing bool `json:"standing"`
	// Target is the target in force, a duration: the setting, or, without
	// one, the one that follows the upstream's mean time.
	Target string `json:"target"`
	// MaxWait is the longest a request waits, a duration.
	MaxWait string `json:"maxWait"`
	// Interval is how long a priority's oldest request waits past Target
	// before that priority's requests stand, a duration.
	Interval string `json:"interval"`
	// MaxLength is the most requests waiting at once.
	MaxLength int64 `json:"maxLength"`
}

// StaleCache is the memory the points' kept answers share (staleCache:
// in sds.yaml), read at Status.Now.
type StaleCache struct {
	// MaxBytes is the bound in force, in bytes; 0: no answer is kept.
	MaxBytes int64 `json:"maxBytes"`
	// Bytes is what the kept answers count for now, in bytes, at most
	// MaxBytes.
	Bytes int64 `json:"bytes"`
	// Entries is the number of kept answers.
	Entries int `json:"entries"`
}

// Stale is a point's stale: setting.
type Stale struct {
	// MaxAge is the oldest a kept answer may be when served, a duration.
	MaxAge string `json:"maxAge"`
}

// KeyRule is a per-key rule of a point (perKey: in sds.yaml), read at
// Status.Now. No raw key ever appears: keys are shown by label.
type KeyRule struct {
	// Key is where the rule's key is, as sds.yaml writes it
	// (header:X-Api-Key).
	Key string `json:"key"`
	// Tracked is the number of keys tracked exactly now, at most MaxKeys;
	// the others share the rule's fixed-size sketch.
	Tracked int `json:"tracked"`
	// MaxKeys is the setting in force, its default filled.
	MaxKeys int `json:"maxKeys"`
	// Heaviest are up to HeaviestKeys keys tracked exactly with the most
	// admitted requests in the window, most first; [] when none.
	Heaviest []KeyFigures `json:"heaviest"`
}

// KeyFigures are one key's figures in a per-key rule.
type KeyFigures struct {
	// Label is the key's label, as Sds-Degraded's key= shows it: a short
	// keyed hash, never the key.
	Label string `json:"label"`
	// Visits are the key's admitted requests in the window.
	Visits int64 `json:"visits"`
	// InFlight are its requests in flight (counted with
	// concurrentThreshold on; 0 otherwise).
	InFlight int64 `json:"inFlight"`
}

// Traffic is a point's traffic over the last Seconds.
type Traffic struct {
	// Seconds is the span measured: more than 0, up to 10.
	Seconds float64 `json:"seconds"`
	// RequestsPerSecond counts every request: proxied, degraded and
	// shadow-degraded.
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	// DegradedPerSecond counts the requests answered by the fallback.
	DegradedPerSecond float64 `json:"degradedPerSecond"`
	// ShadowDegradedPerSecond counts the requests a shadow point forwarded
	// that it would have degraded.
	ShadowDegradedPerSecond float64 `json:"shadowDegradedPerSecond"`
	// ErrorPercent is upstream errors per forwarded call, 0 to 100; nil
	// (omitted) when no call was forwarded in the span.
	ErrorPercent *float64 `json:"errorPercent,omitempty"`
	// P50 and P99 are the upstream latency's quantiles, in seconds; nil
	// (omitted) when no call was forwarded in the span.
	P50 *float64 `json:"p50,omitempty"`
	P99 *float64 `json:"p99,omitempty"`
}

// Trip is a point's last trip.
type Trip struct {
	// Strategy is the strategy that tripped.
	Strategy string `json:"strategy"`
	// At is when it tripped.
	At time.Time `json:"at"`
	// Count and Threshold are the strategy's reading at the trip.
	Count     int64 `json:"count"`
	Threshold int64 `json:"threshold"`
	// Window is the window's counts at the trip.
	Window Counts `json:"window"`
	// InFlight is the calls in flight at the trip.
	InFlight int64 `json:"inFlight"`
}

// Thresholds are a point's settings in force, named as in sds.yaml. A
// disabled threshold is omitted (nil or "").
type Thresholds struct {
	TimeoutThreshold       string `json:"timeoutThreshold,omitempty"` // a duration
	TimeoutCountThreshold  *int64 `json:"timeoutCountThreshold,omitempty"`
	VisitThreshold         *int64 `json:"visitThreshold,omitempty"`
	ConcurrentThreshold    *int64 `json:"concurrentThreshold,omitempty"`
	ExceptionThreshold     *int64 `json:"exceptionThreshold,omitempty"`
	ExceptionRateThreshold *int64 `json:"exceptionRateThreshold,omitempty"` // percent
	// ExceptionRateStart is present whenever exceptionRateThreshold is.
	ExceptionRateStart *int64 `json:"exceptionRateStart,omitempty"`
	TokensPerSecond    *int64 `json:"tokenBucketGeneratedTokensInSecond,omitempty"`
	// TokenBucketSize is present whenever the token bucket is on.
	TokenBucketSize *int64 `json:"tokenBucketSize,omitempty"`
	// DowngradeRate is the percent of tripped requests degraded, 0 to
	// 100; always present.
	DowngradeRate int    `json:"downgradeRate"`
	DelayTime     string `json:"delayTime,omitempty"`     // a duration
	RetryInterval string `json:"retryInterval,omitempty"` // a duration
	// PressureTestDowngrade is omitted when false.
	PressureTestDowngrade bool `json:"pressureTestDowngrade,omitempty"`
	// RecoveryTime (a duration) and RecoveryStart (percent) are omitted
	// without recoveryTime.
	RecoveryTime  string `json:"recoveryTime,omitempty"`
	RecoveryStart *int64 `json:"recoveryStart,omitempty"`
	// SheddableShare is omitted when not set (its default is 80).
	SheddableShare *int64 `json:"sheddableShare,omitempty"`
	// AdaptiveConcurrency is omitted when off; its defaults are filled.
	AdaptiveConcurrency *AdaptiveSettings `json:"adaptiveConcurrency,omitempty"`
}

// AdaptiveSettings are adaptiveConcurrency's settings, defaults filled.
type AdaptiveSettings struct {
	MinLimit           int64  `json:"minLimit"`
	MaxLimit           int64  `json:"maxLimit"`
	Interval           string `json:"interval"` // a duration
	Tolerance          int64  `json:"tolerance"`
	MinLatencyInterval string `json:"minLatencyInterval"` // a duration
}

// Series is the window bucket by bucket.
type Series struct {
	// BucketSeconds is each bucket's width, in seconds.
	BucketSeconds float64 `json:"bucketSeconds"`
	// Buckets are the window's buckets, oldest first.
	Buckets []Counts `json:"buckets"`
}

// Switch is an operator's switch, as /status shows it (PointStatus.Forced)
// and as the force endpoints answer it.
type Switch struct {
	// Point is the point's name: in the force endpoints' answer only,
	// omitted in /status.
	Point string `json:"point,omitempty"`
	// Action is "degrade" or "pass".
	Action string `json:"action"`
	// Reason is the operator's reason, one line.
	Reason string `json:"reason"`
	// Since is when the switch was set.
	Since time.Time `json:"since"`
	// Until is when it ends; once cleared (DELETE), when it was cleared.
	Until time.Time `json:"until"`
}

// Cluster is the Redis of the shared token buckets, as this proxy sees it.
type Cluster struct {
	// Up is true when Redis answered the last call; false before the
	// first.
	Up bool `json:"up"`
	// Since is when Up last changed; omitted (zero) before the first call.
	Since time.Time `json:"since,omitzero"`
	// LastError is the last failed call's error; omitted when none failed.
	LastError string `json:"lastError,omitempty"`
	// Replicas is the divisor of each point's local share while Redis is
	// down.
	Replicas int64 `json:"replicas"`
	// Timeout bounds each call to Redis, a duration.
	Timeout string `json:"timeout"`
}

// ClusterBucket is a point's shared token bucket. Its reading also ends
// PointStatus.Strategies as "cluster_token_bucket": while shared, the
// count is Size less the level (at least 0) against Size; on the local
// share, LocalSize less LocalTokens against LocalSize; it trips when this
// proxy has no token now.
type ClusterBucket struct {
	// Shared is true while requests spend Redis's lease, false while they
	// spend the local share.
	Shared bool `json:"shared"`
	// TokensPerSecond and Size are the bucket's settings.
	TokensPerSecond int64 `json:"tokensPerSecond"`
	Size            int64 `json:"size"`
	// Level is the shared bucket's level at Redis's last answer, below 0
	// by tokens spent on credit.
	Level int64 `json:"level"`
	// LevelAt is when Level was read; omitted (zero) before the first
	// answer.
	LevelAt time.Time `json:"levelAt,omitzero"`
	// Lease is the tokens in hand, below 0 by credit spent.
	Lease int64 `json:"lease"`
	// Credit is the credit allowed, in tokens.
	Credit int64 `json:"credit"`
	// Share is this proxy's fair share, in tokens a second.
	Share float64 `json:"share"`
	// ReplicasHeard is the proxies Redis heard from in the last 3 s, at
	// its last answer; 0 before.
	ReplicasHeard int64 `json:"replicasHeard"`
	// LocalTokens and LocalSize are the local share's bucket:
	// tokensPerSecond / replicas a second.
	LocalTokens int64 `json:"localTokens"`
	LocalSize   int64 `json:"localSize"`
}

package limiter

// Strategy names the rule that degraded (or would have degraded) a request.
// The zero Strategy means none.
type Strategy uint8

// The strategies, in the order a request is judged: a point's per-key
// rules first (KeyVisit to KeyConcurrent), then Enter's, PressureTest
// first.
const (
	// KeyVisit, KeyTokenBucket and KeyConcurrent: a per-key rule of the
	// point (limiter/perkey) held the request's key to its visits in the
	// window, its token bucket or its calls in flight. The proxy judges
	// them before Enter, which never returns them; a request they degrade
	// is counted on the point by Refuse.
	KeyVisit Strategy = iota + 1
	KeyTokenBucket
	KeyConcurrent
	PressureTest
	// Recovery: the point is in its recovery ramp (Policy.RecoveryTime),
	// and either the request is beyond the share the ramp admits now, or
	// a call failed during the ramp (which trips the point again).
	Recovery
	Visit
	TokenBucket
	Concurrent
	// Adaptive: the calls in flight are above the adaptive concurrency
	// limit (Policy.AdaptiveConcurrency).
	Adaptive
	Timeout
	Exception
	ExceptionRate
	// ClusterTokenBucket: the point's token bucket shared by every proxy
	// through Redis had no token: Request.Gate, judged by Enter after the
	// point's own strategies admitted the request (proxy/cluster).
	ClusterTokenBucket
)

var strategyNames = [...]string{
	KeyVisit:           "key_visit",
	KeyTokenBucket:     "key_token_bucket",
	KeyConcurrent:      "key_concurrent",
	PressureTest:       "pressure_test",
	Recovery:           "recovery",
	Visit:              "visit",
	TokenBucket:        "token_bucket",
	Concurrent:         "concurrent",
	Adaptive:           "adaptive_concurrency",
	Timeout:            "timeout",
	Exception:          "exception",
	ExceptionRate:      "exception_rate",
	ClusterTokenBucket: "cluster_token_bucket",
}

// PerKey reports whether s is a per-key rule's strategy: KeyVisit,
// KeyTokenBucket or KeyConcurrent.
func (s Strategy) PerKey() bool { return s >= KeyVisit && s <= KeyConcurrent }

// LastStrategy is the highest Strategy: strategies are numbered 1 to
// LastStrategy in judging order, so an array of LastStrategy+1 elements is
// indexed by Strategy.
const LastStrategy = ClusterTokenBucket

// String returns the strategy's name as used in headers, logs and metrics
// ("visit", "token_bucket", ...), or "" for the zero Strategy.
func (s Strategy) String() string {
	if int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return ""
}

// State is a point's state as shown to operators: what the next plain
// request would get (docs/semantics.md, State model). The zero State is unknown.
type State uint8

const (
	// Closed: every strategy passes; the next request is forwarded.
	Closed State = iota + 1
	// Open: a strategy would degrade the next request (subject to
	// DowngradePercent's draw).
	Open
	// Delay: the point is inside its delay; requests are degraded but for
	// probes.
	Delay
	// Shadow: a shadow point whose next request would be degraded, by a
	// strategy or by its delay, were it enforcing; it is forwarded.
	Shadow
	// Recovering: every strategy passes, and the point is in its recovery
	// ramp (Policy.RecoveryTime): it forwards only a share of its requests,
	// growing to all at the ramp's end (Status.RecoveryShare and
	// RecoveryUntil), and degrades the rest as recovery.
	Recovering
)

// String returns "closed", "open", "delay", "shadow" or "recovering".
func (s State) String() string {
	switch s {
	case Recovering:
		return "recovering"
	case Closed:
		return "closed"
	case Open:
		return "open"
	case Delay:
		return "delay"
	case Shadow:
		return "shadow"
	}
	return ""
}

// Events reports the state changes a call to Enter or Exit caused, so that
// the caller can log each once. The zero Events means no change.
type Events uint8

const (
	// EventTripped: the point went from closed to tripped.
	EventTripped Events = 1 << iota
	// EventRecovered: the point went from tripped back to closed.
	EventRecovered
	// EventDelayStarted: a trip started the point's delay.
	EventDelayStarted
	// EventDelayEnded: the delay ended, by time or by a good probe; the
	// window was cleared.
	EventDelayEnded
)

// Has reports whether every event of e2 is in e.
func (e Events) Has(e2 Events) bool { return e&e2 == e2 }

// Outcome is how a forwarded call ended. The zero Outcome is treated as OK.
type Outcome uint8

const (
	// OK: the service answered without an exception.
	OK Outcome = iota + 1
	// Failed: an exception (transport error, passed upstream timeout, 5xx).
	Failed
	// Canceled: the client went away. Not an exception; a timeout that had
	// already passed still counts.
	Canceled
)

// Priority is a request's priority, from its route (docs/protections.md, Priority
// shedding). The zero Priority is treated as PriorityDefault.
type Priority uint8

const (
	// PriorityCritical requests use every count threshold in full, are
	// admitted first during a recovery ramp, and are not among the tripped
	// requests a DowngradeRate below 100 degrades.
	PriorityCritical Priority = iota + 1
	// PriorityDefault requests are judged as the README's Semantics say.
	PriorityDefault
	// PrioritySheddable requests may use only Policy.SheddableShare percent
	// of each count threshold (visit, token bucket, concurrent, the
	// adaptive limit), so that they are degraded first.
	PrioritySheddable
)

var priorityNames = [...]string{
	PriorityCritical:  "critical",
	PriorityDefault:   "default",
	PrioritySheddable: "sheddable",
}

// String returns "critical", "default" or "sheddable"; the zero Priority
// is "default".
func (p Priority) String() string {
	if p == 0 {
		return "default"
	}
	if int(p) < len(priorityNames) {
		return priorityNames[p]
	}
	return ""
}

// ParsePriority returns the Priority named s ("critical", "default" or
// "sheddable"), or false.
func ParsePriority(s string) (Priority, bool) {
	for p, name := range priorityNames {
		if name != "" && name == s {
			return Priority(p), true
		}
	}
	return 0, false
}

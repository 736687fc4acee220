// Package fallback builds and serves a point's degraded answers: what a
// client gets instead of the service when the point's strategies, its
// delay, an operator's switch or a failed upstream call (FallbackOnError)
// degrade its request. Each point has one Handler, whose answers are built
// from its Response on their first use and kept, so that serving one is a
// header set and a write. It knows nothing of the config file, nor of the
// request path that chooses the Reason (package proxy).
package fallback

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// Response is what a point answers instead of calling the service. The
// zero Response answers HTTP clients 429 with Retry-After for visit and
// token_bucket trips, 503 otherwise (and for a failed upstream call), with a
// small JSON body naming the point and strategy; it answers gRPC calls
// grpc-status 14 (UNAVAILABLE) with a message naming the point and strategy.
// Inside a delay, an HTTP answer of any status but 429 carries Retry-After:
// the seconds until the point's next probe or the delay's end, whichever is
// sooner (rounded up, at least 1), unless Header sets one.
//
// Status, Header and Body shape the HTTP answer only: a gRPC call always
// gets a trailers-only answer (HTTP 200, content-type application/grpc,
// grpc-status and grpc-message in the headers), which GRPCStatus and
// GRPCMessage shape.
type Response struct {
	// Status is the HTTP status code, 200-599; 0 means the default by
	// strategy.
	Status int
	// Header is added to every HTTP fallback response.
	Header http.Header
	// Body is the HTTP response body; used when BodySet (an empty Body is
	// then an empty body, not the default).
	Body    []byte
	BodySet bool
	// GRPCStatus is the grpc-status of the answer to gRPC calls, 0-16; used
	// when GRPCStatusSet, else 14 (UNAVAILABLE).
	GRPCStatus    int
	GRPCStatusSet bool
	// GRPCMessage is the grpc-message of the answer to gRPC calls, sent
	// percent-encoded as gRPC requires; "" means "degraded: " and the
	// Sds-Degraded value, such as "degraded: visit; point=orders".
	GRPCMessage string
}

// grpcUnavailable is gRPC's UNAVAILABLE, the default grpc-status of a
// fallback.
const grpcUnavailable = 14

// Reason is why a request is answered with its point's fallback: the
// strategy that degraded it and whether the point was in its delay, or an
// operator's switch (Forced, with no strategy). The zero Reason (no
// strategy) is a failed upstream call on a point with FallbackOnError,
// marked upstream_error.
type Reason struct {
	Strategy limiter.Strategy
	Delay    bool
	Forced   bool
	// Sheddable: a sheddable request past its share of the strategy's
	// threshold (limiter.Verdict.Sheddable), marked "; priority=sheddable".
	Sheddable bool
	// Reopens is, inside a delay, the time until the point's next probe
	// or the delay's end (limiter.Verdict.RetryAfter): the Retry-After of
	// an answer other than 429. It is the request's own, never part of
	// the answer built and kept for the reason; 0 outside a delay.
	Reopens time.Duration
	// Waited is how long the request waited in its point's queue before
	// it was degraded, marked "; waited=D" (such as waited=500ms); the
	// request's own, as Reopens is. 0: it did not wait.
	Waited time.Duration
	// Key is the label of the key a per-key rule degraded the request
	// for (a per-key Strategy), marked "; key=LABEL"; the request's own,
	// as is its Retry-After, Reopens. "" for none.
	Key string
}

// ReasonOf is the Reason of a degraded verdict.
func ReasonOf(v limiter.Verdict) Reason {
	return Reason{Strategy: v.Strategy, Delay: v.Delay, Sheddable: v.Sheddable, Reopens: v.RetryAfter}
}

// Handler is a point's fallback: the one handler that serves every
// degraded answer of the point (a strategy's trip, its delay, a failed
// upstream call with FallbackOnError, an operator's switch), for HTTP
// clients, HEAD requests and gRPC calls alike. Each answer is built once,
// on its first use, and kept: serving it after that is a header set and
// a write, with no allocation beyond what the ResponseWriter does. The
// answers are built on first use rather than when the config loads
// because most points never degrade, and a config may hold thousands of
// points: one that never degrades then holds no answer at all
// (TestFallbackSize; the memory either way is in docs/benchmarks.md,
// "Figures behind the code's choices"). It is safe for concurrent use.
type Handler struct {
	name     string
	fallback Response   // its Header and Body are the handler's own copies
	retry    retryAfter // for Retry-After
	// answers is nil until the first answer is built.
	answers atomic.Pointer[answerSet]
}

// answerSet holds each answer once built, by reason: [strategy][form],
// where form 0 is plain, 1 delay and 2 priority=sheddable; [0][0] is
// upstream_error and [0][1] forced.
type answerSet [limiter.LastStrategy + 1][3]atomic.Pointer[answer]

// retryAfter is what a point's Retry-After is computed from: its
// settings' retryInterval and delayTime, the time a token takes (0 without
// a token bucket) and its window's bucket length.
type retryAfter struct {
	retryInterval, delayTime, token, bucket time.Duration
}

// newRetryAfter returns what the Retry-After of a point of settings s is
// computed from.
func newRetryAfter(s limiter.Settings) retryAfter {
	r := retryAfter{retryInterval: s.RetryInterval, delayTime: s.DelayTime}
	if rate, _ := s.TokensPerSecond.Get(); rate > 0 {
		r.token = time.Second / time.Duration(rate)
	}
	window, buckets := s.Window, s.Buckets
	if window == 0 {
		window = limiter.DefaultWindow
	}
	if buckets == 0 {
		buckets = limiter.DefaultBuckets
	}
	r.bucket = window / time.Duration(buckets)
	return r
}

// answer is one degraded answer, in its HTTP and gRPC forms. Its header
// maps and their slices are shared with every response it serves: nothing
// may change them.
type answer struct {
	degraded string // the Sds-Degraded value
	status   int
	header   http.Header // the HTTP answer's, Sds-Degraded and Content-Length included
	body     []byte
	grpc     http.Header // the gRPC answer's, Sds-Degraded included
	// reopens: each HTTP answer gets a Retry-After of its own from the
	// request's Reason.Reopens (a delay's answer other than 429, whose
	// fallback sets no Retry-After).
	reopens bool
}

// New returns the fallback of point name, answering as f says; s, the
// point's settings, gives the Retry-After of the 429 answers. It copies
// f's Header and Body: the caller may change them after. It builds no
// answer.
func New(name string, f Response, s limiter.Settings) *Handler {
	f.Header = f.Header.Clone()
	f.Body = bytes.Clone(f.Body)
	return &Handler{name: name, fallback: f, retry: newRetryAfter(s)}
}

func buildAnswer(name string, f Response, s retryAfter, why Reason) answer {
	a := answer{degraded: strategyName(why) + "; point=" + name, status: f.Status, body: f.Body}
	if why.Delay {
		a.degraded += "; delay"
	}
	if why.Sheddable {
		a.degraded += "; priority=sheddable"
	}
	h := make(http.Header, len(f.Header)+4)
	for k, vs := range f.Header {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	h.Set("Sds-Degraded", a.degraded)
	rateLimited := why.Strategy == limiter.Visit || why.Strategy == limiter.TokenBucket || why.Strategy == limiter.ClusterTokenBucket || why.Strategy.PerKey()
	if a.status == 0 {
		a.status = http.StatusServiceUnavailable
		if rateLimited {
			a.status = http.StatusTooManyRequests
		}
	}
	// A failed upstream call says nothing of when to retry: its answer
	// carries Retry-After only when the fallback's headers do. A 429 says
	// how long a rate-limited client waits; any other status inside a
	// delay, when the delay lets requests through again: that changes
	// with every request, so Serve sets it, as it does for a per-key
	// rule's, whose wait is its rule's (Reason.Reopens).
	if why.Strategy != 0 && h.Get("Retry-After") == "" {
		switch {
		case why.Strategy.PerKey():
			a.reopens = true
		case a.status == http.StatusTooManyRequests:
			h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(s, why)))
		case why.Delay:
			a.reopens = true
		}
	}
	if !f.BodySet {
		body, _ := json.Marshal(struct {
			Error    string `json:"error"`
			Point    string `json:"point"`
			Strategy string `json:"strategy"`
		}{"degraded", name, strategyName(why)})
		a.body = append(body, '\n')
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", "application/json")
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	a.header = h

	status, message := grpcUnavailable, "degraded: "+a.degraded
	if f.GRPCStatusSet {
		status = f.GRPCStatus
	}
	if f.GRPCMessage != "" {
		message = f.GRPCMessage
	}
	a.grpc = http.Header{
		"Content-Type": {"application/grpc"},
		"Grpc-Status":  {strconv.Itoa(status)},
		"Grpc-Message": {grpcPercentEncode(message)},
		"Sds-Degraded": {a.degraded},
	}
	return a
}

// strategyName is the strategy the default body names: the strategy, or
// upstream_error.
func strategyName(why Reason) string {
	if why.Forced {
		return "forced"
	}
	if why.Strategy == 0 {
		return "upstream_error"
	}
	return why.Strategy.String()
}

// retryAfterSeconds is when a rate-limited client may try again: after the
// delay, after one bucket of the window (visit), or after one token.
func retryAfterSeconds(r retryAfter, why Reason) int {
	var d time.Duration
	switch {
	case why.Delay && r.retryInterval > 0:
		d = r.retryInterval
	case why.Delay:
		d = r.delayTime
	case why.Strategy == limiter.TokenBucket && r.token > 0:
		d = r.token
	default:
		d = r.bucket
	}
	return ceilSeconds(d)
}

// ceilSeconds is d in whole seconds rounded up, at least 1: Retry-After
// has no fractions, and 0 would invite a client to retry at once.
func ceilSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// maxSharedRetryAfter is the largest Retry-After, in seconds, whose header
// value retryAfterValue shares rather than allocates.
const maxSharedRetryAfter = 600

// retryAfterValues holds the header values "0" to maxSharedRetryAfter,
// each at its own index, built on first use.
var retryAfterValues = sync.OnceValue(func() []string {
	vs := make([]string, maxSharedRetryAfter+1)
	for n := range vs {
		vs[n] = strconv.Itoa(n)
	}
	return vs
})

// retryAfterValue is the Retry-After header value of d (ceilSeconds).
// Up to maxSharedRetryAfter seconds it is a slice of retryAfterValues,
// shared by every answer as the answers' own header values are, with no
// room to append: setting it allocates nothing.
func retryAfterValue(d time.Duration) []string {
	n := ceilSeconds(d)
	if n > maxSharedRetryAfter {
		return []string{strconv.Itoa(n)}
	}
	return retryAfterValues()[n : n+1 : n+1]
}

// grpcPercentEncode encodes a grpc-message as the gRPC protocol requires:
// bytes outside printable ASCII, and '%', as %XX.
func grpcPercentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// answer returns the answer for why, building it on its first use. Two
// goroutines that ask for a new answer at once may both build it; one
// answer is kept and both get it.
func (fh *Handler) answer(why Reason) *answer {
	delay := 0
	switch {
	case why.Forced:
		why = Reason{Forced: true}
		delay = 1
	case why.Delay && why.Strategy != 0:
		delay = 1
		why.Sheddable = false
	case why.Sheddable && why.Strategy != 0:
		delay = 2
	default:
		why.Delay, why.Sheddable = false, false // upstream_error has no other form
	}
	set := fh.answers.Load()
	if set == nil {
		fh.answers.CompareAndSwap(nil, new(answerSet))
		set = fh.answers.Load()
	}
	slot := &set[why.Strategy][delay]
	if a := slot.Load(); a != nil {
		return a
	}
	a := buildAnswer(fh.name, fh.fallback, fh.retry, why)
	if slot.CompareAndSwap(nil, &a) {
		return &a
	}
	return slot.Load()
}

// Mark returns the Sds-Degraded value of a request degraded for why, as
// Serve would write it: the answer's (Degraded), and what is the
// request's own (its key, how long it waited).
func (fh *Handler) Mark(why Reason) string { return fh.answer(why).mark(why) }

// Degraded returns the Sds-Degraded value of the answer for why, such as
// "visit; point=orders": what a shadow point's forwarded response is
// marked with (Sds-Shadow-Degraded). It builds the answer on its first use.
func (fh *Handler) Degraded(why Reason) string { return fh.answer(why).degraded }

// Serve writes the answer for why to w and returns its HTTP status.
//
// A gRPC call (HTTP/2, Content-Type application/grpc*) gets the
// trailers-only answer, HTTP 200; a HEAD request gets the HTTP answer's
// status and headers, Content-Length included, and no body.
func (fh *Handler) Serve(w http.ResponseWriter, r *http.Request, why Reason) int {
	a := fh.answer(why)
	h := w.Header()
	if IsGRPC(r) {
		for k, vs := range a.grpc {
			h[k] = vs
		}
		markOwn(h, a, why)
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	}
	for k, vs := range a.header {
		h[k] = vs
	}
	markOwn(h, a, why)
	if a.reopens {
		h["Retry-After"] = retryAfterValue(why.Reopens)
	}
	w.WriteHeader(a.status)
	if r.Method != http.MethodHead {
		w.Write(a.body)
	}
	return a.status
}

// mark returns the Sds-Degraded value of answer a for a request degraded
// for why: a's, and what is the request's own, the key it was degraded
// for and how long it waited in the queue.
func (a *answer) mark(why Reason) string {
	v := a.degraded
	if why.Key != "" {
		v += "; key=" + why.Key
	}
	if why.Waited > 0 {
		v += "; waited=" + max(why.Waited.Round(time.Millisecond), time.Millisecond).String()
	}
	return v
}

// markOwn sets in h the Sds-Degraded of answer a for a request whose
// value is its own (mark), and leaves a's there otherwise.
func markOwn(h http.Header, a *answer, why Reason) {
	if why.Key != "" || why.Waited > 0 {
		h["Sds-Degraded"] = []string{a.mark(why)}
	}
}

// IsGRPC reports whether r is a gRPC call (HTTP/2, Content-Type
// application/grpc*), which gets the trailers-only answer.
func IsGRPC(r *http.Request) bool {
	return r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

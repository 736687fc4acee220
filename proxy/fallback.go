package proxy

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// Fallback is what a point answers instead of calling the service. The zero
// Fallback answers 429 with Retry-After for visit and token_bucket trips,
// 503 otherwise, with a small JSON body naming the point and strategy.
type Fallback struct {
	// Status is the status code; 0 means the default by strategy.
	Status int
	// Header is added to every fallback response.
	Header http.Header
	// Body is the response body; used when BodySet.
	Body    []byte
	BodySet bool
}

// fallbackResponse is one prebuilt answer: serving it is header sets and a
// write.
type fallbackResponse struct {
	status   int
	header   http.Header // includes Sds-Degraded
	body     []byte
	grpcBody bool // answer gRPC requests trailers-only with grpc-status 14
}

// fallbacks holds the prebuilt answers of one point, by strategy and by
// whether the point is in its delay.
// Index 0, the zero Strategy, is unused.
type fallbacks [limiter.LastStrategy + 1][2]fallbackResponse

// buildFallbacks prepares every answer of point name once, when a config is
// loaded; s gives the Retry-After of the default 429 answers.
func buildFallbacks(name string, f Fallback, s limiter.Settings) *fallbacks {
	var fb fallbacks
	for strategy := limiter.Strategy(1); strategy <= limiter.LastStrategy; strategy++ {
		for delay := range 2 {
			fb[strategy][delay] = buildFallback(name, f, s, strategy, delay == 1)
		}
	}
	return &fb
}

func buildFallback(name string, f Fallback, s limiter.Settings, strategy limiter.Strategy, delay bool) fallbackResponse {
	h := make(http.Header, len(f.Header)+3)
	for k, vs := range f.Header {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	degraded := strategy.String() + "; point=" + name
	if delay {
		degraded += "; delay"
	}
	h.Set("Sds-Degraded", degraded)
	r := fallbackResponse{status: f.Status, header: h, body: f.Body, grpcBody: f.Status == 0 && !f.BodySet}
	rateLimited := strategy == limiter.Visit || strategy == limiter.TokenBucket
	if r.status == 0 {
		r.status = http.StatusServiceUnavailable
		if rateLimited {
			r.status = http.StatusTooManyRequests
		}
	}
	if r.status == http.StatusTooManyRequests && h.Get("Retry-After") == "" {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(s, strategy, delay)))
	}
	if !f.BodySet {
		body, _ := json.Marshal(struct {
			Error    string `json:"error"`
			Point    string `json:"point"`
			Strategy string `json:"strategy"`
		}{"degraded", name, strategy.String()})
		r.body = append(body, '\n')
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", "application/json")
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(r.body)))
	return r
}

// retryAfterSeconds is when a rate-limited client may try again: after the
// delay, after one bucket of the window (visit), or after one token.
func retryAfterSeconds(s limiter.Settings, strategy limiter.Strategy, delay bool) int {
	var d time.Duration
	switch {
	case delay && s.RetryInterval > 0:
		d = s.RetryInterval
	case delay:
		d = s.DelayTime
	case strategy == limiter.TokenBucket && s.TokensPerSecond > 0:
		d = time.Second / time.Duration(s.TokensPerSecond)
	default:
		window, buckets := s.Window, s.Buckets
		if window == 0 {
			window = limiter.DefaultWindow
		}
		if buckets == 0 {
			buckets = limiter.DefaultBuckets
		}
		d = window / time.Duration(buckets)
	}
	return max(1, int(math.Ceil(d.Seconds())))
}

// response returns the prebuilt answer for verdict v.
func (fb *fallbacks) response(v limiter.Verdict) *fallbackResponse {
	delay := 0
	if v.Delay {
		delay = 1
	}
	return &fb[v.Strategy][delay]
}

// degradedHeader returns the Sds-Degraded value for verdict v.
func (fb *fallbacks) degradedHeader(v limiter.Verdict) string {
	return fb.response(v).header.Get("Sds-Degraded")
}

// serve writes the answer for verdict v and returns its status.
func (fb *fallbacks) serve(w http.ResponseWriter, r *http.Request, v limiter.Verdict) int {
	resp := fb.response(v)
	h := w.Header()
	if resp.grpcBody && isGRPC(r) {
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", "14")
		h.Set("Grpc-Message", "degraded: "+v.Strategy.String())
		h.Set("Sds-Degraded", resp.header.Get("Sds-Degraded"))
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	}
	for k, vs := range resp.header {
		h[k] = vs
	}
	w.WriteHeader(resp.status)
	if r.Method != http.MethodHead {
		w.Write(resp.body)
	}
	return resp.status
}

// isGRPC reports whether r is a gRPC call.
func isGRPC(r *http.Request) bool {
	return r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/fallback"
	"github.com/sds-proxy/sds-proxy/proxy/statelog"
)

// The metered transport: the ReverseProxy's Transport, and the only code
// that sees what the upstream did. It calls the snapshot's transport,
// records the answer, or why there was none, in the request's call, wraps
// the response body so that its reads are timed and a body that breaks
// off is seen, and ends a stream's call at its headers. Outcomes are
// decided here and nowhere else: classify turns what the meter recorded
// into the call's outcome, once, when the call ends (call.end); a gRPC
// stream's body judges its trailers when it reaches its end
// (judgeTrailers), after its call ended at the headers. The ErrorHandler
// (answerFailure) only writes the answer of a failure the meter
// classified. The timeout counted in flight is the upstream clock's
// (clock.go): it counts a timeout, never an outcome.

// errUpstreamTimeout is the cause of a context cut by a point's
// UpstreamTimeout, telling it apart from a client that went away.
var errUpstreamTimeout = errors.New("upstream timeout")

// errUnaskedSwitch is the error of a 101 to a request that asked for no
// upgrade: the upstream's answer is refused with a 502.
var errUnaskedSwitch = errors.New("upstream switched protocols on a request that asked for no upgrade")

// failure is why an upstream call produced no answer.
type failure uint8

const (
	failTimeout    failure = iota + 1 // the point's UpstreamTimeout cut it: 504
	failTransport                     // the transport failed (no connection, a broken answer): 502
	failClientBody                    // the client's request body failed to read: 400
	failClientGone                    // the client went away: a 502 nobody reads, logged 499
)

// upstreamError names the sds_upstream_errors_total series a call counts
// in besides "status" (classification.status).
type upstreamError uint8

const (
	errTimeout   upstreamError = iota + 1 // cut by UpstreamTimeout
	errTransport                          // no answer from the transport
	errBody                               // the response body broke off
)

// classification is what an ended call counts as.
type classification struct {
	outcome limiter.Outcome
	status  bool          // the answer was an exception status (5xx, gRPC error)
	err     upstreamError // 0: none
}

// classify is the one place a call's outcome is decided, from what the
// meter recorded in c:
//
//	no answer: UpstreamTimeout cut it         Failed    timeout
//	no answer: transport error, unasked 101   Failed    transport
//	no answer: the client's body or client    Canceled
//	a stream (ended at its headers)           by status
//	body broke off, client still there        Failed    body (timeout if cut)
//	body broke off with the client, or the
//	copy aborted (a write to the client)      Canceled
//	otherwise                                 by status: 5xx or a gRPC
//	                                          error status is Failed
//
// An exception status counts as a status error in every row that has an
// answer, whatever the outcome.
func classify(c *call) classification {
	switch c.failure {
	case failTimeout:
		return classification{outcome: limiter.Failed, err: errTimeout}
	case failTransport:
		return classification{outcome: limiter.Failed, err: errTransport}
	case failClientBody, failClientGone:
		return classification{outcome: limiter.Canceled}
	}
	o := classification{outcome: limiter.OK, status: c.statusFailed}
	switch {
	case c.streamed:
	case c.bodyBroke && !c.clientGone():
		o.outcome, o.err = limiter.Failed, errBody
		if c.cut.Load() {
			o.err = errTimeout
		}
		return o
	case c.bodyBroke || !c.copied:
		o.outcome = limiter.Canceled
		return o
	}
	if c.statusFailed {
		o.outcome = limiter.Failed
	}
	return o
}

// meter is the ReverseProxy's transport (see above). It holds nothing:
// each request's call is in its context.
type meter struct{}

func (meter) RoundTrip(req *http.Request) (*http.Response, error) {
	c := callOf(req)
	transport := c.snap.transport
	if req.Header.Get("Upgrade") != "" {
		transport = c.snap.upgrades
	}
	resp, err := transport.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols && req.Header.Get("Upgrade") == "" {
		// ReverseProxy would refuse it too, but without closing its body:
		// through http.Transport that body is the upstream connection,
		// which would stay open for good.
		resp.Body.Close()
		resp, err = nil, errUnaskedSwitch
	}
	if err != nil {
		c.failure = failureOf(c, req)
		if c.failure == failTransport && fallback.IsGRPC(req) {
			c.h.grpcFailed(c, nil, err)
		}
		f := &failureError{kind: c.failure, err: err}
		if p := c.point; p != nil && p.fallbackOnError && (f.kind == failTimeout || f.kind == failTransport) {
			f.fallback = p.fallback
		}
		return nil, f
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		c.status = resp.StatusCode
	}
	if fallback.IsGRPC(req) && !isGRPCResponse(resp) {
		c.h.grpcFailed(c, resp, nil)
	}
	if c.point == nil {
		return resp, nil
	}
	c.headers()
	c.statusFailed = resp.StatusCode >= 500 || grpcFailed(resp.Header)
	if c.staleIn != nil {
		c.record(resp)
	}
	if isStream(resp) {
		c.streamed = true
		c.end(c.h.now())
		if !isGRPCResponse(resp) {
			return resp, nil
		}
	}
	c.respBody = upstreamBody{ReadCloser: resp.Body, c: c}
	if c.streamed {
		c.respBody.trailer = &resp.Trailer
	}
	resp.Body = &c.respBody
	return resp, nil
}

// grpcFailed logs why a gRPC call could not be forwarded: the transport
// failed (err), or the upstream's answer (resp) is not gRPC's. Its client
// sees only UNAVAILABLE or UNKNOWN with an HTTP status; this line says
// why, and names h2c:// when the upstream is spoken to over HTTP/1.1,
// which no gRPC server takes. It is throttled per point as the state
// lines are (statelog.Every), with the calls held back as repeats.
func (h *Handler) grpcFailed(c *call, resp *http.Response, err error) {
	name := ""
	if c.point != nil {
		name = c.point.name
	}
	why := "transport: "
	if err != nil {
		why += err.Error()
	} else {
		why = fmt.Sprintf("the upstream answered %d over %s with Content-Type %q, not a gRPC answer", resp.StatusCode, resp.Proto, resp.Header.Get("Content-Type"))
	}
	fields := []zap.Field{zap.String("point", name), zap.String("why", why)}
	if u := c.snap.Upstream; u.Scheme == "http" && !c.snap.UpstreamH2C {
		fields = append(fields, zap.String("hint", "gRPC needs HTTP/2 to the upstream, and an http:// upstream is called over HTTP/1.1: use h2c://"+u.Host))
	}
	h.changes.Warn(name, statelog.GRPCNotForwarded, h.now(), "gRPC call not forwarded", fields...)
}

// failureOf tells why the upstream call of c, sent as req, produced no
// answer. A client body that failed is asked before a client that went
// away: the server cancels the context when it meets the end of the
// client's input, so a client that half-closes after a short body would
// otherwise be answered nothing.
func failureOf(c *call, req *http.Request) failure {
	switch {
	case c.cut.Load():
		return failTimeout
	case c.bodyFailed.Load():
		return failClientBody
	case req.Context().Err() != nil:
		return failClientGone
	}
	return failTransport
}

// failureError is the meter's error for a call with no answer: what the
// ErrorHandler answers for it.
type failureError struct {
	kind     failure
	err      error             // the transport's
	fallback *fallback.Handler // answers instead, marked upstream_error (FallbackOnError); nil: none
}

func (f *failureError) Error() string { return f.err.Error() }

func (f *failureError) Unwrap() error { return f.err }

// answerFailure is the ReverseProxy's ErrorHandler: it writes the answer
// of a failed upstream call (failure), or a 502 for an error that is not
// the meter's (ReverseProxy's own, such as a failed upgrade).
func answerFailure(w http.ResponseWriter, r *http.Request, err error) {
	var f *failureError
	if !errors.As(err, &f) {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	if f.fallback != nil {
		if c := callOf(r); !c.serveStale(w, f.fallback, fallback.Reason{}) {
			c.status = f.fallback.Serve(w, r, fallback.Reason{})
		}
		return
	}
	switch f.kind {
	case failTimeout:
		w.WriteHeader(http.StatusGatewayTimeout)
	case failClientBody:
		w.WriteHeader(http.StatusBadRequest)
	default: // failTransport; and failClientGone, whose client reads nothing
		w.WriteHeader(http.StatusBadGateway)
	}
}

// clientBody is the client's request body as the transport reads it: its
// reads stop the upstream clock, and a failure to read it is recorded as
// the client's fault, which must not count against the upstream.
type clientBody struct {
	io.ReadCloser
	c *call
}

func (b *clientBody) Read(p []byte) (int, error) {
	b.c.clientRead(true)
	n, err := b.ReadCloser.Read(p)
	b.c.clientRead(false)
	if err != nil && err != io.EOF {
		b.c.bodyFailed.Store(true)
	}
	return n, err
}

// upstreamBody is the upstream's response body as ReverseProxy copies it:
// the upstream clock runs during its reads only, and a read that fails is
// recorded (classify decides whose failure it was). A gRPC stream's body
// judges the stream's trailers when it reaches its end (judgeTrailers);
// its call ended at its headers, so nothing else its reads record is
// classified.
type upstreamBody struct {
	io.ReadCloser
	c *call
	// trailer is the gRPC response's Trailer field, which the transport
	// fills when the body reaches EOF; nil for other bodies, and once
	// judged.
	trailer *http.Header
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	b.c.upstreamRead(true)
	n, err := b.ReadCloser.Read(p)
	b.c.upstreamRead(false)
	if r := b.c.recorder; r != nil {
		r.Write(p[:n])
		if err != nil {
			b.c.recorded(err == io.EOF)
		}
	}
	switch {
	case err == io.EOF && b.trailer != nil:
		b.c.judgeTrailers(*b.trailer)
		b.trailer = nil
	case err != nil && err != io.EOF:
		b.c.bodyBroke = true
	}
	return n, err
}

// judgeTrailers judges the trailers of a gRPC stream whose body reached
// its end: a grpc-status other than 0 is an exception, counted in the
// bucket of now although the call ended at its headers
// (limiter.Call.FailAfterExit: once, and never for a call that already
// failed), and counted as a status error. A stream whose client went
// away before its end sends no trailers to judge, and counts nothing.
func (c *call) judgeTrailers(trailer http.Header) {
	if grpcFailed(trailer) && c.lim.FailAfterExit(c.h.now()) {
		c.series.StatusErrors.Inc()
	}
}

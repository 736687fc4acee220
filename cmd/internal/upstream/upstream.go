// Package upstream is a small, fault-injecting HTTP service: the demo
// upstream of `sds-proxy demo` and the real upstream process of the
// end-to-end tests (cmd/sds-upstream).
//
// Demo routes, for a newcomer playing with the proxy:
//
//	GET  /api/orders   200, a small JSON list of orders
//	POST /api/orders   201, the created order as JSON
//	     /api/slow     200 after the current slow latency (default 500ms)
//	     /api/flaky    500 for the current error rate of requests (default 50%)
//	     /api/queue    200 after a worker's service time (default 50ms), from
//	                   one of queueCapacity workers (default 10) taken in
//	                   arrival order: past that many calls in flight, the
//	                   latency grows with the queue
//	     /_control     GET: the current settings as JSON; GET or POST with
//	                   latency=300ms, slowLatency=1s, errorRate=20,
//	                   queueCapacity=5 or queueService=20ms (query or form)
//	                   changes them while the service runs
//	     anything else 200, a short text naming the path
//
// Test knobs, accepted on any path but /_control, applied in this order
// after the base latency:
//
//	?sleep=950ms  wait this long first (ended early by the client going away)
//	?hang=1       block until the client goes away or Handler.Close
//	?close=1      hijack the connection and close it without a response
//	?status=503   answer this status (with ?body, or a short text)
//	?body=N       answer N bytes of body ('x' repeated)
//	?cut=M        with ?body=N (M < N): promise N bytes, send M, then drop
//	              the connection (a body that breaks off mid-copy)
//	?header=N:V   set response header N to V (repeatable, at most 16), such
//	              as header=Cache-Control:max-age%3D60
//	?echo=NAME    add to the text answer a line "NAME: VALUE" of the
//	              request's header NAME (repeatable, at most 16)
//	?serial=1     add to the text answer "#N", N counting the answers so
//	              marked: two answers with the same serial are one
//
// and the streaming routes:
//
//	/sse?events=N&interval=10ms  text/event-stream, events "data: 1" to
//	                             "data: N", each flushed, interval apart
//	/ws                          a WebSocket echo (RFC 6455, text, binary,
//	                             ping and close)
//	/echo-headers                the request's method, Host, URL and
//	                             headers as JSON
//	/early-hints                 a 103 Early Hints with a Link header,
//	                             then 200
//	/api/wire/...?fault=NAME     the connection taken over and answered
//	                             by hand, this request and every later
//	                             one on it: those with f=1 with the
//	                             framing fault NAME of proxy/h1/h1test,
//	                             the others correctly, each answer
//	                             naming its path (no other knob applies)
//	/grpc?grpc-status=14         a unary gRPC answer: one empty message,
//	                             then the status (default 0) in the
//	                             trailers; X-Upstream-Proto names the
//	                             protocol the call arrived over
//
// Every wait honours the request's context and Handler.Close, and every
// size and duration a request can ask for is bounded (see Options). A bad
// knob value is answered 400. The Handler keeps no global state: each New
// is independent, and every method is safe for concurrent use.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Defaults of Options.
const (
	DefaultSlowLatency = 500 * time.Millisecond
	DefaultErrorRate   = 50
	DefaultMaxWait     = 30 * time.Second
	DefaultMaxBody     = 16 << 20
	DefaultMaxEvents   = 10000
)

// Options configure a Handler. The zero value gives the defaults.
type Options struct {
	// Latency is the base latency added to every request but /_control.
	// Default 0.
	Latency time.Duration
	// SlowLatency is how long /api/slow takes. 0 means DefaultSlowLatency;
	// negative means no wait.
	SlowLatency time.Duration
	// ErrorRate is the percent (0-100) of /api/flaky requests answered
	// 500. 0 means DefaultErrorRate; negative means 0 (never fail).
	ErrorRate int
	// MaxWait bounds every duration a request can ask for (?sleep, the
	// SSE interval, the latencies set through /_control). 0 means
	// DefaultMaxWait.
	MaxWait time.Duration
	// MaxBody bounds ?body=N, in bytes. 0 means DefaultMaxBody.
	MaxBody int
	// MaxEvents bounds /sse?events=N. 0 means DefaultMaxEvents.
	MaxEvents int
}

// Handler is the upstream service, an http.Handler. Create it with New;
// stop what it is blocked on with Close.
type Handler struct {
	maxWait   time.Duration
	maxBody   int
	maxEvents int

	latency     atomic.Int64 // time.Duration
	slowLatency atomic.Int64 // time.Duration
	errorRate   atomic.Int64 // percent
	flaky       atomic.Uint64
	orderID     atomic.Int64
	serial      atomic.Int64 // the last ?serial number given

	requests atomic.Int64
	inFlight atomic.Int64
	queue    queue // /api/queue

	done      chan struct{}
	closeOnce sync.Once
}

// New returns a Handler with opts, defaults filled in.
func New(opts Options) *Handler {
	h := &Handler{
		maxWait:   orDefault(opts.MaxWait, DefaultMaxWait),
		maxBody:   orDefault(opts.MaxBody, DefaultMaxBody),
		maxEvents: orDefault(opts.MaxEvents, DefaultMaxEvents),
		done:      make(chan struct{}),
	}
	h.SetLatency(opts.Latency)
	h.SetSlowLatency(orDefault(opts.SlowLatency, DefaultSlowLatency))
	h.SetErrorRate(orDefault(opts.ErrorRate, DefaultErrorRate))
	h.queue.set(DefaultQueueCapacity, DefaultQueueService)
	return h
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// SetLatency sets the base latency added to every request, clamped to
// [0, MaxWait].
func (h *Handler) SetLatency(d time.Duration) { h.latency.Store(int64(h.clampWait(d))) }

// SetSlowLatency sets how long /api/slow takes, clamped to [0, MaxWait].
func (h *Handler) SetSlowLatency(d time.Duration) { h.slowLatency.Store(int64(h.clampWait(d))) }

// SetErrorRate sets the percent of /api/flaky requests answered 500,
// clamped to [0, 100].
func (h *Handler) SetErrorRate(percent int) { h.errorRate.Store(int64(min(max(percent, 0), 100))) }

func (h *Handler) clampWait(d time.Duration) time.Duration { return min(max(d, 0), h.maxWait) }

// Stats are the Handler's current settings and counters, as /_control
// reports them.
type Stats struct {
	// Latency is the base latency, as a Go duration string ("300ms").
	Latency string `json:"latency"`
	// SlowLatency is the latency of /api/slow.
	SlowLatency string `json:"slowLatency"`
	// ErrorRate is the percent of /api/flaky answered 500.
	ErrorRate int `json:"errorRate"`
	// Requests counts the requests served so far, /_control excluded.
	Requests int64 `json:"requests"`
	// InFlight counts the requests being served now, /_control excluded.
	InFlight int64 `json:"inFlight"`
	// Queue is /api/queue's workers and queue.
	Queue QueueStats `json:"queue"`
}

// Stats returns the current settings and counters.
func (h *Handler) Stats() Stats {
	return Stats{
		Latency:     time.Duration(h.latency.Load()).String(),
		SlowLatency: time.Duration(h.slowLatency.Load()).String(),
		ErrorRate:   int(h.errorRate.Load()),
		Requests:    h.requests.Load(),
		InFlight:    h.inFlight.Load(),
		Queue:       h.queue.stats(),
	}
}

// Close releases every request blocked in a wait (?hang, ?sleep, the base
// latency, /sse) and closes every WebSocket; requests arriving later are
// not held either. It is safe to call more than once.
func (h *Handler) Close() { h.closeOnce.Do(func() { close(h.done) }) }

// errClosed is the cause of a wait that Close ended.
var errClosed = errors.New("upstream closed")

// wait blocks for d, or until the request's context ends or h is closed. It
// returns nil when d passed, else the reason it stopped.
func (h *Handler) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-h.done:
		return errClosed
	}
}

// ServeHTTP serves one request as the package documentation describes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_control" {
		h.control(w, r)
		return
	}
	h.requests.Add(1)
	h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	if strings.HasPrefix(r.URL.Path, "/api/wire/") {
		wire(w, r)
		return
	}

	k, err := h.parseKnobs(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := h.wait(r.Context(), time.Duration(h.latency.Load())+k.sleep); err != nil {
		h.interrupted(w, err)
		return
	}
	if k.hang {
		select {
		case <-r.Context().Done():
			return
		case <-h.done:
			h.interrupted(w, errClosed)
			return
		}
	}
	if k.close {
		closeConn(w)
		return
	}
	if k.status != 0 || k.body >= 0 || len(k.header) > 0 || len(k.echo) > 0 || k.serial {
		h.respond(w, r, k)
		return
	}

	switch r.URL.Path {
	case "/api/orders":
		h.orders(w, r)
	case "/api/slow":
		d := time.Duration(h.slowLatency.Load())
		if err := h.wait(r.Context(), d); err != nil {
			h.interrupted(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"slept": d.String()})
	case "/api/flaky":
		h.flakyRequest(w)
	case "/api/queue":
		d, err := h.serveQueue(r.Context())
		if err != nil {
			h.interrupted(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"served": d.String()})
	case "/sse":
		h.sse(w, r)
	case "/ws":
		h.websocket(w, r)
	case "/echo-headers":
		h.echoHeaders(w, r)
	case "/early-hints":
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "upstream: %s %s\n", r.Method, r.URL.Path)
	case "/grpc":
		h.grpc(w, r)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "upstream: %s %s\n", r.Method, r.URL.Path)
	}
}

// interrupted answers a request whose wait ended early: nothing for a
// client that went away, 503 when the Handler closed.
func (h *Handler) interrupted(w http.ResponseWriter, err error) {
	if errors.Is(err, errClosed) {
		http.Error(w, "upstream closing", http.StatusServiceUnavailable)
	}
}

// knobs are a request's test knobs.
type knobs struct {
	sleep  time.Duration
	hang   bool
	close  bool
	status int // 0: not given
	body   int // -1: not given
	cut    int // -1: not given; else the bytes sent before the body breaks off
	// header are the ?header pairs, echo the ?echo names, serial ?serial.
	header [][2]string
	echo   []string
	serial bool
}

// maxHeaderKnobs bounds ?header and ?echo each.
const maxHeaderKnobs = 16

func (h *Handler) parseKnobs(r *http.Request) (knobs, error) {
	q := r.URL.Query()
	k := knobs{body: -1, cut: -1}
	var err error
	if s := q.Get("sleep"); s != "" {
		if k.sleep, err = h.parseWait("sleep", s); err != nil {
			return k, err
		}
	}
	k.hang = isTrue(q.Get("hang"))
	k.close = isTrue(q.Get("close"))
	if s := q.Get("status"); s != "" {
		k.status, err = strconv.Atoi(s)
		if err != nil || k.status < 200 || k.status > 599 {
			return k, fmt.Errorf("status=%q: want an HTTP status 200-599", s)
		}
	}
	if s := q.Get("body"); s != "" {
		k.body, err = strconv.Atoi(s)
		if err != nil || k.body < 0 || k.body > h.maxBody {
			return k, fmt.Errorf("body=%q: want a byte count 0-%d", s, h.maxBody)
		}
	}
	if s := q.Get("cut"); s != "" {
		k.cut, err = strconv.Atoi(s)
		if err != nil || k.cut < 0 || k.cut >= k.body {
			return k, fmt.Errorf("cut=%q: want a byte count below body=N", s)
		}
	}
	if len(q["header"]) > maxHeaderKnobs || len(q["echo"]) > maxHeaderKnobs {
		return k, fmt.Errorf("at most %d header= and %d echo=", maxHeaderKnobs, maxHeaderKnobs)
	}
	for _, s := range q["header"] {
		name, value, ok := strings.Cut(s, ":")
		if !ok || !httpguts.ValidHeaderFieldName(name) || !httpguts.ValidHeaderFieldValue(value) {
			return k, fmt.Errorf("header=%q: want NAME:VALUE, such as Cache-Control:max-age=60", s)
		}
		k.header = append(k.header, [2]string{name, value})
	}
	for _, name := range q["echo"] {
		if !httpguts.ValidHeaderFieldName(name) {
			return k, fmt.Errorf("echo=%q: want a header name", name)
		}
		k.echo = append(k.echo, name)
	}
	k.serial = isTrue(q.Get("serial"))
	return k, nil
}

func (h *Handler) parseWait(name, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > h.maxWait {
		return 0, fmt.Errorf("%s=%q: want a duration 0-%v such as 250ms", name, s, h.maxWait)
	}
	return d, nil
}

func isTrue(s string) bool { return s == "1" || strings.EqualFold(s, "true") }

// respond answers ?status and ?body.
func (h *Handler) respond(w http.ResponseWriter, r *http.Request, k knobs) {
	status := k.status
	if status == 0 {
		status = http.StatusOK
	}
	for _, kv := range k.header {
		w.Header().Add(kv[0], kv[1])
	}
	if k.body < 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, "upstream: %s %s: %d\n", r.Method, r.URL.Path, status)
		for _, name := range k.echo {
			fmt.Fprintf(w, "%s: %s\n", name, strings.Join(r.Header.Values(name), ", "))
		}
		if k.serial {
			fmt.Fprintf(w, "#%d\n", h.serial.Add(1))
		}
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(k.body))
	w.WriteHeader(status)
	send := k.body
	if k.cut >= 0 {
		send = k.cut
	}
	chunk := []byte(strings.Repeat("x", min(send, 32<<10)))
	for n := send; n > 0; {
		m, err := w.Write(chunk[:min(n, len(chunk))])
		if err != nil {
			return
		}
		n -= m
	}
	if k.cut >= 0 {
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // the server drops the connection
	}
}

// closeConn drops the connection without a response: a hijack and close
// over HTTP/1, a stream reset where hijacking is not supported (HTTP/2).
func closeConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// Order is an item of /api/orders.
type Order struct {
	ID   int64  `json:"id"`
	Item string `json:"item"`
	Qty  int    `json:"qty"`
}

func (h *Handler) orders(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		writeJSON(w, http.StatusOK, []Order{
			{ID: 1, Item: "book", Qty: 1},
			{ID: 2, Item: "pen", Qty: 3},
			{ID: 3, Item: "lamp", Qty: 1},
		})
	case http.MethodPost:
		// The body is not needed; read a bounded amount so that the
		// connection can be reused.
		io.Copy(io.Discard, io.LimitReader(r.Body, 64<<10))
		writeJSON(w, http.StatusCreated, map[string]any{"id": 100 + h.orderID.Add(1), "status": "created"})
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// flakyRequest fails exactly errorRate of every 100 requests, spread
// evenly (request n fails when floor(n*rate/100) grows), so that a rate
// is observable without randomness.
func (h *Handler) flakyRequest(w http.ResponseWriter) {
	rate := uint64(h.errorRate.Load())
	n := h.flaky.Add(1)
	if n*rate/100 > (n-1)*rate/100 {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "flaky failure"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// control reports the settings and changes them (GET or POST).
func (h *Handler) control(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// Parse everything first, so that a bad value changes nothing.
	var set []func()
	for _, name := range []string{"latency", "slowLatency"} {
		if s := r.Form.Get(name); s != "" {
			d, err := h.parseWait(name, s)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if name == "latency" {
				set = append(set, func() { h.SetLatency(d) })
			} else {
				set = append(set, func() { h.SetSlowLatency(d) })
			}
		}
	}
	if s := r.Form.Get("errorRate"); s != "" {
		p, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
		if err != nil || p < 0 || p > 100 {
			http.Error(w, fmt.Sprintf("errorRate=%q: want a percent 0-100", s), http.StatusBadRequest)
			return
		}
		set = append(set, func() { h.SetErrorRate(p) })
	}
	capacity, service := h.queue.settings()
	if s := r.Form.Get("queueCapacity"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxQueueCapacity {
			http.Error(w, fmt.Sprintf("queueCapacity=%q: want workers from 1 to %d", s, MaxQueueCapacity), http.StatusBadRequest)
			return
		}
		capacity = n
	}
	if s := r.Form.Get("queueService"); s != "" {
		d, err := h.parseWait("queueService", s)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		service = d
	}
	set = append(set, func() { h.queue.set(capacity, service) })
	for _, f := range set {
		f()
	}
	writeJSON(w, http.StatusOK, h.Stats())
}

// EchoedRequest is the JSON body of /echo-headers.
type EchoedRequest struct {
	Method     string      `json:"method"`
	Host       string      `json:"host"`
	URI        string      `json:"uri"`
	Proto      string      `json:"proto"`
	RemoteAddr string      `json:"remoteAddr"`
	Header     http.Header `json:"header"`
}

func (h *Handler) echoHeaders(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, EchoedRequest{
		Method:     r.Method,
		Host:       r.Host,
		URI:        r.RequestURI,
		Proto:      r.Proto,
		RemoteAddr: r.RemoteAddr,
		Header:     r.Header,
	})
}

// sse streams /sse?events=N&interval=D: events "data: 1" to "data: N",
// the first at once, then one every D, each flushed as it is written.
func (h *Handler) sse(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	events := 10
	if s := q.Get("events"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > h.maxEvents {
			http.Error(w, fmt.Sprintf("events=%q: want a count 0-%d", s, h.maxEvents), http.StatusBadRequest)
			return
		}
		events = n
	}
	interval := 100 * time.Millisecond
	if s := q.Get("interval"); s != "" {
		d, err := h.parseWait("interval", s)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		interval = d
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	for i := 1; i <= events; i++ {
		if i > 1 {
			if err := h.wait(r.Context(), interval); err != nil {
				return
			}
		}
		if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// grpc answers like a unary gRPC method: it reads the request (up to
// MaxBody), sends one empty length-prefixed message, and ends with the
// grpc-status of ?grpc-status (default 0) in the trailers.
func (h *Handler) grpc(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("grpc-status")
	if status == "" {
		status = "0"
	}
	if code, err := strconv.Atoi(status); err != nil || code < 0 || code > 16 {
		http.Error(w, fmt.Sprintf("grpc-status=%q: want a gRPC code 0-16", status), http.StatusBadRequest)
		return
	}
	io.Copy(io.Discard, io.LimitReader(r.Body, int64(h.maxBody)))
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("X-Upstream-Proto", r.Proto)
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte{0, 0, 0, 0, 0}) // uncompressed, zero length
	w.Header().Set("Grpc-Status", status)
	if status != "0" {
		w.Header().Set("Grpc-Message", "upstream answered "+status)
	}
}

package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of the client.
const (
	paceTick       = 10 * time.Millisecond // the requests due are sent every paceTick
	requestTimeout = 10 * time.Second      // one request, its body included
	maxBody        = 1 << 20               // bytes read of an answer
)

// keyStrategies are the per-key strategies, as Sds-Degraded names them.
var keyStrategies = [...]string{"key_visit", "key_token_bucket", "key_concurrent"}

// keyDegraded matches the Sds-Degraded of a request a per-key rule
// degraded: its strategy, and the key's label.
var keyDegraded = regexp.MustCompile(`^(key_visit|key_token_bucket|key_concurrent); point=api\.search; key=([0-9a-f]{8})$`)

// stream is one class of keys' paced requests (the heavy key, the
// well-behaved keys, the churn) and what came back: the i-th request is
// due at begin + i/perSecond, with X-Api-Key keyOf(i).
type stream struct {
	name      string
	perSecond int
	begin     time.Time
	span      time.Duration
	keyOf     func(i int) string

	sent, dropped, served, failed atomic.Int64
	degraded                      [len(keyStrategies)]atomic.Int64
	firstFailure                  atomic.Pointer[string]
	label                         atomic.Pointer[string] // the key's label, from a degraded answer
	// Written by the pacer, read once it returned: when the first and
	// last request were sent, and each sent request's lag behind its
	// moment due.
	first, last time.Time
	lags        []time.Duration
}

// due is the number of the stream's requests due in its span.
func (s *stream) due() int { return int(float64(s.perSecond) * s.span.Seconds()) }

// pace sends s's requests to url, each at the first tick after it is due
// (those left at the first tick past begin+span), each in its own
// goroutine, and returns once every answer is in. A request due while
// slots is full is not sent: it is counted dropped. It stops early when
// ctx ends.
func (s *stream) pace(ctx context.Context, c *http.Client, url string, slots chan struct{}) {
	total := s.due()
	end := s.begin.Add(s.span)
	s.lags = make([]time.Duration, 0, total)
	tick := time.NewTicker(paceTick)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	// A ticker drops the ticks its reader misses: the loop runs at most
	// once a tick until end, and once after; each pass sends what is due,
	// the last one what is left.
	for i, ticks := 0, int(time.Until(end)/paceTick)+2; i < total && ticks > 0; ticks-- {
		var now time.Time
		select {
		case now = <-tick.C:
		case <-ctx.Done():
			return
		}
		due := min(total, int(now.Sub(s.begin).Seconds()*float64(s.perSecond))+1)
		if !now.Before(end) {
			due = total
		}
		for ; i < due; i++ {
			select {
			case slots <- struct{}{}:
			default:
				s.dropped.Add(1)
				continue
			}
			if s.first.IsZero() {
				s.first = now
			}
			s.last = now
			s.lags = append(s.lags, now.Sub(s.begin.Add(time.Duration(float64(i)/float64(s.perSecond)*float64(time.Second)))))
			s.sent.Add(1)
			key := s.keyOf(i)
			wg.Go(func() {
				defer func() { <-slots }()
				s.send(ctx, c, url, key)
			})
		}
	}
}

// send makes one request with key and counts its answer: a 200 without
// Sds-Degraded is served, a per-key rule's 429 is degraded by its
// strategy, anything else failed.
func (s *stream) send(ctx context.Context, c *http.Client, url, key string) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		s.fail(err.Error())
		return
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		s.fail(err.Error())
		return
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	degraded := resp.Header.Get("Sds-Degraded")
	switch m := keyDegraded.FindStringSubmatch(degraded); {
	case err != nil:
		s.fail("body: " + err.Error())
	case resp.StatusCode == http.StatusOK && degraded == "":
		s.served.Add(1)
	case resp.StatusCode == http.StatusTooManyRequests && m != nil && resp.Header.Get("Retry-After") != "":
		s.degraded[slices.Index(keyStrategies[:], m[1])].Add(1)
		s.label.Store(&m[2])
	default:
		s.fail(resp.Status + ", Sds-Degraded " + degraded)
	}
}

func (s *stream) fail(what string) {
	if s.failed.Add(1) == 1 {
		s.firstFailure.Store(&what)
	}
}

// maxConns bounds the client's connections to a proxy: below the
// proxy's maxConnections (1024 by default), which closes idle ones past
// it, so that the figures are the rule's, not those of connections closed
// under a request and retried.
const maxConns = 512

// newClient returns the one client of a sitting: no environment proxy, no
// redirects, at most maxConns connections, all kept when idle.
func newClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxConnsPerHost:     maxConns,
			MaxIdleConns:        maxConns,
			MaxIdleConnsPerHost: maxConns,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter/perkey"
)

// report is a sitting's output; its JSON is -o json's. Durations are in
// seconds, rates in requests per second, sizes in bytes.
type report struct {
	DurationSeconds float64  `json:"durationSeconds"` // of each setup's load
	LateSeconds     float64  `json:"lateSeconds"`     // the heavy and well-behaved keys' start, after the churn's
	ChurnRate       int      `json:"churnRate"`       // distinct keys a second asked, each sent once
	HeavyRate       int      `json:"heavyRate"`
	WellKeys        int      `json:"wellKeys"`
	WellRate        int      `json:"wellRate"` // per key
	MaxInFlight     int      `json:"maxInFlight"`
	Rule            rule     `json:"rule"`
	Interrupted     bool     `json:"interrupted"` // Ctrl-C: the results are partial
	Results         []result `json:"results"`
}

// rule is the per-key rule of setup perkey.
type rule struct {
	Key                 string `json:"key"`
	VisitThreshold      int    `json:"visitThreshold"` // a window of 10s, the default
	TokensPerSecond     int    `json:"tokensPerSecond"`
	TokenBucketSize     int    `json:"tokenBucketSize"`
	ConcurrentThreshold int    `json:"concurrentThreshold"`
	MaxKeys             int    `json:"maxKeys"`
	// TableBytes is the memory a table of the rule holds, allocated when
	// the config loads and fixed whatever the keys (limiter/perkey's
	// Table.Bytes); 0 if the rule is beyond limiter/perkey's limits.
	TableBytes int `json:"tableBytes"`
}

func newReport(o options) *report {
	r := &report{
		DurationSeconds: o.duration.Seconds(), LateSeconds: o.late.Seconds(), ChurnRate: o.churnRate, HeavyRate: o.heavyRate,
		WellKeys: o.wellKeys, WellRate: o.wellRate, MaxInFlight: o.maxInFlight,
		Rule: rule{Key: "header:X-Api-Key", VisitThreshold: ruleVisits, TokensPerSecond: ruleRate, TokenBucketSize: ruleSize,
			ConcurrentThreshold: ruleConcurrent, MaxKeys: o.maxKeys},
	}
	if t, err := perkey.New(ruleSettings(o)); err == nil {
		r.Rule.TableBytes = t.Bytes()
	}
	return r
}

// result is one setup's run, or (Error set) a setup whose proxy did not
// start.
type result struct {
	Setup           string   `json:"setup"`
	Error           string   `json:"error,omitempty"`
	Notes           []string `json:"notes,omitempty"`
	DurationSeconds float64  `json:"durationSeconds"`
	Heavy           tally    `json:"heavy"`
	Well            tally    `json:"well"`
	Churn           tally    `json:"churn"`
	// The heavy key's limit (setup perkey): its bucket over the span from
	// its first request sent to its last, ruleSize + ruleRate × span, and
	// what it was admitted, in percent of it.
	HeavySpanSeconds    float64 `json:"heavySpanSeconds,omitempty"`
	HeavyLimit          float64 `json:"heavyLimit,omitempty"`
	HeavyPercentOfLimit float64 `json:"heavyPercentOfLimit,omitempty"`
	Proxy               usage   `json:"proxy"`
	// KeysTracked is /status's tracked after the load; HeaviestIsHeavy
	// tells whether /status's heaviest key is the heavy key.
	KeysTracked     int      `json:"keysTracked,omitempty"`
	HeaviestIsHeavy bool     `json:"heaviestIsHeavy,omitempty"`
	Metrics         []string `json:"metrics,omitempty"` // /metrics lines: the rule's, the requests counted, the connections
}

// usage is what the proxy process used, from /proc.
type usage struct {
	StartRSSBytes int64   `json:"startRSSBytes"` // VmRSS once serving, before the load
	PeakRSSBytes  int64   `json:"peakRSSBytes"`  // VmHWM after the load: the peak since start
	EndRSSBytes   int64   `json:"endRSSBytes"`   // VmRSS after the load
	CPUSeconds    float64 `json:"cpuSeconds"`    // user + system, since start
	CPUPercent    float64 `json:"cpuPercent"`    // of one core, over the load
}

// tally sums up one stream.
type tally struct {
	Due           int64            `json:"due"`     // requests due in the stream's span
	Sent          int64            `json:"sent"`    // sent
	Dropped       int64            `json:"dropped"` // due while -max-inflight were outstanding: not sent
	Served        int64            `json:"served"`  // 200, not degraded
	Degraded      map[string]int64 `json:"degraded"`
	Failed        int64            `json:"failed"` // no answer, or another one
	FirstFailure  string           `json:"firstFailure,omitempty"`
	ServedPercent float64          `json:"servedPercent"` // Served ÷ Due × 100: a request not sent is not served
	SentPerSecond float64          `json:"sentPerSecond"` // Sent ÷ the stream's span
	LagP99Seconds float64          `json:"lagP99Seconds"` // of the sent requests, from the moment due to the moment sent
}

// summarize sums up s once its pacer returned.
func summarize(s *stream) tally {
	t := tally{Due: int64(s.due()), Sent: s.sent.Load(), Dropped: s.dropped.Load(), Served: s.served.Load(), Failed: s.failed.Load(),
		Degraded: map[string]int64{}}
	for i, name := range keyStrategies {
		t.Degraded[name] = s.degraded[i].Load()
	}
	if f := s.firstFailure.Load(); f != nil {
		t.FirstFailure = *f
	}
	if t.Due > 0 {
		t.ServedPercent = 100 * float64(t.Served) / float64(t.Due)
	}
	if s.span > 0 {
		t.SentPerSecond = float64(t.Sent) / s.span.Seconds()
	}
	t.LagP99Seconds = percentile(s.lags, 0.99).Seconds()
	return t
}

// percentile returns the nearest-rank p-quantile (0 < p <= 1) of ds, 0
// for none. It sorts ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// write prints the report as text or JSON.
func (r *report) write(w io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "per-key churn: %v a setup; churn %d new keys/s (each sent once); heavy key %d/s and %d well-behaved keys × %d/s from %v\n",
		dur(r.DurationSeconds), r.ChurnRate, r.HeavyRate, r.WellKeys, r.WellRate, dur(r.LateSeconds))
	fmt.Fprintf(w, "rule (setup perkey): %s, visitThreshold %d a 10s window, bucket %d/s holding %d, concurrentThreshold %d, maxKeys %d "+
		"(its table: %.2f MiB, fixed); max-inflight %d\n", r.Rule.Key, r.Rule.VisitThreshold, r.Rule.TokensPerSecond, r.Rule.TokenBucketSize,
		r.Rule.ConcurrentThreshold, r.Rule.MaxKeys, mib(int64(r.Rule.TableBytes)), r.MaxInFlight)
	if r.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: partial results")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	io.WriteString(tw, "setup\tstream\tdue\tsent\tsent/s\tdropped\tserved\tserved%\tkey_visit\tkey_token_bucket\tkey_concurrent\tfailed\tlag99\t\n")
	for _, res := range r.Results {
		if res.Error != "" {
			continue
		}
		for _, s := range []struct {
			name string
			t    tally
		}{{"heavy", res.Heavy}, {"well", res.Well}, {"churn", res.Churn}} {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%d\t%d\t%.2f\t%d\t%d\t%d\t%d\t%s\t\n", res.Setup, s.name, s.t.Due, s.t.Sent, s.t.SentPerSecond,
				s.t.Dropped, s.t.Served, s.t.ServedPercent, s.t.Degraded["key_visit"], s.t.Degraded["key_token_bucket"], s.t.Degraded["key_concurrent"],
				s.t.Failed, dur(s.t.LagP99Seconds).Round(time.Millisecond))
		}
	}
	tw.Flush()
	var base *result
	for i, res := range r.Results {
		if res.Setup == "none" && res.Error == "" {
			base = &r.Results[i]
		}
	}
	for _, res := range r.Results {
		fmt.Fprintf(w, "\n%s:\n", res.Setup)
		if res.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", res.Error)
			continue
		}
		if res.HeavyLimit > 0 {
			fmt.Fprintf(w, "  heavy key: admitted %d over %.2fs (%.2f/s); its limit %d + %d/s × %.2fs = %.1f (%.2f/s): %.1f%% of it (%+.1f%%)\n",
				res.Heavy.Served, res.HeavySpanSeconds, float64(res.Heavy.Served)/res.HeavySpanSeconds, ruleSize, ruleRate, res.HeavySpanSeconds,
				res.HeavyLimit, res.HeavyLimit/res.HeavySpanSeconds, res.HeavyPercentOfLimit, res.HeavyPercentOfLimit-100)
			fmt.Fprintf(w, "  keys tracked exactly after the load: %d; /status's heaviest key is the heavy key: %v\n", res.KeysTracked, res.HeaviestIsHeavy)
		}
		fmt.Fprintf(w, "  well-behaved keys served: %.2f%%; churn keys served: %.2f%% (%d distinct keys sent, %.0f/s)\n",
			res.Well.ServedPercent, res.Churn.ServedPercent, res.Churn.Sent, res.Churn.SentPerSecond)
		p := res.Proxy
		fmt.Fprintf(w, "  proxy: peak RSS (VmHWM) %.1f MiB; RSS %.1f MiB at start, %.1f MiB at the end; CPU %.1fs (%.0f%% of a core)",
			mib(p.PeakRSSBytes), mib(p.StartRSSBytes), mib(p.EndRSSBytes), p.CPUSeconds, p.CPUPercent)
		if base != nil && res.Setup != "none" && base.Proxy.PeakRSSBytes > 0 {
			fmt.Fprintf(w, "; peak %+.1f MiB against setup none", mib(p.PeakRSSBytes-base.Proxy.PeakRSSBytes))
		}
		fmt.Fprintln(w)
		for _, s := range []tally{res.Heavy, res.Well, res.Churn} {
			if s.FirstFailure != "" {
				fmt.Fprintf(w, "  first failure: %s\n", s.FirstFailure)
			}
		}
		for _, n := range res.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		for _, l := range res.Metrics {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	return nil
}

// mib is bytes in MiB.
func mib(b int64) float64 { return float64(b) / (1 << 20) }

// dur formats seconds as a duration.
func dur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

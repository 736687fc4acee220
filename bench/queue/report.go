package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"
)

// report is a sitting's output; its JSON is -o json's. Durations are in
// seconds, rates in requests per second.
type report struct {
	CapacityPerSecond float64  `json:"capacityPerSecond"` // workers ÷ service
	Workers           int      `json:"workers"`
	ServiceSeconds    float64  `json:"serviceSeconds"`
	SLOSeconds        float64  `json:"sloSeconds"` // the client gives up at twice it
	WarmupSeconds     float64  `json:"warmupSeconds"`
	DurationSeconds   float64  `json:"durationSeconds"` // of a rung's steady window
	Seed              uint64   `json:"seed"`
	MaxInFlight       int      `json:"maxInFlight"`
	Interrupted       bool     `json:"interrupted"` // Ctrl-C: the results are partial
	Results           []result `json:"results"`
}

func newReport(o options) *report {
	return &report{
		CapacityPerSecond: o.capacity(), Workers: o.workers, ServiceSeconds: o.service.Seconds(),
		SLOSeconds: o.slo.Seconds(), WarmupSeconds: o.warmup.Seconds(), DurationSeconds: o.duration.Seconds(),
		Seed: o.seed, MaxInFlight: o.maxInFlight,
	}
}

// result is one setup at one rung, or (Rung empty, Error set) a setup that
// could not run.
type result struct {
	Setup        string   `json:"setup"`
	Rung         string   `json:"rung,omitempty"`
	Error        string   `json:"error,omitempty"`
	Notes        []string `json:"notes,omitempty"`
	Steady       *window  `json:"steady,omitempty"` // arrivals due after the warmup
	All          *window  `json:"all,omitempty"`    // every arrival, the warmup's included
	QueueMetrics []string `json:"queueMetrics,omitempty"`
}

// window sums up the arrivals due in a stretch of a rung.
type window struct {
	Seconds          float64          `json:"seconds"`
	OfferedPerSecond float64          `json:"offeredPerSecond"` // arrivals ÷ Seconds
	GoodputPerSecond float64          `json:"goodputPerSecond"` // good answers ÷ Seconds
	CapacityPercent  float64          `json:"capacityPercent"`  // goodput ÷ capacity × 100
	LagP99Seconds    float64          `json:"lagP99Seconds"`    // the client's own delay in sending
	Classes          map[string]tally `json:"classes"`
	Total            tally            `json:"total"`
}

// tally counts one class's arrivals (or all of them) in a window.
type tally struct {
	Offered       int     `json:"offered"`       // arrivals due
	ClientDropped int     `json:"clientDropped"` // not sent: -max-inflight were outstanding
	Sent          int     `json:"sent"`
	Good          int     `json:"good"`          // a 200, not degraded, complete within the SLO of the moment due
	ServedPercent float64 `json:"servedPercent"` // Good ÷ Sent × 100
	Degraded      int     `json:"degraded"`      // answers with Sds-Degraded: the proxy's fallback
	Late          int     `json:"late"`          // a 200, not degraded, complete past the SLO
	Failed        int     `json:"failed"`        // no complete answer (refused, client timeout, broken), or another status
	P50Seconds    float64 `json:"p50Seconds"`    // of the good answers' latency from the moment due; 0: none
	P99Seconds    float64 `json:"p99Seconds"`
}

// summarize sums up the arrivals due in [from, to), judged by o.slo
// against o.capacity().
func summarize(sched []arrival, recs []record, from, to time.Duration, o options) *window {
	w := &window{Seconds: (to - from).Seconds(), Classes: map[string]tally{}}
	var good [len(classes) + 1][]time.Duration
	var all, lags []time.Duration
	var ts [len(classes) + 1]tally
	for i, rec := range recs {
		a := sched[i]
		if a.at < from || a.at >= to {
			continue
		}
		t := &ts[a.class]
		t.Offered++
		lags = append(lags, rec.lag)
		switch {
		case rec.dropped:
			t.ClientDropped++
			continue
		case rec.degraded:
			t.Degraded++
		case rec.status == 200 && rec.latency <= o.slo:
			t.Good++
			good[a.class] = append(good[a.class], rec.latency)
			all = append(all, rec.latency)
		case rec.status == 200:
			t.Late++
		default:
			t.Failed++
		}
		t.Sent++
	}
	for _, c := range classes {
		w.Classes[c.name()] = ts[c].finish(good[c])
		w.Total = w.Total.add(ts[c])
	}
	w.Total = w.Total.finish(all)
	if w.Seconds > 0 {
		w.OfferedPerSecond = float64(w.Total.Offered) / w.Seconds
		w.GoodputPerSecond = float64(w.Total.Good) / w.Seconds
		w.CapacityPercent = w.GoodputPerSecond / o.capacity() * 100
	}
	w.LagP99Seconds = percentile(lags, 0.99).Seconds()
	return w
}

// add returns t with u's counts added (not its percentiles).
func (t tally) add(u tally) tally {
	t.Offered += u.Offered
	t.ClientDropped += u.ClientDropped
	t.Sent += u.Sent
	t.Good += u.Good
	t.Degraded += u.Degraded
	t.Late += u.Late
	t.Failed += u.Failed
	return t
}

// finish fills in t's served percent and the percentiles of good, the
// good answers' latencies (sorted in place).
func (t tally) finish(good []time.Duration) tally {
	if t.Sent > 0 {
		t.ServedPercent = float64(t.Good) / float64(t.Sent) * 100
	}
	slices.Sort(good)
	t.P50Seconds = percentile(good, 0.50).Seconds()
	t.P99Seconds = percentile(good, 0.99).Seconds()
	return t
}

// percentile returns the nearest-rank p-quantile (0 < p <= 1) of sorted
// ds, 0 for none. It sorts ds if it is not sorted.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	if !slices.IsSorted(ds) {
		slices.Sort(ds)
	}
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
	fmt.Fprintf(w, "capacity %d workers × %v = %.0f req/s; SLO %v from the moment due (client timeout %v); "+
		"per rung %v warmup + %v steady; seed %d; max-inflight %d\n",
		r.Workers, dur(r.ServiceSeconds), r.CapacityPerSecond, dur(r.SLOSeconds), dur(2*r.SLOSeconds),
		dur(r.WarmupSeconds), dur(r.DurationSeconds), r.Seed, r.MaxInFlight)
	if r.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: partial results")
	}
	fmt.Fprintln(w, "\nsteady (arrivals due after the warmup):")
	r.table(w, func(res result) *window { return res.Steady })
	fmt.Fprintln(w, "\nall (the warmup included):")
	r.table(w, func(res result) *window { return res.All })
	for _, res := range r.Results {
		if res.Error != "" {
			fmt.Fprintf(w, "\n%s: error: %s\n", res.Setup, res.Error)
			continue
		}
		res.details(w)
	}
	return nil
}

// table prints one line per result: the window pick chooses.
func (r *report) table(w io.Writer, pick func(result) *window) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	io.WriteString(tw, "setup\trung\toffered/s\tgoodput/s\t%cap\tcrit%\tdef%\tshed%\tall%\tp50\tp99\tdropped\tlag99\t\n")
	var errs []string
	for _, res := range r.Results {
		if res.Error != "" {
			errs = append(errs, fmt.Sprintf("%s: error: %s", res.Setup, short(res.Error)))
			continue
		}
		win := pick(res)
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n",
			res.Setup, res.Rung, win.OfferedPerSecond, win.GoodputPerSecond, win.CapacityPercent,
			pct(win.Classes[critical.name()]), pct(win.Classes[normal.name()]), pct(win.Classes[sheddable.name()]),
			pct(win.Total), secs(win.Total.P50Seconds), secs(win.Total.P99Seconds), win.Total.ClientDropped,
			secs(win.LagP99Seconds))
	}
	tw.Flush()
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}
}

// details prints a result's counts per class, both windows, its notes and
// its queue metrics.
func (res result) details(w io.Writer) {
	fmt.Fprintf(w, "\n%s %s: client lag p99 %v steady, %v all\n", res.Setup, res.Rung,
		secs(res.Steady.LagP99Seconds), secs(res.All.LagP99Seconds))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  window\tclass\toffered\tdropped\tsent\tgood\tserved%\tdegraded\tlate\tfailed\tp50\tp99\t")
	for _, wn := range []struct {
		name string
		win  *window
	}{{"steady", res.Steady}, {"all", res.All}} {
		for _, name := range []string{critical.name(), normal.name(), sheddable.name(), "all"} {
			t, ok := wn.win.Classes[name]
			if !ok {
				t = wn.win.Total
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t\n", wn.name, name,
				t.Offered, t.ClientDropped, t.Sent, t.Good, pct(t), t.Degraded, t.Late, t.Failed,
				secs(t.P50Seconds), secs(t.P99Seconds))
		}
	}
	tw.Flush()
	for _, n := range res.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if res.Setup == "queue" && len(res.QueueMetrics) == 0 {
		fmt.Fprintf(w, "  no %s* metrics\n", queueMetricPrefix)
	}
	for _, l := range res.QueueMetrics {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

// pct formats a tally's served percent, "-" when nothing was sent.
func pct(t tally) string {
	if t.Sent == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", t.ServedPercent)
}

// secs formats seconds as a short duration: "52ms", "1.2s", "-" for 0.
func secs(s float64) string {
	if s == 0 {
		return "-"
	}
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d < 10*time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// dur formats seconds as a duration.
func dur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// short cuts an error message for a table line (the details print it all).
func short(msg string) string {
	const width = 100
	if len(msg) <= width {
		return msg
	}
	return msg[:width] + " ... (below)"
}

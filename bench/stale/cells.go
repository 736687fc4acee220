package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

// answerKind is a kind of upstream answer the CPU cells ask for, by the
// sds-upstream knob that makes it so.
type answerKind struct {
	name  string
	query string
}

// answerKinds: private is what a point with stale: reads and refuses
// (its Cache-Control is parsed: the dearest refusal); max-age=60 is kept,
// each answer copied aside and put in the cache.
var answerKinds = []answerKind{
	{"not-kept", "header=Cache-Control:private,max-age%3D60"},
	{"kept", "header=Cache-Control:max-age%3D60"},
}

// setupNames are the two proxies of the CPU cells, both with the same
// point but for stale:.
var setupNames = [2]string{"plain", "stale"}

// sample is one cell's measure in one round.
type sample struct {
	cpuPerRequest time.Duration // the proxy's CPU (user + system) ÷ ok answers
	perSecond     float64       // ok answers per second
	failed        int
}

// cpuCells measures every answer kind through both proxies, -rounds
// times, the cells interleaved (reversed every other round, so that
// neither proxy always goes first), and sums them up.
func (e *env) cpuCells(ctx context.Context) ([]CPURow, error) {
	var pxs [2]*proxyProc
	for i, name := range setupNames {
		px, err := e.startProxy(ctx, "cpu-"+name, i == 1)
		if err != nil {
			return nil, fmt.Errorf("%s proxy: %w", name, err)
		}
		defer px.Stop()
		pxs[i] = px
	}
	type cell struct{ kind, setup int }
	var order []cell
	for k := range answerKinds {
		for s := range setupNames {
			order = append(order, cell{k, s})
		}
	}
	samples := make([][2][]sample, len(answerKinds))
	for round := range e.o.rounds {
		cells := slices.Clone(order)
		if round%2 == 1 {
			slices.Reverse(cells)
		}
		for _, c := range cells {
			if ctx.Err() != nil {
				return rows(samples), nil
			}
			s, err := e.cell(ctx, pxs[c.setup], answerKinds[c.kind], round)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(e.log, "round %d %-8s %-5s %7.2f µs CPU/request, %6.0f/s, %d failed\n", round+1,
				answerKinds[c.kind].name, setupNames[c.setup], micros(s.cpuPerRequest), s.perSecond, s.failed)
			samples[c.kind][c.setup] = append(samples[c.kind][c.setup], s)
		}
	}
	return rows(samples), nil
}

// cell sends -warmup then -requests GETs of answer kind a through px,
// cycling over -urls URLs (the same ones in every round and through both
// proxies), and measures the proxy's CPU over the measured ones.
func (e *env) cell(ctx context.Context, px *proxyProc, a answerKind, round int) (sample, error) {
	url := func(i int) string {
		return fmt.Sprintf("http://%s/%s/%d?body=%d&%s", px.listen, a.name, i%e.o.urls, e.o.body, a.query)
	}
	from := round * (e.o.warmup + e.o.requests)
	drive(ctx, e.client, url, from, e.o.warmup, e.o.conns)
	pid := px.Pid()
	before, err := benchproc.CPUTime(pid)
	if err != nil {
		return sample{}, err
	}
	res := drive(ctx, e.client, url, from+e.o.warmup, e.o.requests, e.o.conns)
	after, err := benchproc.CPUTime(pid)
	if err != nil {
		return sample{}, err
	}
	if res.ok == 0 {
		return sample{}, fmt.Errorf("%s through %s: no answer of %d was a 200 (%s)", a.name, px.listen, e.o.requests, px.LogTail())
	}
	return sample{cpuPerRequest: (after - before) / time.Duration(res.ok), perSecond: float64(res.ok) / res.took.Seconds(), failed: res.failed}, nil
}

// CPURow is one answer kind's figures: medians over the rounds.
type CPURow struct {
	Answer string `json:"answer"`
	// PlainMicros and StaleMicros are the proxy's CPU per request, in
	// microseconds, without and with stale:.
	PlainMicros float64 `json:"plainMicros"`
	StaleMicros float64 `json:"staleMicros"`
	// Ratio is the median of the rounds' StaleMicros ÷ PlainMicros, each
	// round's pair measured one after the other; Ratios are the rounds'.
	Ratio  float64   `json:"ratio"`
	Ratios []float64 `json:"ratios"`
	// PlainPerSecond and StalePerSecond are the answers per second the
	// closed loop got.
	PlainPerSecond float64 `json:"plainPerSecond"`
	StalePerSecond float64 `json:"stalePerSecond"`
	Failed         int     `json:"failed"`
}

// rows sums up the samples: medians of every figure and of the rounds'
// ratios.
func rows(samples [][2][]sample) []CPURow {
	var out []CPURow
	for k, s := range samples {
		n := min(len(s[0]), len(s[1]))
		if n == 0 {
			continue
		}
		row := CPURow{Answer: answerKinds[k].name}
		var cpu [2][]float64
		var rate [2][]float64
		for i := range 2 {
			for _, x := range s[i][:n] {
				cpu[i] = append(cpu[i], micros(x.cpuPerRequest))
				rate[i] = append(rate[i], x.perSecond)
				row.Failed += x.failed
			}
		}
		for i := range n {
			row.Ratios = append(row.Ratios, cpu[1][i]/cpu[0][i])
		}
		row.PlainMicros, row.StaleMicros = median(cpu[0]), median(cpu[1])
		row.PlainPerSecond, row.StalePerSecond = median(rate[0]), median(rate[1])
		row.Ratio = median(row.Ratios)
		out = append(out, row)
	}
	return out
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// median returns the median of xs (the mean of the two middle ones for an
// even count), without changing xs.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// FloodRow is one proxy's figures after the flood.
type FloodRow struct {
	Setup string `json:"setup"`
	// OK and Failed count the flood's answers.
	OK     int `json:"ok"`
	Failed int `json:"failed"`
	// Seconds is how long the flood took; CPUMicros the proxy's CPU per
	// request over it.
	Seconds   float64 `json:"seconds"`
	CPUMicros float64 `json:"cpuMicros"`
	// HWMBefore and HWM are the proxy's peak RSS (VmHWM) before and after
	// the flood, RSS its VmRSS after, in bytes.
	HWMBefore int64 `json:"hwmBefore"`
	HWM       int64 `json:"hwm"`
	RSS       int64 `json:"rss"`
	// CacheBytes, Entries and MaxBytes are sds_stale_cache_bytes,
	// sds_stale_cache_entries and sds_stale_cache_max_bytes after it.
	CacheBytes float64 `json:"cacheBytes"`
	Entries    float64 `json:"entries"`
	MaxBytes   float64 `json:"maxBytes"`
}

// floods sends -flood distinct URLs through a fresh proxy without stale:,
// then through one with it, and reads each one's memory and cache.
func (e *env) floods(ctx context.Context) ([]FloodRow, error) {
	var out []FloodRow
	for i, name := range setupNames {
		if ctx.Err() != nil {
			break
		}
		row, err := e.flood(ctx, name, i == 1)
		if err != nil {
			return out, err
		}
		fmt.Fprintf(e.log, "flood %-5s %d ok in %.1fs: VmHWM %.1f MiB, cache %.0f bytes in %.0f entries\n",
			name, row.OK, row.Seconds, mib(row.HWM), row.CacheBytes, row.Entries)
		out = append(out, row)
	}
	return out, nil
}

// flood measures one proxy under the flood.
func (e *env) flood(ctx context.Context, name string, stale bool) (FloodRow, error) {
	row := FloodRow{Setup: name}
	px, err := e.startProxy(ctx, "flood-"+name, stale)
	if err != nil {
		return row, fmt.Errorf("%s proxy: %w", name, err)
	}
	defer px.Stop()
	pid := px.Pid()
	if row.HWMBefore, _, err = benchproc.Memory(pid); err != nil {
		return row, err
	}
	cpu0, err := benchproc.CPUTime(pid)
	if err != nil {
		return row, err
	}
	url := func(i int) string {
		return fmt.Sprintf("http://%s/flood/%d?body=%d&header=Cache-Control:max-age%%3D600", px.listen, i, e.o.floodBody)
	}
	res := drive(ctx, e.client, url, 0, e.o.flood, e.o.conns)
	cpu1, err := benchproc.CPUTime(pid)
	if err != nil {
		return row, err
	}
	row.OK, row.Failed, row.Seconds = res.ok, res.failed, res.took.Seconds()
	if res.ok > 0 {
		row.CPUMicros = micros((cpu1 - cpu0) / time.Duration(res.ok))
	}
	if row.HWM, row.RSS, err = benchproc.Memory(pid); err != nil {
		return row, err
	}
	for _, m := range []struct {
		name string
		v    *float64
	}{{"sds_stale_cache_bytes", &row.CacheBytes}, {"sds_stale_cache_entries", &row.Entries}, {"sds_stale_cache_max_bytes", &row.MaxBytes}} {
		if *m.v, err = px.metric(ctx, e.client, m.name); err != nil {
			return row, err
		}
	}
	return row, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

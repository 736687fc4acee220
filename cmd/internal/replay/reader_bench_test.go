package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// benchLog is a realistic log of n lines: requests arriving at about 200
// a second (100,000 lines span eight minutes, more than the horizon) on
// three points, most forwarded in a few milliseconds (start, ended,
// outcome; some waited, some failed), a tail of slow ones up to two
// seconds, a tenth degraded, per-key labels on one point, and a line of
// the proxy's own now and then; written in the order requests ended, as
// the proxy writes them.
func benchLog(n int) []byte {
	const layout = "2006-01-02T15:04:05.000000Z07:00"
	rng := rand.New(rand.NewPCG(1, 2))
	type req struct {
		end  time.Time
		line string
	}
	reqs := make([]req, 0, n)
	points := []string{"api", "search", "checkout"}
	paths := []string{"/v1/orders", "/v1/orders/42", "/search", "/v1/cart/items", "/healthz"}
	arrived := t0
	for i := range n {
		arrived = arrived.Add(time.Duration(rng.ExpFloat64() * float64(5*time.Millisecond)))
		if i%500 == 499 {
			reqs = append(reqs, req{arrived, fmt.Sprintf(`{"level":"warn","ts":"%s","msg":"point tripped","point":"api","strategy":"visit","count":101,"threshold":100}`, arrived.Format(tsLayout))})
			continue
		}
		p := points[rng.IntN(len(points))]
		latency := time.Duration(rng.ExpFloat64() * float64(3*time.Millisecond))
		if rng.IntN(100) == 0 {
			latency = time.Duration(rng.Int64N(int64(2 * time.Second)))
		}
		var extra bytes.Buffer
		status, strategy, degraded := 200, "", false
		end := arrived.Add(50 * time.Microsecond)
		if rng.IntN(10) == 0 {
			status, strategy, degraded, latency = 429, "visit", true, 0
		} else {
			var waited time.Duration
			if rng.IntN(20) == 0 {
				waited = time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
			}
			start := arrived.Add(waited)
			ended := start.Add(latency + 20*time.Microsecond)
			end = ended.Add(30 * time.Microsecond)
			outcome := "ok"
			if rng.IntN(50) == 0 {
				status, outcome = 503, "failed"
			}
			fmt.Fprintf(&extra, `,"start":"%s"`, start.Format(layout))
			if waited > 0 {
				fmt.Fprintf(&extra, `,"waited":"%s"`, waited)
			}
			fmt.Fprintf(&extra, `,"outcome":"%s"`, outcome)
			if status == 503 {
				extra.WriteString(`,"error":"status_5xx"`)
			}
			fmt.Fprintf(&extra, `,"ended":"%s"`, ended.Format(layout))
		}
		if p == "checkout" {
			fmt.Fprintf(&extra, `,"keys":["%016x",""]`, rng.Uint64N(1000))
		}
		line := fmt.Sprintf(`{"level":"info","ts":"%s","logger":"access","msg":"request","point":%q,"arrived":"%s","host":"shop.example","method":"GET","path":%q,"priority":"default","status":%d,"strategy":%q,"degraded":%v,"shadow":false,"upstream_latency":"%s"%s}`,
			end.Format(tsLayout), p, arrived.Format(layout), paths[rng.IntN(len(paths))], status, strategy, degraded, latency, extra.String())
		reqs = append(reqs, req{end, line})
	}
	slices.SortStableFunc(reqs, func(a, b req) int { return a.end.Compare(b.end) })
	var log bytes.Buffer
	for _, r := range reqs {
		log.WriteString(r.line)
		log.WriteByte('\n')
	}
	return log.Bytes()
}

// BenchmarkReader reads a realistic log of 100,000 lines to its end: its
// figures are lines/s and allocs/line (docs/benchmarks.md).
func BenchmarkReader(b *testing.B) {
	const lines = 100_000
	log := benchLog(lines)
	b.SetBytes(int64(len(log)))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	runs := 0
	for b.Loop() {
		rd := NewReader(bytes.NewReader(log), ReaderOptions{})
		n := 0
		for _, ok := rd.Next(); ok; _, ok = rd.Next() {
			n++
		}
		if st := rd.Stats(); st.Lines != lines || n != st.Access || st.Late != 0 {
			b.Fatalf("%d entries, stats %+v", n, st)
		}
		runs++
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(lines*runs)/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(lines*runs), "allocs/line")
}

// BenchmarkScan reads the lines of the same log into their fields alone,
// without ordering: with the reader's scanner, and with encoding/json into
// a struct of the same fields (the baseline that the scanner replaces).
func BenchmarkScan(b *testing.B) {
	const lines = 100_000
	log := bytes.Split(bytes.TrimSuffix(benchLog(lines), []byte("\n")), []byte("\n"))
	run := func(b *testing.B, decode func([]byte) bool) {
		b.ReportAllocs()
		for b.Loop() {
			for _, line := range log {
				if !decode(line) {
					b.Fatalf("%s: not read", line)
				}
			}
		}
		b.ReportMetric(float64(lines*b.N)/b.Elapsed().Seconds(), "lines/s")
	}
	b.Run("scanner", func(b *testing.B) {
		rd := NewReader(bytes.NewReader(nil), ReaderOptions{})
		var l accessLine
		run(b, func(line []byte) bool {
			l = accessLine{}
			return rd.scan(line, &l)
		})
	})
	b.Run("encoding_json", func(b *testing.B) {
		type jsonLine struct {
			TS, Logger, Msg, Point, Arrived, Host, Method, Path, Priority string
			Strategy, Start, Ended, Outcome, Error, Forced, Key           string
			Latency                                                       string `json:"upstream_latency"`
			Waited                                                        string
			Status                                                        *int
			Degraded, Shadow, Stale                                       bool
			Pressure                                                      bool `json:"pressure_test"`
			Keys                                                          []string
		}
		var l jsonLine
		run(b, func(line []byte) bool {
			l = jsonLine{}
			return json.Unmarshal(line, &l) == nil
		})
	})
}

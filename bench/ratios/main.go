// Command ratios reads the peer harness's results.tsv files and prints, for
// each run, the figures of the proxy it measured (sds-proxy in a setup of
// bench/run, or bench/floor) against go-bare's (a bare
// httputil.ReverseProxy) measured in the same run: the targets.
//
//	go run ./bench/ratios RESULTS/all/results.tsv RESULTS/degraded/results.tsv ...
//
// Every figure is a median over the run's rounds; peak RSS is the largest
// VmHWM seen. "added p50" is the constant-rate p50 less the upstream's own
// (direct) in the same run.
package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// run holds one results.tsv: mode -> target -> column -> the rounds' values.
type run map[string]map[string]map[string][]float64

func read(path string) (run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := run{}
	var cols []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		fields := strings.Split(line, "\t")
		if cols == nil {
			cols = fields
			continue
		}
		if len(fields) != len(cols) {
			return nil, fmt.Errorf("%s: a row of %d fields, want %d", path, len(fields), len(cols))
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = fields[i]
		}
		mode, target := row["mode"], row["target"]
		if r[mode] == nil {
			r[mode] = map[string]map[string][]float64{}
		}
		if r[mode][target] == nil {
			r[mode][target] = map[string][]float64{}
		}
		for c, v := range row {
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				r[mode][target][c] = append(r[mode][target][c], x)
			}
		}
		// proxy CPU microseconds per request
		rps, cpu, dur := num(row["rps"]), num(row["srv_cpu"]), num(row["dur"])
		r[mode][target]["us_req"] = append(r[mode][target]["us_req"], cpu*1e6/(rps*dur))
	}
	return r, sc.Err()
}

// harnessTargets are the targets every harness run measures beside the
// proxy under test.
var harnessTargets = map[string]bool{"direct": true, "nginx": true, "haproxy": true, "go-bare": true}

func num(s string) float64 {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return x
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Max(xs)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ratios RESULTS.tsv...")
		os.Exit(2)
	}
	fmt.Println("| run | target | req/s | × go-bare | CPU µs/req | × go-bare | p99 µs | × go-bare | peak RSS MiB | × go-bare | added p50 µs at constant rate | go-bare's |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, path := range os.Args[1:] {
		r, err := read(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		name := filepath.Base(filepath.Dir(path))
		conns, rate := r["conns"], r["rate"]
		bare := conns["go-bare"]
		for target, c := range conns {
			if harnessTargets[target] || strings.HasPrefix(target, "traefik") {
				continue
			}
			added, bareAdded := math.NaN(), math.NaN()
			if rate != nil && rate["direct"] != nil {
				d := median(rate["direct"]["p50"])
				if rate[target] != nil {
					added = median(rate[target]["p50"]) - d
				}
				if rate["go-bare"] != nil {
					bareAdded = median(rate["go-bare"]["p50"]) - d
				}
			}
			rss, bareRSS := maxOf(c["hwm_kb"])/1024, maxOf(bare["hwm_kb"])/1024
			fmt.Printf("| %s | %s | %.0f | %.2f | %.1f | %.2f | %.0f | %.2f | %.1f | %.2f | %.0f | %.0f |\n", name, target,
				median(c["rps"]), median(c["rps"])/median(bare["rps"]),
				median(c["us_req"]), median(c["us_req"])/median(bare["us_req"]),
				median(c["p99"]), median(c["p99"])/median(bare["p99"]),
				rss, rss/bareRSS, added, bareAdded)
		}
	}
}

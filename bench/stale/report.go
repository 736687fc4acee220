package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
)

// report is a sitting's figures.
type report struct {
	Machine     string     `json:"machine"`
	Options     Options    `json:"options"`
	CPU         []CPURow   `json:"cpu"`
	Flood       []FloodRow `json:"flood,omitempty"`
	Interrupted bool       `json:"interrupted,omitempty"`
}

// machine names the machine: its CPU model and count, the OS and Go.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if name, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs, %s/%s, %s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// write prints the report as text or JSON.
func (r *report) write(w io.Writer, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	o := r.Options
	var b strings.Builder
	fmt.Fprintf(&b, "bench/stale on %s\n", r.Machine)
	if r.Interrupted {
		b.WriteString("INTERRUPTED: the figures cover what was measured before\n")
	}
	fmt.Fprintf(&b, "\nThe proxy's CPU per request (user + system, /proc/PID/stat), median of %d rounds of %d requests\n"+
		"(after %d), %d clients, answers of %d bytes over %d URLs; plain: the point without stale:\n\n",
		o.Rounds, o.Requests, o.Warmup, o.Conns, o.Body, o.URLs)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "answer\tplain µs\tstale µs\tstale/plain\trounds' ratios\tplain /s\tstale /s\tfailed")
	for _, c := range r.CPU {
		ratios := make([]string, len(c.Ratios))
		for i, x := range c.Ratios {
			ratios[i] = fmt.Sprintf("%.3f", x)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.3f\t%s\t%.0f\t%.0f\t%d\n", c.Answer, c.PlainMicros, c.StaleMicros, c.Ratio,
			strings.Join(ratios, " "), c.PlainPerSecond, c.StalePerSecond, c.Failed)
	}
	tw.Flush()
	if len(r.Flood) > 0 {
		fmt.Fprintf(&b, "\nThe flood: %d distinct URLs, answers of %d bytes that may be kept, staleCache.maxBytes %s, %d clients\n\n",
			o.Flood, o.FloodBody, o.MaxBytes, o.Conns)
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "proxy\tok\tfailed\ttook\tCPU µs/req\tVmHWM before\tVmHWM after\tVmRSS after\tcache bytes\tentries\tmax bytes")
		for _, f := range r.Flood {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1fs\t%.2f\t%.1f MiB\t%.1f MiB\t%.1f MiB\t%.0f\t%.0f\t%.0f\n", f.Setup, f.OK, f.Failed, f.Seconds, f.CPUMicros,
				mib(f.HWMBefore), mib(f.HWM), mib(f.RSS), f.CacheBytes, f.Entries, f.MaxBytes)
		}
		tw.Flush()
	}
	_, err := io.WriteString(w, b.String())
	return err
}

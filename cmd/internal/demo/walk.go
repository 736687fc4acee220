package demo

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sds-proxy/sds-proxy/config"
)

// walkThrough is what demo prints once it serves: the addresses, then one
// section per point of the example that the config defines, with figures
// and loop counts taken from the config so that each command does what
// its text says. A section is nil when the config lacks its point or the
// setting the section shows.
type walkThrough struct {
	Service, Proxy, Admin, Config string
	BuiltIn                       bool   // the config is the built-in example
	Window                        string // the window's length
	Read                          *readWalk
	Create                        *createWalk
	Slow                          *slowWalk
	Flaky                         *flakyWalk
	Shadow                        *shadowWalk
	// Others names the config's points that no section shows.
	Others string
}

// readWalk is orders.read: its visit threshold, and pressure-test traffic.
type readWalk struct {
	Visit, Loop    int64
	PressureHeader string // "" when the point does not degrade pressure tests
}

// createWalk is orders.create: a token bucket.
type createWalk struct{ Rate, Size, Loop int64 }

// slowWalk is slow: timeouts, a delay and its probes, and the recovery
// ramp after the delay (Ramp 0: none).
type slowWalk struct {
	Timeout, Delay, Retry time.Duration
	Count, Loop           int64
	Ramp                  time.Duration // recoveryTime
	RampStart             int64         // recoveryStart, the percent admitted as the ramp starts
}

// flakyWalk is flaky: exceptions, and the share of tripped calls degraded.
type flakyWalk struct{ Exceptions, DowngradeRate, Loop int64 }

// shadowWalk is everything-else, a shadow point with a visit threshold.
type shadowWalk struct {
	Name        string
	Visit, Loop int64
}

// newWalkThrough returns the walk-through of file, served at the given
// URLs.
func newWalkThrough(file *config.File, service, proxy, admin, configPath string, builtIn bool) walkThrough {
	w := walkThrough{Service: service, Proxy: proxy, Admin: admin, Config: configPath, BuiltIn: builtIn, Window: file.Window.String()}
	shown := map[string]bool{}
	if p := file.Point("orders.read"); p != nil {
		if n, on := p.VisitThreshold.Get(); on && n > 0 {
			w.Read = &readWalk{Visit: n, Loop: n + 5}
			if p.PressureTestDowngrade {
				w.Read.PressureHeader = file.PressureTestHeader
			}
			shown[p.Name] = true
		}
	}
	if p := file.Point("orders.create"); p != nil {
		rate, rateOn := p.TokensPerSecond.Get()
		size, _ := p.TokenBucketSize.Get()
		if rateOn {
			w.Create = &createWalk{Rate: rate, Size: max(size, rate), Loop: 2 * max(size, rate)}
			shown[p.Name] = true
		}
	}
	if p := file.Point("slow"); p != nil {
		count, on := p.TimeoutCountThreshold.Get()
		if on && p.TimeoutThreshold > 0 {
			w.Slow = &slowWalk{Timeout: p.TimeoutThreshold, Count: count, Delay: p.DelayTime, Retry: p.RetryInterval, Loop: count + 2}
			if p.DelayTime > 0 && p.RecoveryTime > 0 {
				w.Slow.Ramp, w.Slow.RampStart = p.RecoveryTime, p.RecoveryStartPercent()
			}
			shown[p.Name] = true
		}
	}
	if p := file.Point("flaky"); p != nil {
		n, on := p.ExceptionThreshold.Get()
		if on {
			rate, rateOn := p.DowngradeRate.Get()
			if !rateOn {
				rate = 100
			}
			w.Flaky = &flakyWalk{Exceptions: n, DowngradeRate: rate, Loop: 4 * n}
			shown[p.Name] = true
		}
	}
	if p := file.Point("everything-else"); p != nil && p.Shadow {
		if n, on := p.VisitThreshold.Get(); on {
			w.Shadow = &shadowWalk{Name: p.Name, Visit: n, Loop: n + 10}
			shown[p.Name] = true
		}
	}
	var others []string
	for _, p := range file.Points {
		if !shown[p.Name] {
			others = append(others, p.Name)
		}
	}
	w.Others = strings.Join(others, ", ")
	return w
}

// statusCodes is curl's option that prints each answer's status code and
// a space.
const statusCodes = "-w '%{http_code} '"

// text returns the walk-through as demo prints it: the addresses, then a
// section per non-nil point, each after a blank line, then the other
// points. Its last line starts "Watch it happen".
func (w walkThrough) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sds-proxy demo is running. Open the dashboard first: %s/\n", w.Admin)
	fmt.Fprintf(&b, "It shows each point's state and counts live (also %s/status and /metrics).\n\n", w.Admin)
	fmt.Fprintf(&b, "  proxy         %s   send requests here\n", w.Proxy)
	fmt.Fprintf(&b, "  demo service  %s   the upstream; %s/_control changes it live\n", w.Service, w.Service)
	builtIn := ""
	if w.BuiltIn {
		builtIn = "a copy of the built-in example: "
	}
	fmt.Fprintf(&b, "  config        %s   %sedit it, changes apply within a second\n\n", w.Config, builtIn)
	b.WriteString("Degraded answers carry Sds-Degraded: STRATEGY; point=NAME, and never reach the service.\n")
	fmt.Fprintf(&b, "Counts are kept over a sliding window of %s: a point recovers as its trips age out.\n", w.Window)
	if r := w.Read; r != nil {
		fmt.Fprintf(&b, "\norders.read allows %d visits per window; the next ones get 429 (visit):\n", r.Visit)
		fmt.Fprintf(&b, "  for i in $(seq %d); do curl -s -o /dev/null %s %s/api/orders; done; echo\n", r.Loop, statusCodes, w.Proxy)
		if r.PressureHeader != "" {
			fmt.Fprintf(&b, "Pressure-test traffic (the %s header) is degraded at once (pressure_test):\n", r.PressureHeader)
			fmt.Fprintf(&b, "  curl -si -H '%s: 1' %s/api/orders | grep -E '^HTTP|^Sds-Degraded'\n", r.PressureHeader, w.Proxy)
		}
	}
	if c := w.Create; c != nil {
		fmt.Fprintf(&b, "\norders.create is a token bucket of %d per second holding %d: quick POSTs beyond the\n", c.Rate, c.Size)
		fmt.Fprintf(&b, "%d tokens get 429 (token_bucket), and the bucket refills as you wait:\n", c.Size)
		fmt.Fprintf(&b, "  for i in $(seq %d); do curl -s -o /dev/null %s -X POST %s/api/orders; done; echo\n", c.Loop, statusCodes, w.Proxy)
	}
	if s := w.Slow; s != nil {
		fmt.Fprintf(&b, "\nslow counts a call over %s as a timeout (the service takes 500ms); the %s trips it\n(timeout)", s.Timeout, ordinal(s.Count))
		if s.Delay != 0 {
			fmt.Fprintf(&b, ", and it stays degraded for %s", s.Delay)
			if s.Retry != 0 {
				fmt.Fprintf(&b, ", letting one probe through every %s", s.Retry)
			}
		}
		b.WriteString(":\n")
		fmt.Fprintf(&b, "  for i in $(seq %d); do curl -si %s/api/slow | grep -E '^HTTP|^Sds-Degraded'; done\n", s.Loop, w.Proxy)
		b.WriteString("Make the service fast again")
		if s.Retry != 0 {
			b.WriteString(", and the next probe ends the delay")
		}
		b.WriteString(":\n")
		fmt.Fprintf(&b, "  curl -s '%s/_control?slowLatency=10ms'\n", w.Service)
		if s.Ramp > 0 {
			fmt.Fprintf(&b, "The delay's end starts a recovery ramp of %s: slow forwards %d%% of the requests at first,\n", s.Ramp, s.RampStart)
			b.WriteString("rising to all of them, and the others still get the fallback, marked\n")
			b.WriteString("Sds-Degraded: recovery; point=slow (a timeout on the way trips it again). Send the loop\n")
			fmt.Fprintf(&b, "above again to watch the share grow; slow is closed once the %s are over.\n", s.Ramp)
		}
	}
	if f := w.Flaky; f != nil {
		fmt.Fprintf(&b, "\nflaky fails half its calls (500); the %s exception in the window trips it (exception),\n", ordinal(f.Exceptions))
		fmt.Fprintf(&b, "and %d%% of the tripped calls get 503 while the rest still try the service:\n", f.DowngradeRate)
		fmt.Fprintf(&b, "  for i in $(seq %d); do curl -s -o /dev/null %s %s/api/flaky; done; echo\n", f.Loop, statusCodes, w.Proxy)
		b.WriteString("Heal it, and it recovers as the failures leave the window:\n")
		fmt.Fprintf(&b, "  curl -s '%s/_control?errorRate=0'\n", w.Service)
	}
	if s := w.Shadow; s != nil {
		fmt.Fprintf(&b, "\n%s (any other path) is in shadow mode: past %d visits per window it would degrade,\n", s.Name, s.Visit)
		b.WriteString("but every answer still comes from the service, marked Sds-Shadow-Degraded instead:\n")
		// One curl sends them all on one connection (its URL glob): a loop
		// of processes may take longer than the window on a busy machine.
		fmt.Fprintf(&b, "  curl -s -o /dev/null -D - '%s/hello?[1-%d]' | grep -i '^Sds-Shadow' | sort | uniq -c\n", w.Proxy, s.Loop)
		b.WriteString("Switch it to mode: enforce in the config, and the same command gets 429s.\n")
	}
	if w.Others != "" {
		fmt.Fprintf(&b, "\nOther points of this config: %s. Send requests to their routes.\n", w.Others)
	}
	fmt.Fprintf(&b, "\nWatch it happen: %s/   Stop with Ctrl-C.\n", w.Admin)
	return b.String()
}

// ordinal returns n as 1st, 2nd, 3rd, 4th ... 11th, 12th, 13th, 21st.
func ordinal(n int64) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.FormatInt(n, 10) + suffix
}

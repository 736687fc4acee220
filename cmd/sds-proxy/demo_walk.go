package main

import (
	"strconv"
	"strings"
	"text/template"
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

// slowWalk is slow: timeouts, a delay and its probes.
type slowWalk struct {
	Timeout, Delay, Retry time.Duration
	Count, Loop           int64
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

// demoHelp prints a walkThrough. Its last line starts "Watch it happen".
var demoHelp = template.Must(template.New("demo").Funcs(template.FuncMap{"ordinal": ordinal}).Parse(strings.TrimLeft(`
sds-proxy demo is running. Open the dashboard first: {{.Admin}}/
It shows each point's state and counts live (also {{.Admin}}/status and /metrics).

  proxy         {{.Proxy}}   send requests here
  demo service  {{.Service}}   the upstream; {{.Service}}/_control changes it live
  config        {{.Config}}   {{if .BuiltIn}}a copy of the built-in example: {{end}}edit it, changes apply within a second

Degraded answers carry Sds-Degraded: STRATEGY; point=NAME, and never reach the service.
Counts are kept over a sliding window of {{.Window}}: a point recovers as its trips age out.
{{with .Read}}
orders.read allows {{.Visit}} visits per window; the next ones get 429 (visit):
  for i in $(seq {{.Loop}}); do curl -s -o /dev/null -w '%{http_code} ' {{$.Proxy}}/api/orders; done; echo
{{- if .PressureHeader}}
Pressure-test traffic (the {{.PressureHeader}} header) is degraded at once (pressure_test):
  curl -si -H '{{.PressureHeader}}: 1' {{$.Proxy}}/api/orders | grep -E '^HTTP|^Sds-Degraded'
{{- end}}
{{end}}
{{- with .Create}}
orders.create is a token bucket of {{.Rate}} per second holding {{.Size}}: quick POSTs beyond the
{{.Size}} tokens get 429 (token_bucket), and the bucket refills as you wait:
  for i in $(seq {{.Loop}}); do curl -s -o /dev/null -w '%{http_code} ' -X POST {{$.Proxy}}/api/orders; done; echo
{{end}}
{{- with .Slow}}
slow counts a call over {{.Timeout}} as a timeout (the service takes 500ms); the {{ordinal .Count}} trips it
(timeout){{if .Delay}}, and it stays degraded for {{.Delay}}{{if .Retry}}, letting one probe through every {{.Retry}}{{end}}{{end}}:
  for i in $(seq {{.Loop}}); do curl -si {{$.Proxy}}/api/slow | grep -E '^HTTP|^Sds-Degraded'; done
Make the service fast again{{if .Retry}}, and the next probe ends the delay{{end}}:
  curl -s '{{$.Service}}/_control?slowLatency=10ms'
{{end}}
{{- with .Flaky}}
flaky fails half its calls (500); the {{ordinal .Exceptions}} exception in the window trips it (exception),
and {{.DowngradeRate}}% of the tripped calls get 503 while the rest still try the service:
  for i in $(seq {{.Loop}}); do curl -s -o /dev/null -w '%{http_code} ' {{$.Proxy}}/api/flaky; done; echo
Heal it, and it recovers as the failures leave the window:
  curl -s '{{$.Service}}/_control?errorRate=0'
{{end}}
{{- with .Shadow}}
{{.Name}} (any other path) is in shadow mode: past {{.Visit}} visits per window it would degrade,
but every answer still comes from the service, marked Sds-Shadow-Degraded instead:
  for i in $(seq {{.Loop}}); do curl -s -o /dev/null -D - {{$.Proxy}}/hello | grep -i '^Sds-Shadow'; done | sort | uniq -c
Switch it to mode: enforce in the config, and the same loop gets 429s.
{{end}}
{{- if .Others}}
Other points of this config: {{.Others}}. Send requests to their routes.
{{end}}
Watch it happen: {{.Admin}}/   Stop with Ctrl-C.
`, "\n")))

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

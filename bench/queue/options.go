package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

// errUsage marks a wrong command line (exit code 2).
var errUsage = benchproc.ErrUsage

// Bounds of the flags, so that a typo cannot start an hour-long or
// memory-hungry sitting.
const (
	maxDuration    = 10 * time.Minute // -duration and -warmup, each
	maxSLO         = 10 * time.Second // the upstream bounds its waits at 30s
	maxInFlight    = 20000            // -max-inflight
	maxWorkers     = 1000             // -workers
	maxMultiple    = 50               // a rung's mean rate ÷ capacity
	maxArrivals    = 2_000_000        // one rung's schedule
	maxQueueYAML   = 1000             // bytes of -queue-yaml
	defaultSetups  = "none,concurrent,adaptive,queue"
	defaultRungs   = "0.8x-bursts,2x,6x,12x"
	defaultWorkers = 4
	defaultService = 50 * time.Millisecond
)

// options are the harness's flags, checked by parseFlags.
type options struct {
	setups      []setup
	rungs       []rung
	duration    time.Duration // a rung's measured ("steady") time, after its warmup
	warmup      time.Duration // a rung's first stretch, reported apart (in "all" only)
	slo         time.Duration // good: a 200 within slo of the moment due; the client gives up at 2×slo
	seed        uint64        // of the arrivals; a rung's arrivals are the same in every setup
	maxInFlight int           // requests outstanding at once; past it an arrival is client-dropped
	output      string        // "text" or "json"
	queueYAML   string        // the value of the queue setup's `queue:` key, a YAML flow mapping
	workers     int           // the upstream's workers, and the concurrent setups' threshold
	service     time.Duration // each request's time at a worker
	binDir      string        // prebuilt sds-proxy and sds-upstream; "" builds them
}

// capacity is the upstream's capacity in requests per second.
func (o options) capacity() float64 { return float64(o.workers) / o.service.Seconds() }

// parseFlags reads args into options and checks them. Errors wrap errUsage.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("queue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setups := fs.String("setups", defaultSetups, "setups to measure, in order: none, concurrent, adaptive, queue")
	rungs := fs.String("rungs", defaultRungs, "load rungs: Nx (Poisson at N × capacity) or Nx-bursts (0.6 <= N <= 3)")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "measured time of each rung, after its warmup")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "time before each rung's measured time, reported apart")
	fs.DurationVar(&o.slo, "slo", time.Second, "a good answer is a 200 within this time of the moment the request was due; the client gives up at twice it")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the arrivals (times and classes)")
	fs.IntVar(&o.maxInFlight, "max-inflight", 4000, "requests outstanding at once; an arrival past it is counted client-dropped")
	fs.StringVar(&o.output, "o", "text", "output: text or json")
	fs.StringVar(&o.queueYAML, "queue-yaml", "{}", "the queue setup's queue: value, a YAML flow mapping such as '{maxWait: 500ms}'")
	fs.IntVar(&o.workers, "workers", defaultWorkers, "the upstream's workers on /api/queue, and concurrentThreshold")
	fs.DurationVar(&o.service, "service", defaultService, "each request's time at an upstream worker")
	fs.StringVar(&o.binDir, "bin", "", "directory of prebuilt sds-proxy and sds-upstream binaries (default: go build them)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	var err error
	if o.setups, err = parseSetups(*setups, o); err != nil {
		return o, err
	}
	if o.rungs, err = parseRungs(*rungs); err != nil {
		return o, err
	}
	return o, o.check()
}

// check returns the first flag out of its bounds.
func (o options) check() error {
	switch {
	case o.duration <= 0 || o.duration > maxDuration:
		return fmt.Errorf("%w: -duration %v: want more than 0, at most %v", errUsage, o.duration, maxDuration)
	case o.warmup < 0 || o.warmup > maxDuration:
		return fmt.Errorf("%w: -warmup %v: want 0 to %v", errUsage, o.warmup, maxDuration)
	case o.slo <= 0 || o.slo > maxSLO:
		return fmt.Errorf("%w: -slo %v: want more than 0, at most %v", errUsage, o.slo, maxSLO)
	case o.maxInFlight < 1 || o.maxInFlight > maxInFlight:
		return fmt.Errorf("%w: -max-inflight %d: want 1 to %d", errUsage, o.maxInFlight, maxInFlight)
	case o.output != "text" && o.output != "json":
		return fmt.Errorf("%w: -o %q: want text or json", errUsage, o.output)
	case o.workers < 1 || o.workers > maxWorkers:
		return fmt.Errorf("%w: -workers %d: want 1 to %d", errUsage, o.workers, maxWorkers)
	case o.service < time.Millisecond || o.service > maxSLO:
		return fmt.Errorf("%w: -service %v: want 1ms to %v", errUsage, o.service, maxSLO)
	case len(o.queueYAML) > maxQueueYAML || strings.ContainsAny(o.queueYAML, "\r\n"):
		return fmt.Errorf("%w: -queue-yaml: want one line of at most %d bytes", errUsage, maxQueueYAML)
	}
	for _, r := range o.rungs {
		if n := r.multiple * o.capacity() * (o.warmup + o.duration).Seconds(); n > maxArrivals/2 {
			return fmt.Errorf("%w: rung %s: about %.0f arrivals, want at most %d", errUsage, r.name, n, maxArrivals/2)
		}
	}
	return nil
}

// setup is one way of putting the service behind (or not behind) sds-proxy.
type setup struct {
	name string
	keys []string // the point's keys, one YAML line each; nil for none
}

// proxied reports whether the client talks to sds-proxy.
func (s setup) proxied() bool { return s.name != "none" }

// parseSetups reads a comma-separated list of setup names.
func parseSetups(list string, o options) ([]setup, error) {
	var out []setup
	for _, name := range strings.Split(list, ",") {
		s := setup{name: strings.TrimSpace(name)}
		threshold := "concurrentThreshold: " + strconv.Itoa(o.workers)
		switch s.name {
		case "none":
		case "concurrent":
			s.keys = []string{threshold}
		case "adaptive":
			s.keys = []string{"adaptiveConcurrency: {}"}
		case "queue":
			s.keys = []string{threshold, "queue: " + o.queueYAML}
		default:
			return nil, fmt.Errorf("%w: -setups: unknown setup %q (want none, concurrent, adaptive, queue)", errUsage, s.name)
		}
		out = append(out, s)
	}
	return out, nil
}

// Bursts of a rung "Nx-bursts": burstMultiple × capacity for burstLength at
// the start of every burstPeriod, the rest of the mean spread evenly over
// the remainder of the period.
const (
	burstMultiple = 3.0
	burstLength   = 200 * time.Millisecond
	burstPeriod   = time.Second
)

// rung is a load level: arrivals at a mean of multiple × capacity per
// second, Poisson at a constant rate, or in bursts.
type rung struct {
	name     string
	multiple float64 // mean rate ÷ capacity, > 0
	bursts   bool
}

// parseRungs reads a comma-separated list of rungs: "2x", "0.8x-bursts".
func parseRungs(list string) ([]rung, error) {
	var out []rung
	for _, name := range strings.Split(list, ",") {
		r := rung{name: strings.TrimSpace(name)}
		s, bursts := strings.CutSuffix(r.name, "x-bursts")
		if !bursts {
			s, _ = strings.CutSuffix(r.name, "x")
		}
		m, err := strconv.ParseFloat(s, 64)
		if err != nil || s == r.name || m <= 0 || m > maxMultiple {
			return nil, fmt.Errorf("%w: -rungs: %q: want Nx or Nx-bursts, 0 < N <= %d", errUsage, r.name, maxMultiple)
		}
		low := burstMultiple * float64(burstLength) / float64(burstPeriod)
		if bursts && (m < low || m > burstMultiple) {
			return nil, fmt.Errorf("%w: -rungs: %q: bursts need %.1f <= N <= %.0f", errUsage, r.name, low, burstMultiple)
		}
		r.multiple, r.bursts = m, bursts
		out = append(out, r)
	}
	return out, nil
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
)

// errUsage marks a wrong command line (exit code 2).
var errUsage = benchproc.ErrUsage

// Bounds of the flags, so that a typo cannot start an hour-long or
// memory-hungry sitting.
const (
	maxDuration  = 10 * time.Minute
	maxRate      = 50_000    // -churn-rate and -heavy-rate, requests a second
	maxWellKeys  = 1000      // -well-keys
	maxWellRate  = 100       // -well-rate, requests a second per key
	maxKeysLimit = 1_000_000 // -max-keys, as sds.yaml's maxKeys
	maxInFlight  = 20_000    // -max-inflight
	maxRequests  = 5_000_000 // of one setup, all streams
)

// The per-key rule: the example, but maxKeys (-max-keys). A key
// asking far more than ruleRate a second is bound by its bucket: ruleSize
// at start, then ruleRate a second (its ruleVisits a 10s window are 30 a
// second).
const (
	ruleVisits     = 300
	ruleRate       = 10
	ruleSize       = 20
	ruleConcurrent = 4
)

// options are the harness's flags, checked by parseFlags.
type options struct {
	setups      []string      // "perkey", "none"
	duration    time.Duration // of each setup's load
	churnRate   int           // new keys a second, each sent once
	heavyRate   int           // the heavy key's requests a second
	wellKeys    int           // well-behaved keys
	wellRate    int           // each well-behaved key's requests a second
	maxKeys     int           // the rule's maxKeys
	late        time.Duration // when the heavy and well-behaved keys start, after the churn
	maxInFlight int           // requests outstanding at once; past it one is not sent (dropped)
	output      string        // "text" or "json"
	binDir      string        // prebuilt sds-proxy and sds-upstream; "" builds them
}

// parseFlags reads args into options and checks them. Errors wrap errUsage.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("perkey", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setups := fs.String("setups", "perkey,none", "setups, in order: perkey (the per-key rule), none (no perKey: the memory baseline)")
	fs.DurationVar(&o.duration, "duration", 40*time.Second, "length of each setup's load")
	fs.IntVar(&o.churnRate, "churn-rate", 5000, "distinct keys a second, each sent once (rate × duration keys in all)")
	fs.IntVar(&o.heavyRate, "heavy-rate", 300, "the heavy key's requests a second")
	fs.IntVar(&o.wellKeys, "well-keys", 20, "well-behaved keys")
	fs.IntVar(&o.wellRate, "well-rate", 2, "each well-behaved key's requests a second")
	fs.IntVar(&o.maxKeys, "max-keys", 10000, "the rule's maxKeys: keys tracked exactly, the others in the sketch")
	fs.DurationVar(&o.late, "late", 0, "start the heavy and well-behaved keys this long after the churn (they then start in the sketch, the table being full)")
	fs.IntVar(&o.maxInFlight, "max-inflight", 4000, "requests outstanding at once; one due past it is not sent, and counted dropped")
	fs.StringVar(&o.output, "o", "text", "output: text or json")
	fs.StringVar(&o.binDir, "bin", "", "directory with prebuilt sds-proxy and sds-upstream (default: go build them)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	for _, s := range strings.Split(*setups, ",") {
		s = strings.TrimSpace(s)
		if s != "perkey" && s != "none" {
			return o, fmt.Errorf("%w: -setups: unknown setup %q (want perkey, none)", errUsage, s)
		}
		o.setups = append(o.setups, s)
	}
	return o, o.check()
}

// check reports the first option beyond its bounds.
func (o options) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
	}
	switch {
	case o.duration < time.Second || o.duration > maxDuration:
		return bad("-duration %v: want 1s to %v", o.duration, maxDuration)
	case o.churnRate < 0 || o.churnRate > maxRate:
		return bad("-churn-rate %d: want 0 to %d", o.churnRate, maxRate)
	case o.heavyRate < 1 || o.heavyRate > maxRate:
		return bad("-heavy-rate %d: want 1 to %d", o.heavyRate, maxRate)
	case o.wellKeys < 0 || o.wellKeys > maxWellKeys:
		return bad("-well-keys %d: want 0 to %d", o.wellKeys, maxWellKeys)
	case o.wellRate < 1 || o.wellRate > maxWellRate:
		return bad("-well-rate %d: want 1 to %d", o.wellRate, maxWellRate)
	case o.maxKeys < 1 || o.maxKeys > maxKeysLimit:
		return bad("-max-keys %d: want 1 to %d", o.maxKeys, maxKeysLimit)
	case o.late < 0 || o.late >= o.duration:
		return bad("-late %v: want 0 to less than -duration", o.late)
	case o.maxInFlight < 1 || o.maxInFlight > maxInFlight:
		return bad("-max-inflight %d: want 1 to %d", o.maxInFlight, maxInFlight)
	case o.output != "text" && o.output != "json":
		return bad("-o %q: want text or json", o.output)
	}
	if n := float64(o.churnRate+o.heavyRate+o.wellKeys*o.wellRate) * o.duration.Seconds(); n > maxRequests {
		return bad("about %.0f requests a setup, want at most %d", n, maxRequests)
	}
	return nil
}

// ruleSettings are the rule's settings as limiter/perkey takes them, in
// the default window.
func ruleSettings(o options) perkey.Settings {
	return perkey.Settings{
		Window: limiter.DefaultWindow, Buckets: limiter.DefaultBuckets,
		VisitThreshold: limiter.At(ruleVisits), TokensPerSecond: limiter.At(ruleRate), TokenBucketSize: limiter.At(ruleSize),
		ConcurrentThreshold: limiter.At(ruleConcurrent), MaxKeys: o.maxKeys,
	}
}

// proxyConfig is setup's sds.yaml: every request to point api.search,
// with the per-key rule on X-Api-Key (setup perkey) or without (none).
// The point has no threshold of its own: the example's visitThreshold of
// 5000 a window would trip at the churn's rate and degrade every key, and
// the rule is what is measured. The window is the default, 10s in 10
// buckets. drainTimeout is 0s: nothing is in flight at the stop.
func proxyConfig(setup, upstream string, o options) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "upstream: http://%s\ndrainTimeout: 0s\nroutes:\n  - point: api.search\n    match: {}\npoints:\n", upstream)
	if setup == "none" {
		b.WriteString("  api.search: {}\n")
		return []byte(b.String())
	}
	fmt.Fprintf(&b, `  api.search:
    perKey:
      - key: header:X-Api-Key
        visitThreshold: %d
        tokenBucketGeneratedTokensInSecond: %d
        tokenBucketSize: %d
        concurrentThreshold: %d
        missing: pass
        maxKeys: %d
`, ruleVisits, ruleRate, ruleSize, ruleConcurrent, o.maxKeys)
	return []byte(b.String())
}

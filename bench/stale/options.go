package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

// errUsage marks a wrong command line (exit code 2).
var errUsage = benchproc.ErrUsage

// Bounds of the flags, so that a typo cannot start an hour-long or
// memory-hungry sitting.
const (
	maxRounds    = 50
	maxRequests  = 2_000_000 // -requests, -warmup, -flood
	maxConns     = 512
	maxBody      = 1 << 20 // -body, -flood-body
	maxURLs      = 1_000_000
	maxSizeChars = 16
)

// sizeRE is what -max-bytes accepts: a byte count or a size in KiB, MiB
// or GiB, as sds.yaml's staleCache.maxBytes does (the proxy checks its
// bounds).
var sizeRE = regexp.MustCompile(`^[0-9]+(KiB|MiB|GiB)?$`)

// options are the harness's flags, checked by parseFlags.
type options struct {
	rounds    int    // of the CPU cells, each cell once a round
	requests  int    // measured requests per CPU cell and round
	warmup    int    // requests per CPU cell and round before the measured ones
	conns     int    // concurrent clients (closed loop), each its own connection
	body      int    // bytes of each answer's body in the CPU cells
	urls      int    // distinct URLs the CPU cells cycle over
	flood     int    // distinct URLs of the flood; 0: no flood
	floodBody int    // bytes of each answer's body in the flood
	maxBytes  string // staleCache.maxBytes of every proxy
	output    string // "text" or "json"
	binDir    string // prebuilt sds-proxy and sds-upstream; "" builds them
}

// parseFlags reads args into options and checks them. Errors wrap
// errUsage.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("stale", flag.ContinueOnError)
	if stderr != nil {
		fs.SetOutput(stderr)
	}
	fs.IntVar(&o.rounds, "rounds", 5, "rounds of the CPU cells; the report gives their medians")
	fs.IntVar(&o.requests, "requests", 60000, "measured requests per CPU cell and round")
	fs.IntVar(&o.warmup, "warmup", 3000, "requests per CPU cell and round before the measured ones")
	fs.IntVar(&o.conns, "conns", 16, "concurrent clients, each sending its next request when its last answer ended")
	fs.IntVar(&o.body, "body", 1024, "bytes of each answer's body in the CPU cells")
	fs.IntVar(&o.urls, "urls", 1000, "distinct URLs the CPU cells cycle over")
	fs.IntVar(&o.flood, "flood", 100000, "distinct URLs of the flood (0: no flood)")
	fs.IntVar(&o.floodBody, "flood-body", 4096, "bytes of each answer's body in the flood")
	fs.StringVar(&o.maxBytes, "max-bytes", "64MiB", "staleCache.maxBytes of every proxy: a byte count, or N KiB, MiB or GiB")
	fs.StringVar(&o.output, "o", "text", "output: text or json")
	fs.StringVar(&o.binDir, "bin", "", "directory of prebuilt sds-proxy and sds-upstream binaries (default: go build them)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return o, o.check()
}

// check returns the first flag out of its bounds.
func (o options) check() error {
	switch {
	case o.rounds < 1 || o.rounds > maxRounds:
		return fmt.Errorf("%w: -rounds %d: want 1 to %d", errUsage, o.rounds, maxRounds)
	case o.requests < 1000 || o.requests > maxRequests:
		return fmt.Errorf("%w: -requests %d: want 1000 to %d", errUsage, o.requests, maxRequests)
	case o.warmup < 0 || o.warmup > maxRequests:
		return fmt.Errorf("%w: -warmup %d: want 0 to %d", errUsage, o.warmup, maxRequests)
	case o.conns < 1 || o.conns > maxConns:
		return fmt.Errorf("%w: -conns %d: want 1 to %d", errUsage, o.conns, maxConns)
	case o.body < 0 || o.body > maxBody:
		return fmt.Errorf("%w: -body %d: want 0 to %d", errUsage, o.body, maxBody)
	case o.urls < 1 || o.urls > maxURLs:
		return fmt.Errorf("%w: -urls %d: want 1 to %d", errUsage, o.urls, maxURLs)
	case o.flood < 0 || o.flood > maxRequests:
		return fmt.Errorf("%w: -flood %d: want 0 to %d", errUsage, o.flood, maxRequests)
	case o.floodBody < 0 || o.floodBody > maxBody:
		return fmt.Errorf("%w: -flood-body %d: want 0 to %d", errUsage, o.floodBody, maxBody)
	case len(o.maxBytes) > maxSizeChars || !sizeRE.MatchString(o.maxBytes):
		return fmt.Errorf("%w: -max-bytes %q: want a byte count or N KiB, MiB or GiB, such as 64MiB", errUsage, o.maxBytes)
	case o.output != "text" && o.output != "json":
		return fmt.Errorf("%w: -o %q: want text or json", errUsage, o.output)
	}
	return nil
}

// Options is the report's copy of the flags.
type Options struct {
	Rounds    int    `json:"rounds"`
	Requests  int    `json:"requests"`
	Warmup    int    `json:"warmup"`
	Conns     int    `json:"conns"`
	Body      int    `json:"body"`
	URLs      int    `json:"urls"`
	Flood     int    `json:"flood"`
	FloodBody int    `json:"floodBody"`
	MaxBytes  string `json:"maxBytes"`
}

func (o options) summary() Options {
	return Options{Rounds: o.rounds, Requests: o.requests, Warmup: o.warmup, Conns: o.conns, Body: o.body,
		URLs: o.urls, Flood: o.flood, FloodBody: o.floodBody, MaxBytes: o.maxBytes}
}

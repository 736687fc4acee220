package config

import (
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// The defaults of sds.yaml (docs/configuration.md, Configuration), in one place.
const (
	DefaultListen       = "0.0.0.0:8080"
	DefaultAdmin        = "0.0.0.0:9901"
	DefaultWindow       = limiter.DefaultWindow
	DefaultBuckets      = limiter.DefaultBuckets
	DefaultDrainTimeout = 25 * time.Second
	// DefaultMaxConnections fits the example Deployment's 128 MiB memory
	// limit with every connection busy; README "Connection limits" has
	// the arithmetic.
	DefaultMaxConnections = 1024
)

// newFile returns a File holding every top-level default.
func newFile() *File {
	return &File{
		Listen:           DefaultListen,
		Admin:            DefaultAdmin,
		ForwardedHeaders: true,
		Window:           DefaultWindow,
		Buckets:          DefaultBuckets,
		DrainTimeout:     DefaultDrainTimeout,
		MaxConnections:   DefaultMaxConnections,
	}
}

// newPoint returns a point named name with every strategy off: the zero
// limiter.Policy.
func newPoint(name string) Point { return Point{Name: name} }

// override replaces the file's values with the command-line ones given.
func override(f *File, opts Options) {
	if opts.Listen != "" {
		f.Listen = opts.Listen
	}
	if opts.Upstream != "" {
		f.Upstream = opts.Upstream
	}
	if opts.Admin != "" {
		f.Admin = opts.Admin
	}
}

// normalize folds the ways the file can say "off" into one value per field,
// after validation, where the limiter takes more than one: a negative
// exceptionRateStart becomes 0, a negative timeoutThreshold or
// upstreamTimeout 0. (Thresholds are folded as they are decoded.)
func normalize(f *File) {
	for i := range f.Points {
		p := &f.Points[i]
		p.ExceptionRateStart = max(p.ExceptionRateStart, 0)
		p.TimeoutThreshold = max(p.TimeoutThreshold, 0)
		p.UpstreamTimeout = max(p.UpstreamTimeout, 0)
	}
}

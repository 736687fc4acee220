package config

import "time"

// The defaults of SPEC §3, in one place.
const (
	DefaultListen       = "0.0.0.0:8080"
	DefaultAdmin        = "0.0.0.0:9901"
	DefaultWindow       = 10 * time.Second
	DefaultBuckets      = 10
	DefaultDrainTimeout = 25 * time.Second
	// DefaultMaxConnections fits the example Deployment's 128 MiB memory
	// limit with every connection busy; README "Connection limits" has
	// the arithmetic.
	DefaultMaxConnections = 1024
	// DefaultDowngradeRate is the percent of tripped requests degraded.
	DefaultDowngradeRate = 100
)

// off is the value of an integer threshold that is not judged.
const off = -1

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

// newPoint returns a point named name with every strategy off.
func newPoint(name string) Point {
	return Point{
		Name:                               name,
		TimeoutCountThreshold:              off,
		VisitThreshold:                     off,
		ConcurrentThreshold:                off,
		ExceptionThreshold:                 off,
		ExceptionRateThreshold:             off,
		TokenBucketGeneratedTokensInSecond: off,
		TokenBucketSize:                    off,
		DowngradeRate:                      DefaultDowngradeRate,
	}
}

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
// after validation: a negative integer threshold becomes -1, a negative
// exceptionRateStart 0, a negative timeoutThreshold (and the -1 that turns
// off delayTime, retryInterval and upstreamTimeout) 0.
func normalize(f *File) {
	for i := range f.Points {
		p := &f.Points[i]
		for _, v := range []*int64{
			&p.TimeoutCountThreshold, &p.VisitThreshold, &p.ConcurrentThreshold,
			&p.ExceptionThreshold, &p.ExceptionRateThreshold,
			&p.TokenBucketGeneratedTokensInSecond, &p.TokenBucketSize,
		} {
			*v = max(*v, off)
		}
		p.ExceptionRateStart = max(p.ExceptionRateStart, 0)
		for _, d := range []*time.Duration{&p.TimeoutThreshold, &p.DelayTime, &p.RetryInterval, &p.UpstreamTimeout} {
			*d = max(*d, 0)
		}
	}
}

package config

import (
	"fmt"
	"reflect"
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
	DefaultMaxConnections   = 1024
	DefaultClusterTimeout   = 50 * time.Millisecond
	DefaultClusterKeyPrefix = "sds:"
	// DefaultStaleCacheBytes is staleCache.maxBytes's default, as the
	// file writes it: 64 MiB, half the example Deployment's memory limit,
	// held only as answers are kept.
	DefaultStaleCacheBytes = "64MiB"
	// DefaultStaleMaxAge is a point's stale.maxAge default.
	DefaultStaleMaxAge = 10 * time.Minute
)

// newFile returns a File holding every top-level default.
func newFile() *File {
	f := &File{}
	setDefaults(topSection, reflect.ValueOf(f).Elem())
	return f
}

// setDefaults sets, in v, the struct of sec's keys, each key's default
// (key.def): a string, a bool, an integer, or a duration or a size written
// as a string; and those of a mapping held by value whose section has
// defaults (staleCache), which apply when the file has none.
func setDefaults(sec *section, v reflect.Value) {
	for _, k := range sec.keys {
		if k.kind == kindMapping && k.field != "" && k.section.defaults && field(k, v).Kind() == reflect.Struct {
			setDefaults(k.section, field(k, v))
		}
		if k.def == nil || k.field == "" {
			continue
		}
		f := field(k, v)
		if n, ok := parseBytes(fmt.Sprint(k.def)); ok && k.kind == kindBytes {
			f.SetInt(n)
			continue
		}
		switch def := k.def.(type) {
		case bool:
			f.SetBool(def)
		case int64:
			f.SetInt(def)
		case string:
			if d, err := time.ParseDuration(def); err == nil && f.Type() == reflect.TypeFor[time.Duration]() {
				f.SetInt(int64(d))
			} else {
				f.SetString(def)
			}
		}
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
// after validation, where the limiter takes more than one: a negative
// exceptionRateStart becomes 0, a negative timeoutThreshold or
// upstreamTimeout 0 (thresholds are folded as they are decoded). An
// absent clusterTokenBucket size is its tokensPerSecond.
func normalize(f *File) {
	for i := range f.Points {
		p := &f.Points[i]
		p.ExceptionRateStart = max(p.ExceptionRateStart, 0)
		p.TimeoutThreshold = max(p.TimeoutThreshold, 0)
		p.UpstreamTimeout = max(p.UpstreamTimeout, 0)
		if b := &p.ClusterTokenBucket; b.Size == 0 {
			b.Size = b.TokensPerSecond
		}
	}
}

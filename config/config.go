// Package config reads sds.yaml: strict decoding with line:col positions,
// defaults, validation that gathers every problem, and the difference
// between two configs. Package config/watch hot-reloads the file.
//
// The types here are plain values. The cmd package translates them into
// proxy and limiter types once per load; nothing below cmd reads a *File per
// request.
//
// Every setting is defined once, in the key table of keys.go: its name,
// doc, default, unit and bounds, from which decoding, validation, the
// schema (Schema) and a reload's explanation are derived. The comment of
// a field here names its key and states only what the table does not.
//
// Conventions shared by every type in this package:
//   - a point's thresholds are the limiter's own (limiter.Policy), where
//     off is the zero value; the file's absent or negative threshold (SDS's
//     -1) decodes to off;
//   - a duration of 0 is off;
//   - slices keep the order of the file.
package config

import (
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/route"
	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// File is one parsed, defaulted and validated sds.yaml. Its settings are
// the top-level keys (keys.go); a change of listen, admin, tls, h2c or
// cluster needs a restart, the others apply on a reload.
type File struct {
	// Path is the file the config was read from ("" for Default).
	Path string
	// Hash is the hex SHA-256 of the file's raw bytes ("" for Default).
	Hash string
	// Raw is the file's bytes as read, a copy the File owns (nil for
	// Default). The admin port serves it as GET /config, for
	// `sds-proxy validate -diff`.
	Raw []byte
	// Warnings are the problems that do not reject the file (each with
	// Warning set), sorted by position; nil when there are none. validate
	// prints them and run logs them on each load.
	Warnings Errors

	// Listen (listen) is the proxy's host:port. Default DefaultListen.
	Listen string
	// H2C (h2c) also accepts cleartext HTTP/2 on Listen. Default false.
	H2C bool
	// Upstream (upstream) is the service's base URL: http://, https:// or
	// h2c://, with a host and no path beyond "/". Required, from the file
	// or Options.Upstream.
	Upstream string
	// Admin (admin) is the admin port's host:port. Default DefaultAdmin.
	Admin string
	// ForwardedHeaders (forwardedHeaders) sets X-Forwarded-For/Proto/Host
	// for the upstream. Default true.
	ForwardedHeaders bool
	// Window (window) is the length of every point's sliding window.
	// Default DefaultWindow.
	Window time.Duration
	// Buckets (buckets) split Window, 1 to 1000; Window/Buckets is a whole
	// number of nanoseconds and at least 1ms. Default DefaultBuckets.
	Buckets int
	// PressureTestHeader (pressureTestHeader) names the header that marks
	// pressure-test traffic; "" for none.
	PressureTestHeader string
	// AccessLog (accessLog) turns on the access log. Default false.
	AccessLog bool
	// DrainTimeout (drainTimeout) is how long SIGTERM waits for in-flight
	// requests. Default DefaultDrainTimeout; 0 exits without waiting.
	DrainTimeout time.Duration
	// MaxConnections (maxConnections) bounds the client connections open
	// at once, 1 to 1,000,000. Default DefaultMaxConnections. At the limit
	// a new connection closes the oldest idle one to get in, or is refused
	// when every one is busy.
	MaxConnections int
	// AdminTokenFile (adminTokenFile) is the file of the admin port's
	// bearer token, absolute after Parse (as written after ParseText); ""
	// for none, which turns the runtime switches off.
	AdminTokenFile string
	// AdminToken is the token read from AdminTokenFile, surrounding white
	// space removed: at least MinAdminToken visible ASCII characters. nil
	// without the file, and after ParseText. A reload reads it again.
	AdminToken []byte
	// StaleCache (staleCache) is the memory the points' kept answers
	// share.
	StaleCache StaleCache
	// TLS (tls) is the inbound TLS setting; the zero value serves cleartext.
	TLS TLS
	// Cluster (cluster) is the Redis of the points' shared token buckets;
	// nil when the file has none.
	Cluster *Cluster
	// Routes (routes) map requests to points; the first match wins.
	Routes []Route
	// Points (points) are the protected points. Every point is named by at
	// least one route.
	Points []Point
}

// Point returns the point named name, or nil.
func (f *File) Point(name string) *Point {
	for i := range f.Points {
		if f.Points[i].Name == name {
			return &f.Points[i]
		}
	}
	return nil
}

// TLS is the inbound TLS setting (docs/tls.md): the certificate pair or
// ACME, at most one. A path is absolute after Parse, as written after
// ParseText.
type TLS struct {
	// CertFile and KeyFile are PEM files, both or neither.
	CertFile, KeyFile string
	// ACME obtains certificates automatically; nil when not used.
	ACME *ACME
}

// Enabled reports whether inbound TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.ACME != nil }

// ACME asks an ACME CA for certificates; its fields are the keys under
// tls.acme (keys.go). Domains holds at least one name. "" is absent: no
// email, Let's Encrypt production, the system's roots, certmagic's
// storage, no HTTP-01 challenge. CARoot and Storage are absolute after
// Parse; replicas that share Storage share their certificates.
type ACME struct {
	Domains                                []string
	Email, CA, CARoot, Storage, HTTPListen string
}

// Route sends the requests it matches to a point. Every condition that is
// set must hold; a route with none set matches every request.
type Route struct {
	// Point names the point; it exists in File.Points.
	Point string
	// Methods, upper case, the request's method must be one of; nil
	// matches any.
	Methods []string
	// Path is an exact path, PathPrefix a path prefix, each starting with
	// "/" and at most one set; "" for any.
	Path, PathPrefix string
	// Host is the request's host to match, as written; "" for any.
	Host string
	// Priority is the matched requests' priority; the zero Priority is
	// limiter.PriorityDefault.
	Priority limiter.Priority
}

// Rule returns the rule the proxy routes r's requests by, with its paths
// as written: route.Normalize puts them in normal form.
func (r Route) Rule() route.Rule {
	return route.Rule{Methods: r.Methods, Path: r.Path, PathPrefix: r.PathPrefix, Host: r.Host}
}

// Point is one protected point: what its limiter judges, how its upstream
// call is made, and its fallback.
type Point struct {
	// Name is the point's name: letters, digits, '.', '_' and '-'.
	Name string
	// Policy holds the point's thresholds, downgrade rate, delay and mode,
	// as the limiter defines them (units, zero values, boundaries and
	// limits); validation reports what limiter.Policy.Check rejects.
	limiter.Policy
	// UpstreamTimeout is a hard deadline for the upstream call. 0 = none.
	UpstreamTimeout time.Duration
	// FallbackOnError answers the fallback instead of 502/504 when the
	// upstream call fails.
	FallbackOnError bool
	// Fallback is the response of a degraded request.
	Fallback Fallback
	// ClusterTokenBucket is the point's token bucket shared through
	// File.Cluster's Redis; the zero value is none.
	ClusterTokenBucket ClusterTokenBucket
	// PerKey (perKey) are the point's per-key rules, judged in file
	// order before its strategies; nil for none.
	PerKey []PerKey
	// Stale (stale) serves the last good answer instead of the fallback;
	// the zero value is off.
	Stale Stale
}

// Stale is a point's stale: setting (keys.go).
type Stale struct {
	// On: the point has stale:.
	On bool
	// MaxAge is how old a kept answer may be when served, 1s to 7 days.
	// Default DefaultStaleMaxAge.
	MaxAge time.Duration
}

// StaleCache is staleCache: (keys.go).
type StaleCache struct {
	// MaxBytes bounds the kept answers' memory, in bytes, 0 (none kept)
	// to 4 GiB. Default DefaultStaleCacheBytes.
	MaxBytes int64
}

// PerKey is one per-key rule of a point: where a request's key is, and
// the thresholds each key is held to in the point's window.
type PerKey struct {
	// Key (key) is where a request's key is, as written; Source parses it.
	Key string
	// Settings holds the rule's thresholds and MaxKeys, as
	// limiter/perkey defines them; its Window and Buckets are zero here
	// (File.KeySettings gives the file's).
	perkey.Settings
	// Missing (missing) is what a request without the key gets: "pass"
	// (the zero value "" too), "degrade" or "shared".
	Missing string
}

// Source returns where the rule's key is; for a valid File it has no
// error.
func (k PerKey) Source() (clientkey.Source, error) { return clientkey.ParseSource(k.Key) }

// KeySettings returns the settings of the per-key rule k of a point of
// f: k's, in the file's window. For a valid f, perkey.New accepts them.
func (f *File) KeySettings(k PerKey) perkey.Settings {
	s := k.Settings
	s.Window, s.Buckets = f.Window, f.Buckets
	return s
}

// Settings returns the limiter settings of point p of f: the file's window
// and p's Policy. For a valid f, limiter.NewPoint accepts them.
func (f *File) Settings(p *Point) limiter.Settings {
	return limiter.Settings{Window: f.Window, Buckets: f.Buckets, Policy: p.Policy}
}

// Fallback is the response a degraded request gets. Its zero value leaves
// everything to the proxy's defaults.
type Fallback struct {
	// Status is 200-599; 0 = not set (the proxy then answers 429 for visit
	// and token_bucket trips, 503 otherwise).
	Status int
	// Headers in file order, names as written. A name given a list of values
	// appears once per value.
	Headers [][2]string
	// Body is the response body, from body or read from bodyFile; BodySet
	// is true when either was given (an empty body is then meant).
	Body    []byte
	BodySet bool
	// BodyFile is the bodyFile as written; "" for none. Parse reads it
	// into Body; ParseText leaves Body nil.
	BodyFile string
	// GRPCStatus is the grpc-status, 0-16, that gRPC calls get, used when
	// GRPCStatusSet, else the proxy's default 14 (UNAVAILABLE).
	GRPCStatus    int
	GRPCStatusSet bool
	// GRPCMessage is the grpc-message that gRPC calls get, as written; ""
	// = not set (the proxy then names the point and the strategy).
	GRPCMessage string
}

// Options are the command-line overrides; "" means not given. A given value
// replaces the file's before validation.
type Options struct {
	Listen, Upstream, Admin string
}

// Cluster is the Redis that the points' shared token buckets live in
// (docs/fleet.md): top-level cluster:, whose keys (keys.go) are its fields.
// "" is absent: the default user, no password, no Sentinel. No request
// ever waits on Redis: calls are made in the background.
type Cluster struct {
	// Addresses are host:port addresses, at least one and at most 64.
	Addresses []string
	Username  string
	// PasswordFile is absolute after Parse. The proxy reads it for every
	// new connection; the config holds no password.
	PasswordFile string
	// TLS, when not nil, speaks TLS to Redis.
	TLS *ClusterTLS
	// DB is the database number, 0 or more; a Redis Cluster has only 0.
	DB         int
	MasterName string
	// KeyPrefix defaults to DefaultClusterKeyPrefix.
	KeyPrefix string
	// Timeout bounds every call to Redis, from 1ms to 10s. Default
	// DefaultClusterTimeout.
	Timeout time.Duration
	// Replicas is how many proxies share the buckets, 1 to 10,000.
	// Default 1.
	Replicas int
}

// ClusterTLS is TLS to Redis (cluster.tls). Its zero value trusts the
// system's roots, presents no client certificate (CertFile and KeyFile,
// both or neither) and verifies the address's host.
type ClusterTLS struct {
	CAFile, CertFile, KeyFile, ServerName string
}

// ClusterTokenBucket is a point's token bucket shared by every proxy of
// the same Redis and point name, judged after the local strategies. The
// zero value is none.
type ClusterTokenBucket struct {
	// TokensPerSecond fills the shared bucket, 1 to 1e9.
	TokensPerSecond int64
	// Size is the most tokens the shared bucket holds, 1 to 1e12. Default
	// TokensPerSecond. The bucket starts full.
	Size int64
}

// On reports whether the point has a shared bucket.
func (b ClusterTokenBucket) On() bool { return b.TokensPerSecond > 0 }

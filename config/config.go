// Package config reads sds.yaml: the schema of the README's Configuration
// section, strict decoding with
// line:col positions, defaults, validation that gathers every problem, and
// the difference between two configs. Package config/watch hot-reloads
// the file.
//
// The types here are plain values. The cmd package translates them into
// proxy and limiter types once per load; nothing below cmd reads a *File per
// request.
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
	"github.com/sds-proxy/sds-proxy/route"
)

// File is one parsed, defaulted and validated sds.yaml.
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

	// Listen is the proxy's address, host:port. Default "0.0.0.0:8080".
	// Changing it needs a restart.
	Listen string
	// H2C also accepts cleartext HTTP/2 on Listen. Default false. Changing it
	// needs a restart.
	H2C bool
	// Upstream is the service's base URL: http://, https:// or h2c://
	// (cleartext HTTP/2), with a host and no path beyond "/". Required, from
	// the file or Options.Upstream.
	Upstream string
	// Admin is the admin port's address, host:port. Default "0.0.0.0:9901".
	// Changing it needs a restart.
	Admin string
	// ForwardedHeaders sets X-Forwarded-For/Proto/Host for the upstream.
	// Default true.
	ForwardedHeaders bool
	// Window is the length of every point's sliding window. Default 10s.
	Window time.Duration
	// Buckets is how many buckets split Window; Window/Buckets is a whole
	// number of nanoseconds and at least 1ms. Default 10.
	Buckets int
	// PressureTestHeader names the request header that marks pressure-test
	// traffic when its value is 1 or true. Default "" (no pressure tests).
	PressureTestHeader string
	// AccessLog turns on the access log (docs/operations.md, Logs). Default false.
	AccessLog bool
	// DrainTimeout is how long SIGTERM waits for in-flight requests before
	// exiting. Default 25s; 0 exits without waiting.
	DrainTimeout time.Duration
	// MaxConnections is the most client connections the proxy port holds
	// open at once, idle, busy and upgraded ones together: 1 to
	// 1,000,000. Default DefaultMaxConnections. At the limit a new
	// connection closes the oldest idle one to get in, or is refused when
	// every one is busy. A change applies on a reload.
	MaxConnections int
	// AdminTokenFile is the file of the admin port's bearer token, as an
	// absolute path (the file's relative one resolved against the config
	// file's directory; as written after ParseText); "" for none, which
	// turns the runtime switches off.
	AdminTokenFile string
	// AdminToken is the token read from AdminTokenFile, surrounding white
	// space removed: at least MinAdminToken visible ASCII characters. nil
	// without the file, and after ParseText. A reload reads it again.
	AdminToken []byte
	// TLS is the inbound TLS setting; the zero value serves cleartext.
	// Changing it needs a restart.
	TLS TLS

	// Cluster is the Redis of the points' shared token buckets; nil when
	// the file has no cluster:. Changing it needs a restart.
	Cluster *Cluster

	// Routes map requests to points; the first match wins. File order.
	Routes []Route
	// Points are the protected points, in file order. Every point is named
	// by at least one route.
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

// TLS is the inbound TLS setting (docs/tls.md, "TLS, HTTP/2 and gRPC"). At most
// one of the certificate
// pair and ACME is set.
type TLS struct {
	// CertFile and KeyFile are PEM files, both or neither. A relative path
	// in the file is resolved against the config file's directory.
	CertFile, KeyFile string
	// ACME obtains certificates automatically; nil when not used.
	ACME *ACME
}

// Enabled reports whether inbound TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.ACME != nil }

// ACME asks an ACME CA for certificates.
type ACME struct {
	// Domains to obtain certificates for; at least one.
	Domains []string
	// Email is the ACME account's contact address; "" for none.
	Email string
	// CA is the ACME directory URL; "" for certmagic's default
	// (Let's Encrypt production).
	CA string
	// CARoot is a PEM file of the root certificate(s) to trust when
	// talking to CA, for a private ACME server; "" trusts the system's
	// roots. A relative path is resolved against the config file's
	// directory.
	CARoot string
	// Storage is the directory holding the ACME account, keys and
	// certificates; "" for certmagic's default ($XDG_DATA_HOME/certmagic,
	// else $HOME/.local/share/certmagic). Replicas that share it share
	// their certificates. A relative path is resolved against the config
	// file's directory.
	Storage string
	// HTTPListen is a cleartext host:port that answers ACME HTTP-01
	// challenges (and redirects every other request to https); "" turns
	// the HTTP-01 challenge off, leaving TLS-ALPN-01 on the proxy port.
	HTTPListen string
}

// Route sends the requests it matches to a point. Every condition that is
// set must hold; a route with none set matches every request.
type Route struct {
	// Point names the point; it exists in File.Points.
	Point string
	// Methods the request's method must be one of; nil matches any. Upper
	// case, as written.
	Methods []string
	// Path is an exact path to match, starting with "/"; "" for any.
	Path string
	// PathPrefix is a path prefix to match, starting with "/"; "" for any.
	// At most one of Path and PathPrefix is set.
	PathPrefix string
	// Host is the request's host to match, as written; "" for any.
	Host string
	// Priority is the matched requests' priority (docs/protections.md, Priority
	// shedding); the zero Priority is limiter.PriorityDefault.
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
	// limits): the file's keys decode into it, an absent or negative
	// threshold (SDS's -1) as off, and validation reports what
	// limiter.Policy.Check rejects.
	limiter.Policy

	// UpstreamTimeout is a hard deadline for the upstream call. 0 = none.
	UpstreamTimeout time.Duration
	// FallbackOnError answers the fallback instead of 502/504 when the
	// upstream call fails (transport error or UpstreamTimeout).
	FallbackOnError bool
	// Fallback is the response of a degraded request.
	Fallback Fallback
	// ClusterTokenBucket is the point's token bucket shared through
	// File.Cluster's Redis; the zero value is none.
	ClusterTokenBucket ClusterTokenBucket
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
	// Body is the response body, from body or read from bodyFile at parse
	// time.
	Body []byte
	// BodySet is true when body or bodyFile was given (an empty body is then
	// meant).
	BodySet bool
	// BodyFile is the bodyFile as written, relative to the config file's
	// directory or absolute; "" when the file gives none. Parse reads it
	// into Body; ParseText leaves Body nil.
	BodyFile string
	// GRPCStatus is the grpc-status, 0-16, that gRPC calls get instead of
	// the HTTP answer above; used when GRPCStatusSet, else the proxy's
	// default 14 (UNAVAILABLE).
	GRPCStatus    int
	GRPCStatusSet bool
	// GRPCMessage is the grpc-message that gRPC calls get, as written (the
	// proxy percent-encodes it); "" = not set (the proxy then names the
	// point and the strategy).
	GRPCMessage string
}

// Options are the command-line overrides; "" means not given. A given value
// replaces the file's before validation.
type Options struct {
	Listen, Upstream, Admin string
}

package config

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// Setting is one setting that differs between two configs, for a person
// to read (`sds-proxy validate -diff`).
type Setting struct {
	// Key names the setting as the file does: "window", "tls.certFile",
	// or, within a point, "visitThreshold", "fallback.status".
	Key string
	// From and To are the setting's values, written as in the file where
	// they can be: a string quoted, "off" for a threshold or a duration
	// that is off, "default" for a fallback field left to the proxy's
	// default, a body as its size and its first bytes quoted.
	From, To string
}

// String returns "key: from -> to".
func (s Setting) String() string { return s.Key + ": " + s.From + " -> " + s.To }

// PointSettings returns the settings that differ between two versions of
// a point, in the order of the file's point keys (docs/configuration.md, Configuration);
// nil when none does. It explains what Diff reports as a changed point:
// when Diff names a point changed, PointSettings names at least one
// setting.
func PointSettings(from, to *Point) []Setting {
	var out settings
	a, b := &from.Policy, &to.Policy
	out.add(keyTimeoutThreshold.path, offDuration(a.TimeoutThreshold), offDuration(b.TimeoutThreshold))
	out.add(keyTimeoutCountThreshold.path, threshold(a.TimeoutCountThreshold), threshold(b.TimeoutCountThreshold))
	out.add(keyVisitThreshold.path, threshold(a.VisitThreshold), threshold(b.VisitThreshold))
	out.add(keyConcurrentThreshold.path, threshold(a.ConcurrentThreshold), threshold(b.ConcurrentThreshold))
	out.add(keyExceptionThreshold.path, threshold(a.ExceptionThreshold), threshold(b.ExceptionThreshold))
	out.add(keyExceptionRateThreshold.path, threshold(a.ExceptionRateThreshold), threshold(b.ExceptionRateThreshold))
	out.add(keyExceptionRateStart.path, strconv.FormatInt(a.ExceptionRateStart, 10), strconv.FormatInt(b.ExceptionRateStart, 10))
	out.add(keyTokenBucketGeneratedTokensInSecond.path, threshold(a.TokensPerSecond), threshold(b.TokensPerSecond))
	out.add(keyTokenBucketSize.path, threshold(a.TokenBucketSize), threshold(b.TokenBucketSize))
	out.add(keyDowngradeRate.path, threshold(a.DowngradeRate), threshold(b.DowngradeRate))
	out.add(keyDelayTime.path, offDuration(a.DelayTime), offDuration(b.DelayTime))
	out.add(keyRetryInterval.path, offDuration(a.RetryInterval), offDuration(b.RetryInterval))
	out.add(keyPressureTestDowngrade.path, strconv.FormatBool(a.PressureTestDowngrade), strconv.FormatBool(b.PressureTestDowngrade))
	out.add(keyMode.path, mode(a.Shadow), mode(b.Shadow))
	out.add(keyUpstreamTimeout.path, offDuration(from.UpstreamTimeout), offDuration(to.UpstreamTimeout))
	out.add(keyFallbackOnError.path, strconv.FormatBool(from.FallbackOnError), strconv.FormatBool(to.FallbackOnError))
	fa, fb := &from.Fallback, &to.Fallback
	out.add(keyFallbackStatus.path, fallbackStatus(fa.Status), fallbackStatus(fb.Status))
	out.add(keyFallbackHeaders.path, headers(fa.Headers), headers(fb.Headers))
	out.add(keyFallbackBodyFile.path, unsetString(fa.BodyFile), unsetString(fb.BodyFile))
	if fa.BodySet != fb.BodySet || !bytes.Equal(fa.Body, fb.Body) {
		out = append(out, Setting{keyFallbackBody.path, body(fa), body(fb)})
	}
	out.add(keyFallbackGRPCStatus.path, grpcStatus(fa), grpcStatus(fb))
	out.add(keyFallbackGRPCMessage.path, unsetString(fa.GRPCMessage), unsetString(fb.GRPCMessage))
	ca, cb := from.ClusterTokenBucket, to.ClusterTokenBucket
	out.add(keyClusterBucketTokensPerSecond.path, clusterFigure(ca.TokensPerSecond), clusterFigure(cb.TokensPerSecond))
	out.add(keyClusterBucketSize.path, clusterFigure(ca.Size), clusterFigure(cb.Size))
	out.add(keyRecoveryTime.path, offDuration(a.RecoveryTime), offDuration(b.RecoveryTime))
	out.add(keyRecoveryStart.path, strconv.FormatInt(a.RecoveryStartPercent(), 10), strconv.FormatInt(b.RecoveryStartPercent(), 10))
	out.add(keySheddableShare.path, strconv.FormatInt(a.SheddablePercent(), 10), strconv.FormatInt(b.SheddablePercent(), 10))
	aa, ab := adaptiveSettings(a.AdaptiveConcurrency), adaptiveSettings(b.AdaptiveConcurrency)
	out.add(keyAdaptiveConcurrency.path, aa.on, ab.on)
	out.add(keyAdaptiveMinLimit.path, aa.minLimit, ab.minLimit)
	out.add(keyAdaptiveMaxLimit.path, aa.maxLimit, ab.maxLimit)
	out.add(keyAdaptiveInterval.path, aa.interval, ab.interval)
	out.add(keyAdaptiveTolerance.path, aa.tolerance, ab.tolerance)
	out.add(keyAdaptiveMinLatencyInterval.path, aa.minLatencyInterval, ab.minLatencyInterval)
	return out
}

// adaptiveFigures are an adaptive limit's settings as the file writes
// them, "default" for a field left to its default.
type adaptiveFigures struct{ on, minLimit, maxLimit, interval, tolerance, minLatencyInterval string }

func adaptiveSettings(a limiter.AdaptiveConcurrency) adaptiveFigures {
	on := "off"
	if a.On {
		on = "on"
	}
	count := func(n int64) string {
		if n == 0 {
			return "default"
		}
		return strconv.FormatInt(n, 10)
	}
	duration := func(d time.Duration) string {
		if d == 0 {
			return "default"
		}
		return d.String()
	}
	tolerance := "default"
	if n, on := a.Tolerance.Get(); on {
		tolerance = strconv.FormatInt(n, 10)
	}
	return adaptiveFigures{on, count(a.MinLimit), count(a.MaxLimit), duration(a.Interval), tolerance, duration(a.MinLatencyInterval)}
}

// FileSettings returns the top-level settings that differ between two
// configs, in the order Diff names them in Change.Settings (reload) and
// Change.NeedsRestart (restart): a key of restart starts with one of
// NeedsRestart's names ("tls.certFile" for "tls").
func FileSettings(from, to *File) (reload, restart []Setting) {
	var r settings
	r.add(keyUpstream.path, strconv.Quote(from.Upstream), strconv.Quote(to.Upstream))
	r.add(keyForwardedHeaders.path, strconv.FormatBool(from.ForwardedHeaders), strconv.FormatBool(to.ForwardedHeaders))
	r.add(keyWindow.path, from.Window.String(), to.Window.String())
	r.add(keyBuckets.path, strconv.Itoa(from.Buckets), strconv.Itoa(to.Buckets))
	r.add(keyPressureTestHeader.path, strconv.Quote(from.PressureTestHeader), strconv.Quote(to.PressureTestHeader))
	r.add(keyAccessLog.path, strconv.FormatBool(from.AccessLog), strconv.FormatBool(to.AccessLog))
	r.add(keyDrainTimeout.path, from.DrainTimeout.String(), to.DrainTimeout.String())
	r.add(keyMaxConnections.path, strconv.Itoa(from.MaxConnections), strconv.Itoa(to.MaxConnections))
	// The path only: the token is never shown (a new token in the same
	// file is a change Diff names, with nothing to show here).
	r.add(keyAdminTokenFile.path, unsetString(from.AdminTokenFile), unsetString(to.AdminTokenFile))
	var s settings
	s.add(keyListen.path, strconv.Quote(from.Listen), strconv.Quote(to.Listen))
	s.add(keyAdmin.path, strconv.Quote(from.Admin), strconv.Quote(to.Admin))
	s.add(keyTLSCertFile.path, unsetString(from.TLS.CertFile), unsetString(to.TLS.CertFile))
	s.add(keyTLSKeyFile.path, unsetString(from.TLS.KeyFile), unsetString(to.TLS.KeyFile))
	switch a, b := from.TLS.ACME, to.TLS.ACME; {
	case a == nil && b == nil:
	case a == nil || b == nil:
		s.add(keyTLSACME.path, acme(a), acme(b))
	default:
		s.add(keyACMEDomains.path, strings.Join(a.Domains, " "), strings.Join(b.Domains, " "))
		s.add(keyACMEEmail.path, unsetString(a.Email), unsetString(b.Email))
		s.add(keyACMECA.path, unsetString(a.CA), unsetString(b.CA))
		s.add(keyACMECARoot.path, unsetString(a.CARoot), unsetString(b.CARoot))
		s.add(keyACMEStorage.path, unsetString(a.Storage), unsetString(b.Storage))
		s.add(keyACMEHTTPListen.path, unsetString(a.HTTPListen), unsetString(b.HTTPListen))
	}
	s.add(keyH2C.path, strconv.FormatBool(from.H2C), strconv.FormatBool(to.H2C))
	s.add(keyCluster.path, clusterString(from.Cluster), clusterString(to.Cluster))
	return r, s
}

// RouteEdit is one line of the difference between two route lists: a
// route of the old list that is not in the new one, or the reverse.
type RouteEdit struct {
	// Added is true for a route of the new list, false for one of the old.
	Added bool
	// Index is the route's position in its own list, from 1.
	Index int
	// Route is the route.
	Route Route
}

// maxDiffCells bounds the table RoutesDiff fills to find the shortest
// edits: 1<<22 cells of 4 bytes, 16 MiB.
const maxDiffCells = 1 << 22

// RoutesDiff returns the edits that turn from into to, in the order a line
// diff prints them: at each place, the old routes removed, then the new
// ones added. It is nil when the lists are equal, as Diff compares them.
// The routes both lists begin and end with are kept; between them, the
// edits are the shortest (a longest common subsequence) when that part
// of the lists spans at most maxDiffCells (such as 2,000 routes changed
// on each side), and else every old route of it removed and every new one
// added, so that two lists of 10,000 routes each are compared in linear
// time and memory.
func RoutesDiff(from, to []Route) []RouteEdit {
	same := func(i, j int) bool { return reflect.DeepEqual(from[i], to[j]) }
	lo := 0
	for lo < len(from) && lo < len(to) && same(lo, lo) {
		lo++
	}
	n, m := len(from), len(to)
	for n > lo && m > lo && same(n-1, m-1) {
		n, m = n-1, m-1
	}
	if (n-lo+1)*(m-lo+1) > maxDiffCells {
		var out []RouteEdit
		for i := lo; i < n; i++ {
			out = append(out, RouteEdit{Index: i + 1, Route: from[i]})
		}
		for j := lo; j < m; j++ {
			out = append(out, RouteEdit{Added: true, Index: j + 1, Route: to[j]})
		}
		return out
	}
	// common[(i-lo)*w+(j-lo)] is the length of the longest common
	// subsequence of from[i:n] and to[j:m].
	w := m - lo + 1
	common := make([]int32, (n-lo+1)*w)
	at := func(i, j int) *int32 { return &common[(i-lo)*w+(j-lo)] }
	for i := n - 1; i >= lo; i-- {
		for j := m - 1; j >= lo; j-- {
			if same(i, j) {
				*at(i, j) = *at(i+1, j+1) + 1
			} else {
				*at(i, j) = max(*at(i+1, j), *at(i, j+1))
			}
		}
	}
	var out []RouteEdit
	i, j := lo, lo
	for i < n || j < m {
		switch {
		case i < n && j < m && same(i, j):
			i, j = i+1, j+1
		case j == m || (i < n && *at(i+1, j) >= *at(i, j+1)):
			out = append(out, RouteEdit{Index: i + 1, Route: from[i]})
			i++
		default:
			out = append(out, RouteEdit{Added: true, Index: j + 1, Route: to[j]})
			j++
		}
	}
	return out
}

// String describes the route on one line: its conditions, then the point,
// such as "methods GET,HEAD host api.example.com pathPrefix /orders -> orders.read",
// or "every request -> p" for a route with no condition.
func (r Route) String() string {
	var conds []string
	if len(r.Methods) > 0 {
		conds = append(conds, keyMatchMethods.name+" "+strings.Join(r.Methods, ","))
	}
	if r.Host != "" {
		conds = append(conds, keyMatchHost.name+" "+r.Host)
	}
	if r.Path != "" {
		conds = append(conds, keyMatchPath.name+" "+r.Path)
	}
	if r.PathPrefix != "" {
		conds = append(conds, keyMatchPathPrefix.name+" "+r.PathPrefix)
	}
	if len(conds) == 0 {
		conds = []string{"every request"}
	}
	return strings.Join(conds, " ") + " -> " + r.Point
}

// settings gathers the settings that differ.
type settings []Setting

// add appends key when its two values differ.
func (s *settings) add(key, from, to string) {
	if from != to {
		*s = append(*s, Setting{key, from, to})
	}
}

// maxShown bounds how many bytes of a body a Setting quotes.
const maxShown = 40

func threshold(t limiter.Threshold) string {
	if n, on := t.Get(); on {
		return strconv.FormatInt(n, 10)
	}
	return "off"
}

func offDuration(d time.Duration) string {
	if d <= 0 {
		return "off"
	}
	return d.String()
}

func mode(shadow bool) string {
	if shadow {
		return "shadow"
	}
	return "enforce"
}

func unsetString(s string) string {
	if s == "" {
		return "default"
	}
	return strconv.Quote(s)
}

func fallbackStatus(status int) string {
	if status == 0 {
		return "default"
	}
	return strconv.Itoa(status)
}

func headers(hs [][2]string) string {
	if len(hs) == 0 {
		return "none"
	}
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h[0] + ": " + strconv.Quote(h[1])
	}
	return strings.Join(parts, ", ")
}

func body(f *Fallback) string {
	switch {
	case !f.BodySet:
		return "default"
	case f.Body == nil && f.BodyFile != "":
		return "from " + keyFallbackBodyFile.name + " " + strconv.Quote(f.BodyFile)
	case len(f.Body) > maxShown:
		return fmt.Sprintf("%d bytes %q...", len(f.Body), f.Body[:maxShown])
	}
	return fmt.Sprintf("%d bytes %q", len(f.Body), f.Body)
}

func grpcStatus(f *Fallback) string {
	switch {
	case f.GRPCStatusSet:
		return strconv.Itoa(f.GRPCStatus)
	case f.GRPCStatus != 0: // not from a file: the decoder sets both
		return fmt.Sprintf("default (%d unset)", f.GRPCStatus)
	}
	return "default"
}

func acme(a *ACME) string {
	if a == nil {
		return "off"
	}
	return keyACMEDomains.name + " " + strings.Join(a.Domains, " ")

}

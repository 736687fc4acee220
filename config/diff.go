package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Change is what differs between two configs.
type Change struct {
	// Added, Removed and Changed name points, sorted. A changed point has
	// any setting or its fallback different.
	Added, Removed, Changed []string
	// Routes is true when the routes differ (order included).
	Routes bool
	// Settings names the top-level settings that changed and apply on a
	// reload: upstream, forwardedHeaders, window, buckets,
	// pressureTestHeader, accessLog, drainTimeout, maxConnections,
	// adminTokenFile (its path or the token in it; never the token). A window
	// or buckets change gives every point a fresh window; a lower
	// maxConnections closes idle connections over it at once.
	Settings []string
	// NeedsRestart names the settings that changed but apply only on a
	// restart: listen, admin, tls, h2c.
	NeedsRestart []string
}

// Empty reports whether nothing changed.
func (c Change) Empty() bool {
	return len(c.Added) == 0 && len(c.Removed) == 0 && len(c.Changed) == 0 && !c.Routes &&
		len(c.Settings) == 0 && len(c.NeedsRestart) == 0
}

// String describes the change for one log line, such as
// "points added [a], changed [b]; routes changed; needs restart [listen]".
func (c Change) String() string {
	if c.Empty() {
		return "no changes"
	}
	var parts, points []string
	for _, s := range []struct {
		verb  string
		names []string
	}{{"added", c.Added}, {"removed", c.Removed}, {"changed", c.Changed}} {
		if len(s.names) > 0 {
			points = append(points, fmt.Sprintf("%s [%s]", s.verb, strings.Join(s.names, " ")))
		}
	}
	if len(points) > 0 {
		parts = append(parts, keyPoints.name+" "+strings.Join(points, ", "))
	}
	if c.Routes {
		parts = append(parts, keyRoutes.name+" changed")
	}

	if len(c.Settings) > 0 {
		parts = append(parts, fmt.Sprintf("settings changed [%s]", strings.Join(c.Settings, " ")))
	}
	if len(c.NeedsRestart) > 0 {
		parts = append(parts, fmt.Sprintf("needs restart [%s]", strings.Join(c.NeedsRestart, " ")))
	}
	return strings.Join(parts, "; ")
}

// Diff returns what changed from one config to the next. A nil from is a
// config with no routes and no points whose settings are not compared:
// every point of to is added.
func Diff(from, to *File) Change {
	var c Change
	if to == nil {
		to = &File{}
	}
	if from == nil {
		for _, p := range to.Points {
			c.Added = append(c.Added, p.Name)
		}
		slices.Sort(c.Added)
		c.Routes = len(to.Routes) > 0
		return c
	}
	old := pointsByName(from)
	for _, p := range to.Points {
		switch q := old[p.Name]; {
		case q == nil:
			c.Added = append(c.Added, p.Name)
		case !reflect.DeepEqual(*q, p):
			c.Changed = append(c.Changed, p.Name)
		}
	}
	next := pointsByName(to)
	for _, p := range from.Points {
		if next[p.Name] == nil {
			c.Removed = append(c.Removed, p.Name)
		}
	}
	slices.Sort(c.Added)
	slices.Sort(c.Removed)
	slices.Sort(c.Changed)
	c.Routes = !reflect.DeepEqual(from.Routes, to.Routes)
	c.Settings = changed([]field{
		{keyUpstream.path, from.Upstream, to.Upstream},
		{keyForwardedHeaders.path, from.ForwardedHeaders, to.ForwardedHeaders},
		{keyWindow.path, from.Window, to.Window},
		{keyBuckets.path, from.Buckets, to.Buckets},
		{keyPressureTestHeader.path, from.PressureTestHeader, to.PressureTestHeader},
		{keyAccessLog.path, from.AccessLog, to.AccessLog},
		{keyDrainTimeout.path, from.DrainTimeout, to.DrainTimeout},
		{keyMaxConnections.path, from.MaxConnections, to.MaxConnections},
		{keyAdminTokenFile.path, adminToken{from.AdminTokenFile, string(from.AdminToken)}, adminToken{to.AdminTokenFile, string(to.AdminToken)}},
	})
	c.NeedsRestart = restart(from, to)
	return c
}

// pointsByName returns f's points by name; of two with one name, the
// first, as File.Point finds it.
func pointsByName(f *File) map[string]*Point {
	m := make(map[string]*Point, len(f.Points))
	for i := range f.Points {
		if _, ok := m[f.Points[i].Name]; !ok {
			m[f.Points[i].Name] = &f.Points[i]
		}
	}
	return m
}

// restart names the restart-only settings that differ between a and b.
func restart(a, b *File) []string {
	return changed([]field{
		{keyListen.path, a.Listen, b.Listen},
		{keyAdmin.path, a.Admin, b.Admin},
		{keyTLS.path, a.TLS, b.TLS},
		{keyH2C.path, a.H2C, b.H2C},
		{keyCluster.path, a.Cluster, b.Cluster},
	})
}

// restartPart returns the settings of f that restart compares, in a File
// of their own; nil for nil.
func restartPart(f *File) *File {
	if f == nil {
		return nil
	}
	return &File{Listen: f.Listen, Admin: f.Admin, TLS: f.TLS, H2C: f.H2C, Cluster: f.Cluster}
}

type field struct {
	name     string
	from, to any
}

// changed names the fields whose values differ, in order.
func changed(fields []field) []string {
	var out []string
	for _, f := range fields {
		if !reflect.DeepEqual(f.from, f.to) {
			out = append(out, f.name)
		}
	}
	return out
}

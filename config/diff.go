package config

import (
	"bytes"
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
	// reload, by their keys' paths in the order of keys.go; for
	// adminTokenFile, its path or the token in it (never the token). A
	// window or buckets change gives every point a fresh window; a lower
	// maxConnections closes idle connections over it at once.
	Settings []string
	// NeedsRestart names the top-level settings that changed but apply
	// only on a restart (a key's restart in keys.go), in the same order.
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
	c.Settings, c.NeedsRestart = changedKeys(from, to)
	return c
}

// changedKeys names the top-level settings that differ between two
// configs, those that apply on a reload and those that need a restart
// (key.restart), in the order of the keys. The admin token file counts
// as changed when the token in it did.
func changedKeys(from, to *File) (reload, restart []string) {
	a, b := reflect.ValueOf(from).Elem(), reflect.ValueOf(to).Elem()
	for _, k := range topSection.keys {
		if k.kind == kindList || k.kind == kindNamed {
			continue
		}
		same := reflect.DeepEqual(field(k, a).Interface(), field(k, b).Interface())
		if k == keyAdminTokenFile {
			same = same && bytes.Equal(from.AdminToken, to.AdminToken)
		}
		switch {
		case same:
		case k.restart:
			restart = append(restart, k.path)
		default:
			reload = append(reload, k.path)
		}
	}
	return reload, restart
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

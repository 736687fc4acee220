package config

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
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
// configs, those that apply on a reload and those that need a restart;
// adminTokenFile counts as changed when the token in it did.
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

// RestartPart returns the settings of f that need a restart, in a File of
// their own; nil for nil. A process keeps it of the config it started
// with, rather than the whole config, to compare later ones with
// (NeedsRestart).
func RestartPart(f *File) *File {
	if f == nil {
		return nil
	}
	out := &File{}
	a, b := reflect.ValueOf(f).Elem(), reflect.ValueOf(out).Elem()
	for _, k := range topSection.keys {
		if k.restart {
			field(k, b).Set(field(k, a))
		}
	}
	return out
}

// NeedsRestart names the settings that need a restart and differ between a
// and b, as Change.NeedsRestart does. a may be a RestartPart.
func NeedsRestart(a, b *File) []string {
	_, r := changedKeys(a, b)
	return r
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
// a point, in the order of the point's keys (keys.go); nil when none
// does. It explains what Diff reports as a changed point: when Diff names
// a point changed, PointSettings names at least one setting.
func PointSettings(from, to *Point) []Setting {
	var out settings
	a, b := reflect.ValueOf(from).Elem(), reflect.ValueOf(to).Elem()
	for _, k := range pointSection.keys {
		out.key(k, a, b)
	}
	return out
}

// FileSettings returns the top-level settings that differ between two
// configs, in the order Diff names them in Change.Settings (reload) and
// Change.NeedsRestart (restart): a key of restart starts with one of
// NeedsRestart's names ("tls.certFile" for "tls"). The admin token is
// never shown, only its file's path (a new token in the same file is a
// change Diff names, with nothing to show here).
func FileSettings(from, to *File) (reload, restart []Setting) {
	var r, s settings
	a, b := reflect.ValueOf(from).Elem(), reflect.ValueOf(to).Elem()
	for _, k := range topSection.keys {
		if k.restart {
			s.key(k, a, b)
		} else {
			r.key(k, a, b)
		}
	}
	return r, s
}

// key adds the settings of k that differ between a and b, two structs
// that hold it; routes and points are compared on their own.
func (s *settings) key(k *key, a, b reflect.Value) {
	va, vb := field(k, a), field(k, b)
	switch k.kind {
	case kindList, kindNamed:
		if k.show != nil { // a point's list, written whole
			s.add(k.path, k.show(a, va), k.show(b, vb))
		}
		return
	case kindMapping:
		if va.Kind() == reflect.Pointer {
			switch {
			case va.IsNil() && vb.IsNil():
				return
			case va.IsNil() || vb.IsNil() || k.whole:
				s.add(k.path, k.show(a, va), k.show(b, vb))
				return
			}
			va, vb = va.Elem(), vb.Elem()
		} else if k.show != nil {
			s.add(k.path, k.show(a, va), k.show(b, vb))
		}
		for _, sub := range k.section.keys {
			s.key(sub, va, vb)
		}
		return
	}
	from, to := showKey(k, a, va), showKey(k, b, vb)
	differ := from != to
	if x, ok := va.Interface().([]byte); ok {
		// A body is shown cut short, so compared whole, with whether
		// it is set.
		differ = !bytes.Equal(x, vb.Bytes()) || a.FieldByName(k.sets).Bool() != b.FieldByName(k.sets).Bool()
	}
	if differ {
		*s = append(*s, Setting{k.path, from, to})
	}
}

// showKey writes the value v of k, held by owner, for a Setting: by k's
// show, or else by its type (showValue; a bool of an enum as its value).
func showKey(k *key, owner, v reflect.Value) string {
	if k.show != nil {
		return k.show(owner, v)
	}
	if b, ok := v.Interface().(bool); ok && len(k.enum) == 2 {
		return k.enum[map[bool]int{false: 0, true: 1}[b]]
	}
	return showValue(v)
}

// showValue writes v by its type: a string quoted ("default" when
// empty), a threshold or a duration "off" when off, headers as name:
// "value" pairs, a list of strings joined by spaces, a number in decimal.
func showValue(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case string:
		if x == "" {
			return "default"
		}
		return strconv.Quote(x)
	case limiter.Threshold:
		if n, on := x.Get(); on {
			return strconv.FormatInt(n, 10)
		}
		return "off"
	case time.Duration:
		if x <= 0 {
			return "off"
		}
		return x.String()
	case [][2]string:
		if len(x) == 0 {
			return "none"
		}
		parts := make([]string, len(x))
		for i, h := range x {
			parts[i] = h[0] + ": " + strconv.Quote(h[1])
		}
		return strings.Join(parts, ", ")
	case []string:
		return strings.Join(x, " ")
	}
	return fmt.Sprint(v.Interface())
}

// The show functions of keys.go (key.show).

func showQuoted(_, v reflect.Value) string { return strconv.Quote(v.String()) }

func showText(_, v reflect.Value) string { return fmt.Sprint(v.Interface()) }

// showBytes writes a size: 64MiB.
func showBytes(_, v reflect.Value) string { return formatBytes(v.Int()) }

// showOrDefault writes a zero value as "default": the field is left to
// the proxy's or the limiter's default.
func showOrDefault(_, v reflect.Value) string {
	if v.IsZero() {
		return "default"
	}
	return showValue(v)
}

// showFigure writes a clusterTokenBucket figure; 0 is off.
func showFigure(_, v reflect.Value) string {
	if v.Int() <= 0 {
		return "off"
	}
	return strconv.FormatInt(v.Int(), 10)
}

// showPerKey writes a point's per-key rules, each as its keys' values,
// or "none".
func showPerKey(_, v reflect.Value) string {
	if v.Len() == 0 {
		return "none"
	}
	rules := make([]string, v.Len())
	for i := range v.Len() {
		item := v.Index(i)
		parts := make([]string, len(perKeySection.keys))
		for j, k := range perKeySection.keys {
			parts[j] = k.name + "=" + showKey(k, item, field(k, item))
		}
		rules[i] = strings.Join(parts, " ")
	}
	return "[" + strings.Join(rules, "; ") + "]"
}

func showOn(_, v reflect.Value) string {
	if v.FieldByName("On").Bool() {
		return "on"
	}
	return "off"
}

func showRecoveryStart(owner, _ reflect.Value) string {
	return strconv.FormatInt(owner.Interface().(Point).RecoveryStartPercent(), 10)
}

func showSheddableShare(owner, _ reflect.Value) string {
	return strconv.FormatInt(owner.Interface().(Point).SheddablePercent(), 10)
}

func showACME(_, v reflect.Value) string {
	a := v.Interface().(*ACME)
	if a == nil {
		return "off"
	}
	return keyACMEDomains.name + " " + strings.Join(a.Domains, " ")
}

func showCluster(_, v reflect.Value) string { return clusterString(v.Interface().(*Cluster)) }

// maxShown bounds how many bytes of a body a Setting quotes.
const maxShown = 40

// showBody writes a fallback's body as its size and its first bytes
// quoted, or where it comes from.
func showBody(owner, _ reflect.Value) string {
	f := owner.Interface().(Fallback)
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

func showGRPCStatus(owner, _ reflect.Value) string {
	f := owner.Interface().(Fallback)
	switch {
	case f.GRPCStatusSet:
		return strconv.Itoa(f.GRPCStatus)
	case f.GRPCStatus != 0: // not from a file: the decoder sets both
		return fmt.Sprintf("default (%d unset)", f.GRPCStatus)
	}
	return "default"
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

// clusterString formats cluster: for a reload's explanation, without
// secrets (the password stays in its file).
func clusterString(c *Cluster) string {
	if c == nil {
		return "none"
	}
	parts := []string{
		keyClusterAddresses.name, fmt.Sprint(c.Addresses),
		keyClusterDB.name, strconv.Itoa(c.DB),
		keyClusterTimeout.name, c.Timeout.String(),
		keyClusterReplicas.name, strconv.Itoa(c.Replicas),
		keyClusterKeyPrefix.name, strconv.Quote(c.KeyPrefix),
	}
	for _, s := range []struct {
		key   *key
		value string
	}{{keyClusterMasterName, c.MasterName}, {keyClusterUsername, c.Username}, {keyClusterPasswordFile, c.PasswordFile}} {
		if s.value != "" {
			parts = append(parts, s.key.name, strconv.Quote(s.value))
		}
	}
	if c.TLS != nil {
		parts = append(parts, keyClusterTLS.name, fmt.Sprintf("%+v", *c.TLS))
	}
	return strings.Join(parts, " ")
}

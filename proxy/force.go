package proxy

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/proxy/events"
)

// ForceAction is what an operator's switch does to every request of a
// point, whatever its strategies say. The zero ForceAction is none.
type ForceAction uint8

const (
	// ForceDegrade answers every request of the point with its fallback,
	// marked "Sds-Degraded: forced; point=P", without calling the
	// service. Each counts in the window as a degraded visit
	// (limiter.Point.Refuse).
	ForceDegrade ForceAction = iota + 1
	// ForcePass forwards every request of the point without judging it:
	// no strategy, delay or downgradeRate applies. Each still counts in
	// the window as a passed visit, holds a concurrency slot while in
	// flight and has its timeout or exception counted
	// (limiter.Point.Admit), so /status, the metrics and the access log
	// show the traffic the switch lets through, and the point judges it
	// once the switch ends.
	ForcePass
)

// String returns "degrade" or "pass" ("" for none): the word of the admin
// port's JSON, the logs and the metrics.
func (a ForceAction) String() string {
	switch a {
	case ForceDegrade:
		return "degrade"
	case ForcePass:
		return "pass"
	}
	return ""
}

// ParseForceAction returns the action named "degrade" or "pass".
func ParseForceAction(s string) (ForceAction, bool) {
	switch s {
	case "degrade":
		return ForceDegrade, true
	case "pass":
		return ForcePass, true
	}
	return 0, false
}

// Limits of a switch.
const (
	// MaxForceTTL is the longest a switch may last: a switch is for an
	// incident; what must hold longer belongs in sds.yaml.
	MaxForceTTL = 24 * time.Hour
	// MaxForceReason is the longest reason, in bytes.
	MaxForceReason = 256
)

// Force is an operator's switch on one point: from Since until Until
// (exclusive), every request of Point gets Action.
type Force struct {
	Point  string
	Action ForceAction
	// Reason is the operator's words, shown and logged as given.
	Reason string
	// Since is when the switch was set, Until when it ends, on the
	// Handler's clock.
	Since, Until time.Time
}

// ErrUnknownPoint is Handler.Force's error for a point not in force.
var ErrUnknownPoint = errors.New("no such point in the config in force")

// ForceError is a switch that Handler.Force refuses: a field out of its
// limits.
type ForceError struct {
	Field, Problem string
}

func (e *ForceError) Error() string { return e.Field + ": " + e.Problem }

// forces are the switches in force, by point name: a map that is never
// written once published, replaced whole by each change (changes are
// rare, reads are every request's), nil when there is none.
type forces struct {
	mu sync.Mutex // serialises changes
	m  atomic.Pointer[map[string]*forceEntry]
}

// forceEntry is one switch and the counter of the requests it answers.
type forceEntry struct {
	Force
	requests prometheus.Counter
}

// active returns the switch of point name in force at now, or nil. It
// does not allocate; with no switch at all it is one atomic load.
func (fs *forces) active(name string, now time.Time) *forceEntry {
	m := fs.m.Load()
	if m == nil {
		return nil
	}
	if e := (*m)[name]; e != nil && now.Before(e.Until) {
		return e
	}
	return nil
}

// change replaces the map with edit's result on a copy; the caller holds
// fs.mu.
func (fs *forces) change(edit func(m map[string]*forceEntry)) {
	m := map[string]*forceEntry{}
	if old := fs.m.Load(); old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	edit(m)
	if len(m) == 0 {
		fs.m.Store(nil)
		return
	}
	fs.m.Store(&m)
}

// Force switches point to action for ttl from the Handler's clock's now,
// replacing any switch it has, and returns the switch. The switch is kept
// across Swaps as long as the point's name is in the config (a reload
// that removes the point ends it), and ends at its Until (Tick reports
// the end; requests stop seeing it at once). It is logged, recorded in
// the event history and shown by Forces.
//
// It fails with ErrUnknownPoint when no point of the config in force has
// that name, and with a *ForceError when action is not one, ttl is not in
// (0, MaxForceTTL] or reason is empty, longer than MaxForceReason bytes,
// not UTF-8 or holds control characters. Safe for concurrent use.
func (h *Handler) Force(point string, action ForceAction, ttl time.Duration, reason string) (Force, error) {
	var errs []error
	if action != ForceDegrade && action != ForcePass {
		errs = append(errs, &ForceError{"action", `want "degrade" or "pass"`})
	}
	if ttl <= 0 || ttl > MaxForceTTL {
		errs = append(errs, &ForceError{"ttl", fmt.Sprintf("%s is not in (0, %s]: a switch is for an incident; change sds.yaml for longer", ttl, MaxForceTTL)})
	}
	if err := checkReason(reason); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Force{}, errors.Join(errs...)
	}
	h.forces.mu.Lock()
	defer h.forces.mu.Unlock()
	if !slices.ContainsFunc(h.Points(), func(p *Point) bool { return p.name == point }) {
		return Force{}, ErrUnknownPoint
	}
	now := h.now()
	e := &forceEntry{
		Force:    Force{Point: point, Action: action, Reason: reason, Since: now, Until: now.Add(ttl)},
		requests: h.opts.Metrics.Forces.Requests.WithLabelValues(point, action.String()),
	}
	var replaced *forceEntry
	h.forces.change(func(m map[string]*forceEntry) {
		replaced = m[point]
		m[point] = e
	})
	if replaced != nil {
		h.opts.Metrics.Forces.Active.DeleteLabelValues(point, replaced.Action.String())
	}
	h.opts.Metrics.Forces.Active.WithLabelValues(point, action.String()).Set(1)
	h.opts.Metrics.Forces.Changes.WithLabelValues(action.String()).Inc()
	h.changes.Record(events.Event{At: now, Kind: events.Force, Point: point,
		Detail: fmt.Sprintf("%s for %s: %s", action, ttl, reason)})
	h.opts.Logger.Warn("point forced", zap.String("point", point), zap.String("action", action.String()),
		zap.Duration("ttl", ttl), zap.Time("until", e.Until), zap.String("reason", reason))
	return e.Force, nil
}

// checkReason reports a reason that cannot be shown on one line as given.
func checkReason(reason string) error {
	switch {
	case reason == "":
		return &ForceError{"reason", "is empty; say why, for whoever reads /status and the logs"}
	case len(reason) > MaxForceReason:
		return &ForceError{"reason", fmt.Sprintf("is %d bytes; at most %d", len(reason), MaxForceReason)}
	case !utf8.ValidString(reason):
		return &ForceError{"reason", "is not UTF-8"}
	case slices.ContainsFunc([]rune(reason), unicode.IsControl):
		return &ForceError{"reason", "holds a control character (a line break, a tab...); give one line"}
	}
	return nil
}

// Unforce ends point's switch at once and returns it, its Until now (the
// Handler's clock); ok is false when the point had none in force. Safe for
// concurrent use.
func (h *Handler) Unforce(point string) (f Force, ok bool) {
	h.forces.mu.Lock()
	defer h.forces.mu.Unlock()
	now := h.now()
	e := h.forces.active(point, now)
	if e == nil {
		return Force{}, false
	}
	h.endForce(e, now, "cleared")
	f = e.Force
	f.Until = now
	return f, true
}

// Forces returns the switches in force at now, in config order.
func (h *Handler) Forces(now time.Time) []Force {
	var out []Force
	for _, p := range h.Points() {
		if e := h.forces.active(p.name, now); e != nil {
			out = append(out, e.Force)
		}
	}
	return out
}

// expireForces ends the switches whose time has passed at now (Tick).
func (h *Handler) expireForces(now time.Time) {
	if h.forces.m.Load() == nil {
		return
	}
	h.forces.mu.Lock()
	defer h.forces.mu.Unlock()
	m := h.forces.m.Load()
	if m == nil {
		return
	}
	for _, e := range *m {
		if !now.Before(e.Until) {
			h.endForce(e, now, "its ttl passed")
		}
	}
}

// dropForces ends the switches of points not in cfg (Swap).
func (h *Handler) dropForces(cfg *Config) {
	if h.forces.m.Load() == nil {
		return
	}
	h.forces.mu.Lock()
	defer h.forces.mu.Unlock()
	m := h.forces.m.Load()
	if m == nil {
		return
	}
	now := h.now()
	for name, e := range *m {
		if !slices.ContainsFunc(cfg.Points, func(p *Point) bool { return p.name == name }) {
			h.endForce(e, now, "the point left the config")
		}
	}
}

// endForce removes e, whose point's switch it is, and reports its end;
// the caller holds h.forces.mu. An entry already past its Until ends at
// its Until: that is when requests stopped seeing it.
func (h *Handler) endForce(e *forceEntry, now time.Time, cause string) {
	h.forces.change(func(m map[string]*forceEntry) { delete(m, e.Point) })
	at := now
	if e.Until.Before(now) {
		at = e.Until
	}
	h.opts.Metrics.Forces.Active.DeleteLabelValues(e.Point, e.Action.String())
	h.opts.Metrics.Forces.Changes.WithLabelValues("end").Inc()
	h.changes.Record(events.Event{At: at, Kind: events.ForceEnd, Point: e.Point, Detail: e.Action.String() + " ended: " + cause})
	h.opts.Logger.Info("point force ended", zap.String("point", e.Point), zap.String("action", e.Action.String()),
		zap.String("cause", cause))
}

// forcedField is the access log's "forced" field: the switch's action,
// or nothing for a judged request.
func forcedField(a ForceAction) zap.Field {
	if a == 0 {
		return zap.Skip()
	}
	return zap.String("forced", a.String())
}

package limiter

import "time"

// Snapshot is a read-only view of a point for the admin port.
type Snapshot struct {
	Name     string
	Settings Settings
	Counts   Counts // the window at the snapshot's instant
	InFlight int64
	// Tokens left in the token bucket, or -1 when the bucket is off.
	Tokens int64
	State  State
	// DelayStrategy and DelayUntil describe the delay when State is Delay.
	DelayStrategy Strategy
	DelayUntil    time.Time
	// LastTrip is the last time the strategies failed; zero if never.
	LastTrip Trip
	// Series holds each bucket's counts, oldest first.
	Series []Counts
	// BucketWidth is the span of one bucket of Series.
	BucketWidth time.Duration
}

// Snapshot returns the point's state at now. It allocates and takes the
// point's locks briefly; it is meant for status pages, not the hot path.
func (p *Point) Snapshot(now time.Time) Snapshot {
	st := p.st
	cur := st.win.bucket(now)
	sn := Snapshot{
		Name:        p.name,
		Settings:    p.s,
		Counts:      st.win.sum(cur),
		InFlight:    p.InFlight(),
		Tokens:      p.tokens(now),
		State:       Closed,
		Series:      st.win.series(cur),
		BucketWidth: time.Duration(st.win.width),
	}
	st.mu.Lock()
	sn.LastTrip = st.last
	if st.delay.active && now.Before(st.delay.until) {
		sn.State, sn.DelayStrategy, sn.DelayUntil = Delay, st.delay.strategy, st.delay.until
	}
	st.mu.Unlock()
	if sn.State == Closed && st.tripped.Load() {
		sn.State = Tripped
	}
	return sn
}

// Tripped reports whether the point is tripped or in its delay at now
// (the sds_point_tripped gauge). It does not allocate.
func (p *Point) Tripped(now time.Time) bool {
	if p.st.tripped.Load() {
		return true
	}
	if !p.st.inDelay.Load() {
		return false
	}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	return p.st.delay.active && now.Before(p.st.delay.until)
}

// InFlight returns the number of forwarded calls not yet exited. It sums
// the shards' counts (see pointState), so concurrent calls may or may not
// be included.
func (p *Point) InFlight() int64 { return p.st.inflight.Load() + p.st.win.inflight() }

package connlimit

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultSoftIdleTimeout is Options.SoftIdleTimeout's default: long enough
// for a client's next request in a burst, short enough that connections
// held idle for minutes are shed under pressure.
const DefaultSoftIdleTimeout = 5 * time.Second

// Options configure a Limiter. The zero value counts connections and never
// closes one.
type Options struct {
	// Max is the most connections open at once; at least 1, or 0 (or
	// negative) for no limit. The count includes new, idle, active and
	// hijacked connections. SetMax changes it later.
	Max int
	// SoftIdleTimeout: while more than SoftLimit(Max) connections are open,
	// a connection waiting this long for a request (new or idle) is closed.
	// 0 means DefaultSoftIdleTimeout.
	SoftIdleTimeout time.Duration
}

// SoftLimit is the count above which waiting connections are closed after
// SoftIdleTimeout: 3/4 of max, rounded down; 0 for no limit (max < 1).
func SoftLimit(max int) int {
	if max < 1 {
		return 0
	}
	return max * 3 / 4
}

// Stats is a snapshot of a Limiter. Open = New + Idle + Active + Hijacked.
type Stats struct {
	// Max is the limit in force; 0 for none.
	Max int
	// New, Idle, Active and Hijacked count the open connections by state.
	New, Idle, Active, Hijacked int
	// Evicted counts waiting connections closed to admit a new one, Refused
	// new connections closed at once because none was waiting, and
	// SoftClosed waiting connections closed after SoftIdleTimeout over the
	// soft limit. All three are totals since New.
	Evicted, Refused, SoftClosed uint64
}

// Open returns the number of open connections.
func (s Stats) Open() int { return s.New + s.Idle + s.Active + s.Hijacked }

// state is a connection's state; 0 means it is no longer counted.
type state uint8

const (
	stateNew state = iota + 1
	stateIdle
	stateActive
	stateHijacked
	numStates
)

// Limiter bounds and counts the connections of one listener. It is safe
// for concurrent use; make one with New.
type Limiter struct {
	softIdle time.Duration

	mu     sync.Mutex
	max    int
	count  [numStates]int // by state; index 0 unused
	open   int
	oldest *conn // the waiting connections, oldest first ...
	newest *conn // ... and newest last
	timer  *time.Timer
	armed  bool // timer is set to fire for the oldest waiting connection

	// Totals of Stats.
	evicted, refused, softClosed uint64
}

// New returns a Limiter with the options o.
func New(o Options) *Limiter {
	if o.SoftIdleTimeout <= 0 {
		o.SoftIdleTimeout = DefaultSoftIdleTimeout
	}
	return &Limiter{softIdle: o.SoftIdleTimeout, max: max(o.Max, 0)}
}

// SetMax changes the limit; n < 1 means no limit. Lowering it closes
// waiting connections, oldest first, until the count fits or none is left
// waiting; active and hijacked ones are left to finish, and new
// connections are refused until the count is below n.
func (l *Limiter) SetMax(n int) {
	l.mu.Lock()
	l.max = max(n, 0)
	var victims []*conn
	for l.max > 0 && l.open > l.max && l.oldest != nil {
		victims = append(victims, l.evict())
	}
	l.arm(time.Now())
	l.mu.Unlock()
	closeAll(victims)
}

// Stats returns the current counts.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{
		Max: l.max,
		New: l.count[stateNew], Idle: l.count[stateIdle], Active: l.count[stateActive], Hijacked: l.count[stateHijacked],
		Evicted: l.evicted, Refused: l.refused, SoftClosed: l.softClosed,
	}
}

// Listener returns ln with every accepted connection counted by l. Its
// Accept admits a connection under the limit, or closes the oldest waiting
// one to admit it, or else closes the new one at once and waits for the
// next; it blocks only in ln.Accept. Closing the returned connection
// releases its place.
func (l *Limiter) Listener(ln net.Listener) net.Listener {
	return &listener{Listener: ln, l: l}
}

type listener struct {
	net.Listener
	l *Limiter
}

func (ln *listener) Accept() (net.Conn, error) {
	for {
		nc, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, victim := ln.l.admit(nc)
		if victim != nil {
			victim.Conn.Close()
		}
		if c != nil {
			return c, nil
		}
		nc.Close()
	}
}

// ConnState records a connection's new state; set it as the
// http.Server's ConnState (or call it from there). It ignores connections
// that l did not accept and connections already closed or evicted.
func (l *Limiter) ConnState(nc net.Conn, s http.ConnState) {
	c := unwrap(nc)
	if c == nil || c.l != l {
		return
	}
	switch s {
	case http.StateIdle:
		l.set(c, stateIdle)
	case http.StateActive:
		l.set(c, stateActive)
	case http.StateHijacked:
		l.set(c, stateHijacked)
	case http.StateClosed:
		l.release(c)
	}
}

// unwrap finds the connection Accept returned under the one net/http
// reports: itself, a *tls.Conn around it, or net/http's stand-in
// *tls.Conn for cleartext HTTP/2, which wraps it once more.
func unwrap(nc net.Conn) *conn {
	for range 4 {
		switch v := nc.(type) {
		case *conn:
			return v
		case interface{ NetConn() net.Conn }:
			nc = v.NetConn()
		case interface{ UnencryptedNetConn() net.Conn }:
			nc = v.UnencryptedNetConn()
		default:
			return nil
		}
	}
	return nil
}

// conn is a counted connection. Its fields but Conn and l are guarded by
// l.mu.
type conn struct {
	net.Conn
	l     *Limiter
	state state     // 0 once released
	since time.Time // when it started waiting, while new or idle
	prev  *conn     // older waiting connection
	next  *conn     // newer waiting connection
}

// Close releases the connection's place and closes it. It may be called
// more than once.
func (c *conn) Close() error {
	c.l.release(c)
	return c.Conn.Close()
}

var errNoCloseWrite = errors.New("connlimit: the connection cannot half-close")

// CloseWrite half-closes the connection when it supports it (TCP does).
// net/http uses it to let a client read a final response before the close.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoCloseWrite
}

// admit counts nc, closing the oldest waiting connection if the limit
// requires it. It returns nil when nc must be refused, and the evicted
// connection, if any, for the caller to close outside the lock.
func (l *Limiter) admit(nc net.Conn) (c, victim *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.open >= l.max {
		if l.oldest == nil {
			l.refused++
			return nil, nil
		}
		victim = l.evict()
	}
	c = &conn{Conn: nc, l: l, state: stateNew}
	l.count[stateNew]++
	l.open++
	now := time.Now()
	l.push(c, now)
	l.arm(now)
	return c, victim
}

// set moves c to state s.
func (l *Limiter) set(c *conn, s state) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.state == 0 || c.state == s {
		return
	}
	if c.state == stateNew || c.state == stateIdle {
		l.unlink(c)
	}
	l.count[c.state]--
	l.count[s]++
	c.state = s
	if s == stateIdle {
		now := time.Now()
		l.push(c, now)
		l.arm(now)
	}
}

// release stops counting c.
func (l *Limiter) release(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop(c)
}

// drop stops counting c; l.mu is held.
func (l *Limiter) drop(c *conn) {
	if c.state == 0 {
		return
	}
	if c.state == stateNew || c.state == stateIdle {
		l.unlink(c)
	}
	l.count[c.state]--
	l.open--
	c.state = 0
}

// evict stops counting the oldest waiting connection and returns it, to be
// closed outside the lock; l.mu is held and l.oldest is not nil.
func (l *Limiter) evict() *conn {
	c := l.oldest
	l.drop(c)
	l.evicted++
	return c
}

// push appends c to the waiting connections; l.mu is held.
func (l *Limiter) push(c *conn, now time.Time) {
	c.since = now
	c.prev, c.next = l.newest, nil
	if l.newest != nil {
		l.newest.next = c
	} else {
		l.oldest = c
	}
	l.newest = c
}

// unlink removes c from the waiting connections; l.mu is held.
func (l *Limiter) unlink(c *conn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.oldest = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.newest = c.prev
	}
	c.prev, c.next = nil, nil
}

// overSoft reports whether more connections are open than the soft limit;
// l.mu is held.
func (l *Limiter) overSoft() bool {
	return l.max > 0 && l.open > SoftLimit(l.max)
}

// arm sets the timer for when the oldest waiting connection will have
// waited SoftIdleTimeout, if the count is over the soft limit and the
// timer is not set already. A timer set for a connection that has since
// left only fires early, and re-arms. l.mu is held.
func (l *Limiter) arm(now time.Time) {
	if l.armed || l.oldest == nil || !l.overSoft() {
		return
	}
	d := l.oldest.since.Add(l.softIdle).Sub(now)
	if l.timer == nil {
		l.timer = time.AfterFunc(d, l.shed)
	} else {
		l.timer.Reset(d)
	}
	l.armed = true
}

// shed closes the connections that have waited SoftIdleTimeout, oldest
// first, while the count is over the soft limit.
func (l *Limiter) shed() {
	l.mu.Lock()
	l.armed = false
	now := time.Now()
	var victims []*conn
	for l.oldest != nil && l.overSoft() && now.Sub(l.oldest.since) >= l.softIdle {
		c := l.oldest
		l.drop(c)
		l.softClosed++
		victims = append(victims, c)
	}
	l.arm(now)
	l.mu.Unlock()
	closeAll(victims)
}

// closeAll closes connections that are no longer counted.
func closeAll(cs []*conn) {
	for _, c := range cs {
		c.Conn.Close()
	}
}

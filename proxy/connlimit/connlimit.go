package connlimit

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// DefaultSoftIdleTimeout is Options.SoftIdleTimeout's default: long enough
// for a client's next request in a burst, short enough that connections
// held idle for minutes are shed under pressure.
const DefaultSoftIdleTimeout = 5 * time.Second

// DefaultFirstRequestGrace is Options.FirstRequestGrace's default: a new
// connection that has sent nothing yet may be one a client dialled ahead
// of need and holds in its pool (Go's http.Transport does), which it will
// use; one silent for a second is closed for a newcomer. To hold every
// place with connections that never send, a client must open
// maxConnections of them every second (1,024 a second at the default),
// and newcomers still get the places that come free in their turn.
const DefaultFirstRequestGrace = time.Second

// DefaultIdleGrace is Options.IdleGrace's default: a keep-alive connection
// that carried a request within the last second is in use by a busy
// client, which would only dial again; one idle longer is held, not used.
const DefaultIdleGrace = time.Second

// DefaultUnreadGrace is Options.UnreadGrace's default: far longer than a
// request that has arrived waits to be read, even on a busy core.
const DefaultUnreadGrace = time.Second

// DefaultAcceptWait is Options.AcceptWait's default: longer than the
// graces above, so that a newcomer outwaits the connections it may
// displace, and shorter than a client waits for a slow connect.
const DefaultAcceptWait = 2 * time.Second

// recheck is how often a connection waiting for a place looks again for
// one that has become evictable (a request read, a grace passed) without
// any state change to wake it.
const recheck = 10 * time.Millisecond

// requestIdleGrace is how long a connection must have been idle to be
// closed for a newcomer whose request has arrived (victim): long enough
// that a client that reuses its connections as it goes (most recently
// used first, as Go's http.Transport does) has moved on to others.
const requestIdleGrace = 100 * time.Millisecond

// maxScan bounds the waiting connections of one state looked at for a
// victim per admission: the oldest ones, where victims are.
const maxScan = 32

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
	// FirstRequestGrace: at the limit, a new connection with nothing to
	// read is not evicted until it has been open this long: its first
	// request may be on its way. 0 means DefaultFirstRequestGrace.
	FirstRequestGrace time.Duration
	// IdleGrace: at the limit, an idle keep-alive connection is not
	// evicted until it has been idle this long. 0 means DefaultIdleGrace.
	IdleGrace time.Duration
	// UnreadGrace: at the limit, a waiting connection whose request has
	// arrived but not yet been read is not evicted until it has waited
	// this long. 0 means DefaultUnreadGrace.
	UnreadGrace time.Duration
	// AcceptWait: at the limit with no connection to evict, a new
	// connection waits this long for a place before it is refused, and
	// the ones after it wait in the kernel's accept queue meanwhile: the
	// listener accepts no more than it can admit, so a storm of
	// connections costs the proxy at most one refusal per AcceptWait, and
	// its clients' retries of a full queue cost it nothing. 0 means
	// DefaultAcceptWait.
	AcceptWait time.Duration
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
	// new connections closed unserved because no place showed (AcceptWait),
	// SoftClosed waiting connections closed after SoftIdleTimeout over the
	// soft limit, and Queued new connections that had to wait for a place
	// (admitted or refused after). All four are totals since New.
	Evicted, Refused, SoftClosed, Queued uint64
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
	softIdle, grace, idleGrace, unreadGrace, acceptWait time.Duration
	// room has a token when a place may have opened (a connection closed
	// or went idle), for an admission waiting for one.
	room chan struct{}

	mu    sync.Mutex
	max   int
	count [numStates]int // by state; index 0 unused
	open  int
	// fresh and idle are the waiting connections, new and idle, each
	// oldest first.
	fresh, idle queue
	timer       *time.Timer
	armed       bool // timer is set to fire for the oldest waiting connection
	// waiting counts the admissions waiting for a place: only then is a
	// room token sent.
	waiting int

	// Totals of Stats.
	evicted, refused, softClosed, queued uint64
}

// queue is the waiting connections of one state, oldest first.
type queue struct{ oldest, newest *conn }

// New returns a Limiter with the options o.
func New(o Options) *Limiter {
	if o.SoftIdleTimeout <= 0 {
		o.SoftIdleTimeout = DefaultSoftIdleTimeout
	}
	if o.FirstRequestGrace <= 0 {
		o.FirstRequestGrace = DefaultFirstRequestGrace
	}
	if o.IdleGrace <= 0 {
		o.IdleGrace = DefaultIdleGrace
	}
	if o.UnreadGrace <= 0 {
		o.UnreadGrace = DefaultUnreadGrace
	}
	if o.AcceptWait <= 0 {
		o.AcceptWait = DefaultAcceptWait
	}
	return &Limiter{softIdle: o.SoftIdleTimeout, grace: o.FirstRequestGrace, idleGrace: o.IdleGrace, unreadGrace: o.UnreadGrace, acceptWait: o.AcceptWait,
		room: make(chan struct{}, 1), max: max(o.Max, 0)}
}

// SetMax changes the limit; n < 1 means no limit. Lowering it closes
// waiting connections, oldest first, until the count fits or none is left
// waiting; active and hijacked ones are left to finish, and new
// connections are refused until the count is below n.
func (l *Limiter) SetMax(n int) {
	l.mu.Lock()
	l.max = max(n, 0)
	var victims []*conn
	for l.max > 0 && l.open > l.max {
		c := l.longest()
		if c == nil {
			break
		}
		l.drop(c)
		l.evicted++
		victims = append(victims, c)
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
		Evicted: l.evicted, Refused: l.refused, SoftClosed: l.softClosed, Queued: l.queued,
	}
}

// Listener returns ln with every accepted connection counted by l. Its
// Accept admits a connection under the limit; at the limit it closes a
// waiting connection to admit it (admit says which), or else waits up to
// AcceptWait for a place, holding the new connection and leaving the next
// ones in the kernel's accept queue, and closes it unserved if none shows.
// Closing the returned listener ends such a wait. Closing an accepted
// connection releases its place.
func (l *Limiter) Listener(ln net.Listener) net.Listener {
	return &listener{Listener: ln, l: l, done: make(chan struct{})}
}

type listener struct {
	net.Listener
	l    *Limiter
	done chan struct{} // closed by Close
	once sync.Once
}

func (ln *listener) Accept() (net.Conn, error) {
	for {
		nc, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := ln.l.admit(nc, ln.done); c != nil {
			return c, nil
		}
		nc.Close()
	}
}

// Close closes the listener and ends an admission waiting for a place.
func (ln *listener) Close() error {
	ln.once.Do(func() { close(ln.done) })
	return ln.Listener.Close()
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
	raw   syscall.RawConn // the socket, to peek at; nil for a connection that has none
	state state           // 0 once released
	since time.Time       // when it started waiting, while new or idle
	prev  *conn           // older waiting connection of its state
	next  *conn           // newer waiting connection of its state
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

// admit counts nc and returns it as a counted connection, or nil when it
// must be refused (the caller closes it). At the limit it first closes a
// victim (victim) to make room; with none, it waits for a place, up to
// AcceptWait, on room tokens and every recheck, or until done is closed.
func (l *Limiter) admit(nc net.Conn, done <-chan struct{}) *conn {
	c := &conn{Conn: nc, l: l, state: stateNew}
	if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	var waitUntil time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		l.mu.Lock()
		now := time.Now()
		if l.max > 0 && l.open >= l.max {
			v := l.victim(now, c.pending())
			if v == nil {
				switch {
				case waitUntil.IsZero():
					l.queued++
					l.waiting++
					defer l.doneWaiting()
					waitUntil = now.Add(l.acceptWait)
				case !now.Before(waitUntil):
					l.refused++
					l.mu.Unlock()
					return nil
				}
				l.mu.Unlock()
				d := min(waitUntil.Sub(now), recheck)
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				select {
				case <-l.room:
				case <-timer.C:
				case <-done:
					return nil
				}
				continue
			}
			l.drop(v)
			l.evicted++
			defer v.Conn.Close()
		}
		l.count[stateNew]++
		l.open++
		l.fresh.push(c, now)
		l.arm(now)
		l.mu.Unlock()
		return c
	}
}

// victim returns the waiting connection to close to admit a newcomer at
// now, or nil when none may be: the one that has waited longest among the
// waiting connections with nothing unread in their socket, that is, whose
// next (or first) request has not arrived. A request that has arrived but
// is not yet read (the server has yet to get to it) is never cut for a
// newcomer, whose own request would be no better off, unless it has
// waited UnreadGrace.
//
// Which of them a newcomer may close depends on what it holds. A new
// connection that has sent nothing yet for FirstRequestGrace since it was
// accepted may be closed for any newcomer, and not before: its request is
// likely on its way. An idle connection may be closed once idle for
// IdleGrace by a newcomer with nothing sent yet (such as a connection a
// client dialled ahead of need), but after requestIdleGrace already by a
// newcomer whose request has arrived: a request in hand comes before a
// connection its client has stopped using, while one used a moment ago
// belongs to a busy client, who would only dial again: closing those
// feeds a storm of connections. Only the maxScan oldest of each state are
// looked at.
// l.mu is held.
func (l *Limiter) victim(now time.Time, request bool) *conn {
	idleGrace, firstGrace := l.idleGrace, l.grace
	if request {
		idleGrace = min(idleGrace, requestIdleGrace)
	}
	var idle, fresh *conn
	n := 0
	for c := l.idle.oldest; c != nil && n < maxScan; c, n = c.next, n+1 {
		age := now.Sub(c.since)
		if age < idleGrace {
			break // the younger ones too
		}
		if age >= l.unreadGrace || !c.pending() {
			idle = c
			break
		}
	}
	n = 0
	for c := l.fresh.oldest; c != nil && n < maxScan; c, n = c.next, n+1 {
		age := now.Sub(c.since)
		if age < firstGrace {
			break
		}
		if age >= l.unreadGrace || !c.pending() {
			fresh = c
			break
		}
	}
	if fresh == nil || idle != nil && idle.since.Before(fresh.since) {
		return idle
	}
	return fresh
}

// doneWaiting ends an admission's wait for a place.
func (l *Limiter) doneWaiting() {
	l.mu.Lock()
	l.waiting--
	l.mu.Unlock()
}

// wake tells an admission waiting for a place that one may have opened;
// l.mu is held.
func (l *Limiter) wake() {
	if l.waiting == 0 {
		return
	}
	select {
	case l.room <- struct{}{}:
	default:
	}
}

// set moves c to state s.
func (l *Limiter) set(c *conn, s state) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.state == 0 || c.state == s {
		return
	}
	l.unlink(c)
	l.count[c.state]--
	l.count[s]++
	c.state = s
	if s == stateIdle {
		now := time.Now()
		l.idle.push(c, now)
		l.arm(now)
		l.wake()
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
	l.unlink(c)
	l.count[c.state]--
	l.open--
	c.state = 0
	l.wake()
}

// push appends c to q, waiting since now; l.mu is held.
func (q *queue) push(c *conn, now time.Time) {
	c.since = now
	c.prev, c.next = q.newest, nil
	if q.newest != nil {
		q.newest.next = c
	} else {
		q.oldest = c
	}
	q.newest = c
}

// unlink removes c from the queue of its state, if it waits in one; l.mu
// is held.
func (l *Limiter) unlink(c *conn) {
	var q *queue
	switch c.state {
	case stateNew:
		q = &l.fresh
	case stateIdle:
		q = &l.idle
	default:
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.oldest = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.newest = c.prev
	}
	c.prev, c.next = nil, nil
}

// longest returns the connection that has waited longest, new or idle, or
// nil; l.mu is held.
func (l *Limiter) longest() *conn {
	f, i := l.fresh.oldest, l.idle.oldest
	if f == nil || i != nil && i.since.Before(f.since) {
		return i
	}
	return f
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
	oldest := l.longest()
	if l.armed || oldest == nil || !l.overSoft() {
		return
	}
	d := oldest.since.Add(l.softIdle).Sub(now)
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
	for c := l.longest(); c != nil && l.overSoft() && now.Sub(c.since) >= l.softIdle; c = l.longest() {
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

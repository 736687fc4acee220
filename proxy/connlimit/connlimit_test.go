package connlimit_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
)

func TestSoftLimit(t *testing.T) {
	for _, tt := range []struct{ max, want int }{
		{-1, 0}, {0, 0}, {1, 0}, {2, 1}, {3, 2}, {4, 3}, {5, 3}, {1024, 768},
	} {
		if got := connlimit.SoftLimit(tt.max); got != tt.want {
			t.Errorf("SoftLimit(%d): got %d, want %d", tt.max, got, tt.want)
		}
	}
}

// pipeListener hands out the server ends of pipes, one per Accept, and
// then errDone.
type pipeListener struct {
	conns []net.Conn
}

var errDone = errors.New("no more connections")

func (p *pipeListener) Accept() (net.Conn, error) {
	if len(p.conns) == 0 {
		return nil, errDone
	}
	c := p.conns[0]
	p.conns = p.conns[1:]
	return c, nil
}

func (p *pipeListener) Close() error   { return nil }
func (p *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// pipes returns n pipes: the server ends for a pipeListener and the client
// ends to observe closes. t.Cleanup closes them all.
func pipes(t *testing.T, n int) (server, client []net.Conn) {
	for range n {
		s, c := net.Pipe()
		server, client = append(server, s), append(client, c)
		t.Cleanup(func() { s.Close(); c.Close() })
	}
	return server, client
}

// closed reports whether the server end of the pipe whose client end is c
// was closed, without waiting: a pipe reports io.EOF for a closed peer
// before it looks at the read deadline, which has already passed.
func closed(c net.Conn) bool {
	c.SetReadDeadline(time.Now())
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF)
}

// The states net/http reports, as written in the table below.
var states = map[byte]http.ConnState{'n': http.StateNew, 'i': http.StateIdle, 'a': http.StateActive, 'h': http.StateHijacked}

func TestAdmit(t *testing.T) {
	const (
		firstGrace = connlimit.DefaultFirstRequestGrace
		idleGrace  = connlimit.DefaultIdleGrace
	)
	tests := []struct {
		name     string
		max      int
		existing string // one letter per open connection, oldest first: n(ew) i(dle) a(ctive) h(ijacked)
		// wait passes between the existing ones, all waiting from one
		// instant, and the newcomer.
		wait    time.Duration
		evicted int  // index of the connection closed to admit the next; -1 for none
		refused bool // refused after waiting AcceptWait
		queued  bool // the newcomer waited for a place
	}{
		{"no limit", 0, "aaaa", 0, -1, false, false},
		{"one below the limit", 3, "ii", 0, -1, false, false},
		{"at the limit, oldest idle goes", 3, "iii", idleGrace, 0, false, false},
		{"a busy client's idle ones stay for IdleGrace", 3, "iii", 0, 0, false, true},
		{"at the limit, the idle one goes", 3, "aia", idleGrace, 1, false, false},
		{"a new one past its grace is evictable", 3, "ana", firstGrace, 1, false, false},
		{"a new one within its grace: the newcomer waits", 3, "ana", 0, 1, false, true},
		{"oldest waiting first, new or idle", 3, "nia", idleGrace, 0, false, false},
		{"a new one past its grace before a busy client's idle one", 3, "ina", firstGrace, 1, false, false},
		{"oldest new first", 3, "ann", firstGrace, 1, false, false},
		{"every one active: refused after AcceptWait", 3, "aaa", 0, -1, true, true},
		{"hijacked are not evictable", 2, "ha", 0, -1, true, true},
		{"limit of one, idle", 1, "i", idleGrace, 0, false, false},
		{"limit of one, active", 1, "a", 0, -1, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := connlimit.New(connlimit.Options{Max: tt.max})
				server, client := pipes(t, len(tt.existing)+1)
				ln := lim.Listener(&pipeListener{conns: server})
				for i := range tt.existing {
					c, err := ln.Accept()
					if err != nil {
						t.Fatalf("accept %d: %v", i, err)
					}
					lim.ConnState(c, http.StateNew)
					if tt.existing[i] == 'h' {
						lim.ConnState(c, http.StateActive)
					}
					lim.ConnState(c, states[tt.existing[i]])
				}
				time.Sleep(tt.wait) // the bubble's clock
				c, err := ln.Accept()
				switch {
				case tt.refused && !errors.Is(err, errDone):
					t.Fatalf("accept: got %v, %v; want it refused (and then %v)", c, err, errDone)
				case !tt.refused && err != nil:
					t.Fatalf("accept: got %v, want a connection", err)
				}
				for i := range tt.existing {
					if got, want := closed(client[i]), i == tt.evicted; got != want {
						t.Errorf("connection %d (%c) closed: got %v, want %v", i, tt.existing[i], got, want)
					}
				}
				if got := closed(client[len(tt.existing)]); got != tt.refused {
					t.Errorf("the new connection closed: got %v, want %v", got, tt.refused)
				}
				st := lim.Stats()
				wantOpen := len(tt.existing) + 1
				if tt.evicted >= 0 || tt.refused {
					wantOpen--
				}
				wantQueued := boolCount(tt.queued)
				if st.Open() != wantOpen || st.Evicted != boolCount(tt.evicted >= 0) || st.Refused != boolCount(tt.refused) || st.Queued != wantQueued {
					t.Errorf("stats: got %+v (open %d), want open %d, evicted %d, refused %d, queued %d",
						st, st.Open(), wantOpen, boolCount(tt.evicted >= 0), boolCount(tt.refused), wantQueued)
				}
			})
		})
	}
}

func boolCount(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func TestStatesAndClose(t *testing.T) {
	lim := connlimit.New(connlimit.Options{Max: 10})
	server, _ := pipes(t, 1)
	c, err := lim.Listener(&pipeListener{conns: server}).Accept()
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		do   func()
		want connlimit.Stats
	}{
		{func() {}, connlimit.Stats{Max: 10, New: 1}},
		{func() { lim.ConnState(c, http.StateNew) }, connlimit.Stats{Max: 10, New: 1}},
		{func() { lim.ConnState(c, http.StateActive) }, connlimit.Stats{Max: 10, Active: 1}},
		{func() { lim.ConnState(c, http.StateIdle) }, connlimit.Stats{Max: 10, Idle: 1}},
		{func() { lim.ConnState(c, http.StateActive) }, connlimit.Stats{Max: 10, Active: 1}},
		{func() { lim.ConnState(c, http.StateHijacked) }, connlimit.Stats{Max: 10, Hijacked: 1}},
		{func() { c.Close() }, connlimit.Stats{Max: 10}},
		{func() { c.Close() }, connlimit.Stats{Max: 10}},
		{func() { lim.ConnState(c, http.StateIdle) }, connlimit.Stats{Max: 10}},
		{func() { lim.ConnState(c, http.StateClosed) }, connlimit.Stats{Max: 10}},
		{func() { lim.ConnState(server[0], http.StateIdle) }, connlimit.Stats{Max: 10}},
	}
	for i, s := range steps {
		s.do()
		if got := lim.Stats(); got != s.want {
			t.Errorf("step %d: got %+v, want %+v", i, got, s.want)
		}
	}
}

func TestSetMax(t *testing.T) {
	lim := connlimit.New(connlimit.Options{Max: 5})
	server, client := pipes(t, 5)
	ln := lim.Listener(&pipeListener{conns: server})
	for _, s := range "iaiai" {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		lim.ConnState(c, http.StateActive)
		if s == 'i' {
			lim.ConnState(c, http.StateIdle)
		}
	}
	lim.SetMax(3) // closes the two oldest idle connections, 0 and 2
	for i, want := range []bool{true, false, true, false, false} {
		if got := closed(client[i]); got != want {
			t.Errorf("connection %d closed: got %v, want %v", i, got, want)
		}
	}
	if st := lim.Stats(); st.Open() != 3 || st.Max != 3 || st.Evicted != 2 {
		t.Errorf("got %+v, want 3 open, max 3, 2 evicted", st)
	}
	lim.SetMax(1) // only active ones and the newest idle: that one goes, 2 stay
	if st := lim.Stats(); st.Open() != 2 || st.Idle != 0 || st.Max != 1 {
		t.Errorf("got %+v, want 2 active open over max 1", st)
	}
	lim.SetMax(0)
	if st := lim.Stats(); st.Max != 0 {
		t.Errorf("got max %d, want 0 (no limit)", st.Max)
	}
}

// TestSoftIdle runs in a synctest bubble: the pipes and the Limiter's
// timer live on its fake clock.
func TestSoftIdle(t *testing.T) {
	const soft = 5 * time.Second
	tests := []struct {
		name    string
		max     int
		open    string // states oldest first, as in TestAdmit; all start waiting together
		after   time.Duration
		closedN int // how many of the oldest waiting ones are closed
	}{
		{"at the soft limit: none", 4, "iii", soft, 0},
		{"over it, before the timeout: none", 4, "iiii", soft - time.Nanosecond, 0},
		{"over it, at the timeout: back to the soft limit", 4, "iiii", soft, 1},
		{"at the limit with two to shed", 4, "aiii", soft, 1},
		{"only waiting ones are shed", 4, "aaaa", soft, 0},
		{"new ones too", 8, "nnnnnnnn", soft, 2},
		{"no limit: never", 0, "iiii", 10 * soft, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := connlimit.New(connlimit.Options{Max: tt.max, SoftIdleTimeout: soft})
				server, client := pipes(t, len(tt.open))
				ln := lim.Listener(&pipeListener{conns: server})
				for i := range tt.open {
					c, err := ln.Accept()
					if err != nil {
						t.Fatal(err)
					}
					if tt.open[i] != 'n' {
						lim.ConnState(c, http.StateActive)
						lim.ConnState(c, states[tt.open[i]])
					}
				}
				time.Sleep(tt.after) // fake time: the bubble's clock
				synctest.Wait()
				var closedN int
				for _, c := range client {
					if closed(c) {
						closedN++
					}
				}
				if closedN != tt.closedN || lim.Stats().SoftClosed != uint64(tt.closedN) {
					t.Errorf("closed: got %d (stats %+v), want %d", closedN, lim.Stats(), tt.closedN)
				}
			})
		})
	}
}

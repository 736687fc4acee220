package connlimit_test

import (
	"net"
	"net/http"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
)

// offerListener hands out the connections sent on it, and ErrClosed once
// closed.
type offerListener struct {
	conns chan net.Conn
	done  chan struct{}
}

func newOfferListener() *offerListener {
	return &offerListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *offerListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *offerListener) Close() error   { close(l.done); return nil }
func (l *offerListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// accepted is what one Accept returned.
type accepted struct {
	c   net.Conn
	err error
}

// acceptRig is a Limiter's listener over an offerListener, with a
// goroutine that accepts from it into got until Accept fails.
type acceptRig struct {
	lim *connlimit.Limiter
	cl  *offerListener
	ln  net.Listener
	got chan accepted
}

func newAcceptRig(o connlimit.Options) *acceptRig {
	r := &acceptRig{lim: connlimit.New(o), cl: newOfferListener(), got: make(chan accepted)}
	r.ln = r.lim.Listener(r.cl)
	go func() {
		for {
			c, err := r.ln.Accept()
			r.got <- accepted{c, err}
			if err != nil {
				return
			}
		}
	}()
	return r
}

// offer hands the listener a new connection and returns its client end.
func (r *acceptRig) offer(t *testing.T) net.Conn {
	s, c := net.Pipe()
	t.Cleanup(func() { s.Close(); c.Close() })
	r.cl.conns <- s
	return c
}

// close closes the listener and waits for the accepting goroutine to end.
func (r *acceptRig) close() {
	r.ln.Close()
	for a := range r.got {
		if a.err != nil {
			break
		}
	}
}

// refusedAfterWait offers connection n, which must wait wait (the
// AcceptWait) for a place and then be refused, not a nanosecond before.
func (r *acceptRig) refusedAfterWait(t *testing.T, n int, wait time.Duration) {
	t.Helper()
	c := r.offer(t)
	synctest.Wait()
	time.Sleep(wait - time.Nanosecond)
	synctest.Wait()
	if closed(c) {
		t.Fatalf("connection %d refused before AcceptWait", n)
	}
	time.Sleep(time.Nanosecond)
	synctest.Wait()
	if !closed(c) {
		t.Fatalf("connection %d is open after waiting AcceptWait for a place, want it refused", n)
	}
}

// TestAdmitWaitsForAPlace: at the limit with nothing to evict, a new
// connection waits for a place instead of being refused: a connection
// idle for IdleGrace (evicted for it) or one closing lets it in; one that
// waits AcceptWait in vain is refused, not a nanosecond before, and so is
// the next, each after its own wait.
func TestAdmitWaitsForAPlace(t *testing.T) {
	const wait, idleGrace = time.Second, time.Second / 4
	synctest.Test(t, func(t *testing.T) {
		r := newAcceptRig(connlimit.Options{Max: 2, AcceptWait: wait, IdleGrace: idleGrace, SoftIdleTimeout: time.Hour})
		lim, got := r.lim, r.got
		var busy []net.Conn
		for range 2 {
			r.offer(t)
			a := <-got
			lim.ConnState(a.c, http.StateActive)
			busy = append(busy, a.c)
		}

		// A third waits while both serve; the first, once idle for
		// IdleGrace, is closed to let it in.
		start := time.Now()
		r.offer(t) // a third
		synctest.Wait()
		select {
		case a := <-got:
			t.Fatalf("admitted at the limit with both active: %v", a)
		default:
		}
		time.Sleep(wait / 2)
		lim.ConnState(busy[0], http.StateIdle)
		a := <-got
		if a.err != nil {
			t.Fatalf("the waiting connection: %v, want it admitted", a.err)
		}
		if got, want := time.Since(start), wait/2+idleGrace; got < want {
			t.Errorf("admitted after %v, want after %v: the idle one goes once idle for IdleGrace", got, want)
		}
		if st := lim.Stats(); st.Queued != 1 || st.Evicted != 1 || st.Refused != 0 || st.Open() != 2 {
			t.Errorf("after the idle one made room: got %+v, want 1 queued, 1 evicted, 0 refused, 2 open", st)
		}
		lim.ConnState(a.c, http.StateActive)

		// A fourth waits the whole AcceptWait: refused; a fifth waits too,
		// and no connection behind them is taken off the kernel's queue
		// meanwhile.
		for n := range 2 {
			r.refusedAfterWait(t, 4+n, wait)
		}
		if st := lim.Stats(); st.Queued != 3 || st.Refused != 2 {
			t.Errorf("after two waits in vain: got %+v, want 3 queued, 2 refused", st)
		}

		// A connection closing is a place: the next is admitted at once.
		busy[1].Close()
		r.offer(t)
		if a := <-got; a.err != nil {
			t.Fatalf("after a close: %v, want admitted", a.err)
		}
		r.close()
	})
}

// TestAdmitSparesArrivedRequests, over real loopback sockets: at the
// limit, a waiting connection whose request has arrived but is still
// unread is not closed for a newcomer; the oldest one with nothing to
// read past its FirstRequestGrace is, even if younger, and one within it
// is not; and once UnreadGrace has passed, an unread one is evictable
// too.
func TestAdmitSparesArrivedRequests(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux looks at a socket for unread bytes")
	}
	for _, tc := range []struct {
		name          string
		grace, unread time.Duration
		sends         string // per connection, oldest first, and the newcomer last: s sends a request, - sends nothing
		evicted       int    // -1: none, the newcomer waits and is refused
	}{
		{"the silent one goes, not the older one whose request waits", time.Nanosecond, time.Hour, "s-ss", 1},
		{"the oldest silent one", time.Nanosecond, time.Hour, "s--s", 1},
		{"every request waiting: the oldest past its unread grace", time.Nanosecond, time.Nanosecond, "ssss", 0},
		{"silent ones within their grace stay, even for a request in hand", time.Hour, time.Hour, "s--s", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			open := len(tc.sends) - 1
			lim := connlimit.New(connlimit.Options{Max: open, FirstRequestGrace: tc.grace, UnreadGrace: tc.unread, AcceptWait: time.Nanosecond})
			ln := lim.Listener(raw)
			var clients []net.Conn
			for i, s := range tc.sends {
				c, err := net.Dial("tcp", raw.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				clients = append(clients, c)
				if s == 's' {
					if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
						t.Fatal(err)
					}
				}
				if i == open && tc.evicted < 0 {
					// Nothing to evict: the newcomer waits AcceptWait (1ns)
					// and is refused; the listener then waits for the next.
					go ln.Accept()
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					if _, err := c.Read(make([]byte, 1)); err == nil {
						t.Fatal("the newcomer was answered, want it refused")
					}
					if st := lim.Stats(); st.Evicted != 0 || st.Refused != 1 {
						t.Fatalf("got %+v, want none evicted, 1 refused", st)
					}
					return
				}
				// On loopback a write is in the peer's socket when it
				// returns: the server's end now has the request unread.
				sc, err := ln.Accept()
				if err != nil {
					t.Fatalf("connection %d: %v, want it admitted", i, err)
				}
				defer sc.Close()
			}
			// One was evicted (the counts); the one whose client reads the
			// server's close is the expected one.
			if st := lim.Stats(); st.Evicted != 1 || st.Open() != open {
				t.Fatalf("got %+v, want 1 evicted, %d open", st, open)
			}
			c := clients[tc.evicted]
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Errorf("connection %d (%c) is open, want it evicted", tc.evicted, tc.sends[tc.evicted])
			}
		})
	}
}

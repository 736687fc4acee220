package connlimit_test

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
)

// chanListener hands out the connections sent on its channel.
type chanListener chan net.Conn

func (l chanListener) Accept() (net.Conn, error) { return <-l, nil }
func (l chanListener) Close() error              { return nil }
func (l chanListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// BenchmarkConnState is what net/http adds per request: an Active and an
// Idle transition, from every core at once on one Limiter.
func BenchmarkConnState(b *testing.B) {
	lim := connlimit.New(connlimit.Options{Max: 1 << 20})
	conns := make(chanListener, 1)
	ln := lim.Listener(conns)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s, c := net.Pipe()
		defer c.Close()
		conns <- s
		lc, err := ln.Accept()
		if err != nil {
			b.Error(err)
			return
		}
		defer lc.Close()
		for pb.Next() {
			lim.ConnState(lc, http.StateActive)
			lim.ConnState(lc, http.StateIdle)
		}
	})
}

// nopConn is a connection that does nothing, to time Accept alone.
type nopConn struct{}

func (nopConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (nopConn) Write(b []byte) (int, error)      { return len(b), nil }
func (nopConn) Close() error                     { return nil }
func (nopConn) LocalAddr() net.Addr              { return nil }
func (nopConn) RemoteAddr() net.Addr             { return nil }
func (nopConn) SetDeadline(time.Time) error      { return nil }
func (nopConn) SetReadDeadline(time.Time) error  { return nil }
func (nopConn) SetWriteDeadline(time.Time) error { return nil }

// nopListener accepts nopConns without end.
type nopListener struct{}

func (nopListener) Accept() (net.Conn, error) { return nopConn{}, nil }
func (nopListener) Close() error              { return nil }
func (nopListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// BenchmarkAcceptAtLimit admits connections at the limit, each by closing
// the oldest idle one: the path of a flood of new connections.
func BenchmarkAcceptAtLimit(b *testing.B) {
	const max = 1024
	lim := connlimit.New(connlimit.Options{Max: max})
	ln := lim.Listener(nopListener{})
	accept := func() {
		c, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		lim.ConnState(c, http.StateActive)
		lim.ConnState(c, http.StateIdle)
	}
	for range max {
		accept()
	}
	b.ReportAllocs()
	for b.Loop() {
		accept()
	}
	if st := lim.Stats(); st.Open() != max {
		b.Fatalf("got %d open, want %d", st.Open(), max)
	}
}

// Package clustertest runs real redis-server processes for tests (Debian's
// redis-server package), each on a free port of 127.0.0.1, with nothing
// saved to disk; they stop when the test ends.
package clustertest

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/internal/tooltest"
)

// Server is one redis-server process (or sentinel) started by a test.
type Server struct {
	t    testing.TB
	args []string
	dir  string
	// password is the --requirepass given, for the start-up PING.
	password string
	// tls, when not nil, is how a client reaches a TLS-only server.
	tls *tls.Config
	// portFlag is the flag the port is given with: --port, or --tls-port.
	portFlag string
	// Addr is its 127.0.0.1:port.
	Addr string
	Port int
	cmd  *exec.Cmd
}

// Available reports whether redis-server is installed; tests skip
// without it (.ci/run installs it).
func Available() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// skip skips t for the missing redis-server, in the module's one line.
func skip(t testing.TB) {
	t.Helper()
	tooltest.Skip(t, "redis-server", "not on PATH", "apt-get install redis-server (.ci/run does)")
}

// Start starts a redis-server on a free port with extra arguments (such
// as "--requirepass", "secret"); it fails the test if the server does not
// answer within 10 seconds.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	if !Available() {
		skip(t)
	}
	s := &Server{t: t, dir: t.TempDir(), portFlag: "--port"}
	s.args = append([]string{"--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--dir", s.dir}, extra...)
	for i := 0; i+1 < len(extra); i++ {
		if extra[i] == "--requirepass" {
			s.password = extra[i+1]
		}
	}
	s.start(0)
	t.Cleanup(s.Kill)
	return s
}

// StartSentinel starts a sentinel watching the master at masterAddr under
// name, which declares the master down after downAfter without answers.
func StartSentinel(t testing.TB, name, masterAddr string, downAfter time.Duration) *Server {
	t.Helper()
	if !Available() {
		skip(t)
	}
	host, port, _ := net.SplitHostPort(masterAddr)
	s := &Server{t: t, dir: t.TempDir(), portFlag: "--port"}
	conf := filepath.Join(s.dir, "sentinel.conf")
	body := fmt.Sprintf("bind 127.0.0.1\nsentinel resolve-hostnames no\nsentinel monitor %s %s %s 1\n"+
		"sentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
		name, host, port, name, downAfter.Milliseconds(), name, name)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s.args = []string{conf, "--sentinel", "--dir", s.dir}
	s.start(0)
	t.Cleanup(s.Kill)
	return s
}

// StartCluster starts a Redis Cluster of masters masters with replicas
// replicas each (a node timeout of 2 s, so a master that dies is failed
// over a few seconds later), each node a Server with the extra arguments,
// with redis-cli --cluster create, and waits until every node says
// cluster_state:ok. The masters come first. A node restarted (Restart)
// rejoins as itself: its nodes.conf is kept in its directory.
func StartCluster(t testing.TB, masters, replicas int, extra ...string) []*Server {
	t.Helper()
	var nodes []*Server
	var addrs []string
	// A replica syncs at once (not after the default 5 s), so that it
	// holds its master's data before a test kills the master.
	args := append([]string{"--cluster-enabled", "yes", "--cluster-node-timeout", "2000", "--repl-diskless-sync-delay", "0"}, extra...)
	for range masters * (1 + replicas) {
		s := Start(t, args...)
		nodes, addrs = append(nodes, s), append(addrs, s.Addr)
	}
	create := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", create...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", create, err, out)
	}
	for _, s := range nodes {
		if !Eventually(20*time.Second, func() bool { return clusterOK(s.Addr) }) {
			t.Fatalf("redis cluster node %s not ok within 20s", s.Addr)
		}
	}
	// A replica that never synced cannot be failed over to.
	synced := func() bool {
		n := 0
		for _, s := range nodes {
			if info, err := Info(s.Addr, "replication"); err == nil && strings.Contains(info, "master_link_status:up") {
				n++
			}
		}
		return n == masters*replicas
	}
	if !Eventually(20*time.Second, synced) {
		t.Fatalf("the cluster's %d replicas did not sync within 20s", masters*replicas)
	}
	return nodes
}

// Owner returns the node of nodes that serves key now (a master that
// answers for its slot rather than with MOVED), or nil when none does:
// its master is down and not yet replaced.
func Owner(nodes []*Server, key string) *Server {
	for _, s := range nodes {
		if s.cmd == nil {
			continue
		}
		if line, err := Do(s.Addr, "", "EXISTS", key); err == nil && strings.HasPrefix(line, ":") {
			return s
		}
	}
	return nil
}

// ClusterOK reports whether the node says cluster_state:ok.
func (s *Server) ClusterOK() bool { return clusterOK(s.Addr) }

// Eventually polls cond every 10ms until it holds or timeout passes, and
// reports whether it held. It is the one poll of the cluster tests: a
// server's start, a cluster's state, a client's.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// clusterOK reports whether the node at addr says cluster_state:ok.
func clusterOK(addr string) bool {
	out, err := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", addr[strings.LastIndex(addr, ":")+1:], "CLUSTER", "INFO").Output()
	return err == nil && strings.Contains(string(out), "cluster_state:ok")
}

// start runs the server on port (0: a free one) and waits for its PING.
func (s *Server) start(port int) {
	s.t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		p := port
		if p == 0 {
			p = freePort(s.t)
		}
		cmd := exec.Command("redis-server", append(append([]string(nil), s.args...), s.portFlag, strconv.Itoa(p))...)
		cmd.Stdout, cmd.Stderr = nil, nil
		if err := cmd.Start(); err != nil {
			s.t.Fatalf("redis-server: %v", err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		exited := false // most likely the port was taken: try another
		answers := Eventually(10*time.Second, func() bool {
			select {
			case <-done:
				exited = true
			default:
			}
			return exited || s.ping(addr) == nil
		})
		if answers && !exited {
			s.cmd, s.Addr, s.Port = cmd, addr, p
			return
		}
		cmd.Process.Kill()
		<-done
		if port != 0 {
			break
		}
	}
	s.t.Fatalf("redis-server %v did not start", s.args)
}

// StartTLS starts a redis-server that speaks TLS only, with the PEM
// certificate and key files given, and no client certificates asked for;
// client is how a client trusts it (its start-up PING uses it).
func StartTLS(t testing.TB, certFile, keyFile, caFile string, client *tls.Config) *Server {
	t.Helper()
	if !Available() {
		skip(t)
	}
	s := &Server{t: t, dir: t.TempDir(), portFlag: "--tls-port", tls: client}
	s.args = []string{"--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--dir", s.dir, "--port", "0",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no"}
	s.start(0)
	t.Cleanup(s.Kill)
	return s
}

// ping sends PING to the server at addr, over TLS for a TLS server.
func (s *Server) ping(addr string) error {
	if s.tls == nil {
		return Ping(addr, s.password)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, s.tls)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Kill stops the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Process.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start(s.Port)
}

// Role returns the role of the server at addr: master, slave or
// sentinel (ROLE's first element).
func Role(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nROLE\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	var lines [3]string // *N, $len, the role
	for i := range lines {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		lines[i] = strings.TrimRight(line, "\r\n")
	}
	if !strings.HasPrefix(lines[0], "*") || !strings.HasPrefix(lines[1], "$") {
		return "", fmt.Errorf("ROLE answered %q", lines)
	}
	return lines[2], nil
}

// Info returns the server's INFO section (such as "commandstats") as
// Redis writes it: lines of "key:value".
func Info(addr, section string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(conn, "*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n", len(section), section)
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if err != nil || !strings.HasPrefix(head, "$") {
		return "", fmt.Errorf("INFO answered %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	return string(body), nil
}

// Do sends one command and returns its reply's first line (such as
// "+PONG", ":1", "$5"); password, when not "", is sent first with AUTH.
func Do(addr, password string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	r := bufio.NewReader(conn)
	send := func(args []string) (string, error) {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := conn.Write([]byte(b.String())); err != nil {
			return "", err
		}
		line, err := r.ReadString('\n')
		return strings.TrimRight(line, "\r\n"), err
	}
	if password != "" {
		if line, err := send([]string{"AUTH", password}); err != nil || line != "+OK" {
			return line, fmt.Errorf("AUTH: %q %v", line, err)
		}
	}
	return send(args)
}

// Ping reports whether addr answers PING with PONG.
func Ping(addr, password string) error {
	line, err := Do(addr, password, "PING")
	if err != nil {
		return err
	}
	if line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Silent is a TCP listener on 127.0.0.1 that accepts connections and never
// answers: a Redis that hangs. It closes when the test ends.
func Silent(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

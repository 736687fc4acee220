package main_test

// End-to-end tests of hot reload: edits, SIGHUP and the ways a file
// changes (deleted and back, a ConfigMap's symlink swap), and the config
// watch on a bad day: no inotify instance left for the proxy's UID, the
// config directory deleted and created again, a writer that leaves the
// file empty for a moment, a file the running process refuses.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nonroot is the UID and GID of distroless's nonroot user, which every
// such container on a node shares, and so shares its inotify instances.
const nonroot = 65532

// holderEnv, set in the environment of the test binary, makes
// TestInotifyHolder hold every inotify instance of the UID it names.
const holderEnv = "SDS_E2E_HOLD_INOTIFY_UID"

// watchBody is a config body with one catch-all point r whose
// visitThreshold is v: "0" degrades every request, "1000" none.
func watchBody(v string) string {
	return "routes:\n  - point: r\n    match: {}\npoints:\n  r:\n    visitThreshold: " + v + "\n"
}

// TestInotifyHolder is the child process of TestWatchInotifyExhausted, not
// a test of its own: run with holderEnv set, it becomes that UID, opens
// inotify instances until the kernel refuses one, prints "holding N: ERR"
// and holds them until its standard input closes.
func TestInotifyHolder(t *testing.T) {
	uid, err := strconv.Atoi(os.Getenv(holderEnv))
	if err != nil {
		t.Skip("the child process of TestWatchInotifyExhausted; runs only with " + holderEnv + " set")
	}
	if err := syscall.Setgroups(nil); err != nil {
		fmt.Printf("setuid failed: setgroups: %v\n", err)
		return
	}
	if err := syscall.Setgid(uid); err != nil {
		fmt.Printf("setuid failed: setgid: %v\n", err)
		return
	}
	if err := syscall.Setuid(uid); err != nil {
		fmt.Printf("setuid failed: %v\n", err)
		return
	}
	limit, err := maxUserInstances()
	if err != nil {
		fmt.Printf("setuid failed: %v\n", err)
		return
	}
	var fds []int
	var last error
	for range limit + 1 { // one more than the limit: the last must fail
		fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
		if err != nil {
			last = err
			break
		}
		fds = append(fds, fd)
	}
	fmt.Printf("holding %d: %v\n", len(fds), last)
	io.Copy(io.Discard, os.Stdin) // until the parent closes it
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// maxUserInstances reads fs.inotify.max_user_instances.
func maxUserInstances() (int, error) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// holdInotify starts the test binary as TestInotifyHolder for uid, and
// waits until it holds every inotify instance uid may have. It skips the
// test when the child cannot become uid. The child is stopped (standard
// input closed, killed after 5s) and waited for at the test's end.
func holdInotify(t *testing.T, uid int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestInotifyHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), holderEnv+"="+strconv.Itoa(uid))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the inotify holder: %v", err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		first := ""
		for sc.Scan() {
			if first == "" {
				first = sc.Text()
				lines <- first
			}
		}
		close(lines)
		exited <- cmd.Wait() // after its output is read, as Wait closes the pipe
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(wait):
		t.Fatalf("the inotify holder said nothing within %v", wait)
	}
	switch {
	case strings.HasPrefix(line, "setuid failed"):
		t.Skipf("the inotify holder cannot become UID %d: %s", uid, line)
	case !strings.HasPrefix(line, "holding ") || !strings.HasSuffix(line, syscall.EMFILE.Error()):
		t.Fatalf("inotify holder: got %q, want \"holding N: %v\"", line, syscall.EMFILE)
	}
	t.Logf("inotify holder, UID %d: %s", uid, line)
}

// readableDir returns a new directory that UID nonroot can read, removed
// at the test's end. t.TempDir's directories are the test's user's only.
func readableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sds-watch-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startProxyAs is startProxy with the proxy running as uid and gid. It
// skips the test when the process cannot be started with them.
func startProxyAs(t *testing.T, uid, gid uint32, path string) *proxyProcess {
	t.Helper()
	cmd := command("sds-proxy", proxyArgs(path)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	p, err := start(t, cmd)
	if err != nil {
		t.Skipf("cannot start sds-proxy as UID %d: %v", uid, err)
	}
	return serving(t, p)
}

// applied writes the config with visitThreshold v (an editor's rename) and
// returns how long it took until the proxy answers by it, or fails after
// timeout.
func (e *env) applied(v string, timeout time.Duration) time.Duration {
	e.t.Helper()
	wantDegraded := v == "0"
	start := time.Now()
	e.write(e.config, configHeader(e.upstream, "10s", 10)+watchBody(v))
	if !eventually(timeout, func() bool { return (e.get("/r").degraded() != "") == wantDegraded }) {
		e.t.Fatalf("visitThreshold %s not applied within %v", v, timeout)
	}
	return time.Since(start)
}

// opened waits up to timeout for the file at path to be opened, by anyone,
// from the call on, and reports whether it was. It watches with inotify's
// IN_OPEN, which fsnotify does not offer.
func opened(t *testing.T, path string, timeout time.Duration) bool {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: read deadlines work
	defer f.Close()
	if _, err := syscall.InotifyAddWatch(fd, path, syscall.IN_OPEN); err != nil {
		t.Fatalf("inotify watch of %s: %v", path, err)
	}
	f.SetReadDeadline(time.Now().Add(timeout))
	var buf [4096]byte
	n, err := f.Read(buf[:])
	return err == nil && n > 0
}

// TestWatchInotifyExhausted runs the proxy as UID 65532 while another
// process of that UID holds every inotify instance the kernel allows it,
// as on a busy node of distroless containers. The proxy says once that it
// polls, in its log and in sds_config_watch_mode, stays ready, and still
// applies edits (by polling) and SIGHUP.
func TestWatchInotifyExhausted(t *testing.T) {
	// Not parallel: it holds every inotify instance of UID 65532 and makes
	// the shared binary directory readable to it, and it times polls
	// against watch.PollInterval.
	if os.Geteuid() != 0 {
		t.Skip("needs root: to run the proxy and the inotify holder as UID 65532")
	}
	e := newEnv(t)
	if err := os.Chmod(binDir, 0o755); err != nil { // MkdirTemp made it root's only
		t.Fatal(err)
	}
	e.dir = readableDir(t)
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, configHeader(e.upstream, "10s", 10)+watchBody("0"))
	holdInotify(t, nonroot)
	e.proxy = startProxyAs(t, nonroot, nonroot, e.config)

	fallback := e.proxy.waitLog(t, 0, wait, msgStarts("config watch falls back to polling"))
	if reason := fmt.Sprint(fallback["error"]); !strings.Contains(reason, syscall.EMFILE.Error()) {
		t.Errorf("fallback log: got error %q, want %q", reason, syscall.EMFILE.Error())
	}
	e.metricIs(1, "sds_config_watch_mode", "mode", "polling")
	e.metricIs(0, "sds_config_watch_mode", "mode", "inotify")
	if r := e.getURL(e.proxy.admin + "/readyz"); r.status != 200 {
		t.Errorf("/readyz while polling: got %v, want 200", r)
	}
	if r := e.get("/r"); r.degraded() == "" {
		t.Fatalf("visitThreshold 0: got %v, want degraded", r)
	}

	// Edits apply by polling, within about watch.PollInterval (2s).
	var took []time.Duration
	for i := range 3 {
		took = append(took, e.applied([]string{"1000", "0"}[i%2], wait))
	}
	t.Logf("edit applied by polling after %v (median %v)", took, median(took))
	if m := median(took); m > 3*time.Second {
		t.Errorf("median time to apply by polling: got %v, want within about 2s", m)
	}

	// SIGHUP reloads at once; the reload it forces is answered whether or
	// not a poll saw the edit first.
	mark := e.proxy.stderr.mark()
	e.write(e.config, configHeader(e.upstream, "10s", 10)+watchBody("1000"))
	e.proxy.signal(syscall.SIGHUP)
	e.proxy.waitLog(t, mark, wait, func(l logEntry) bool {
		return (l["msg"] == "config reloaded" || l["msg"] == "config unchanged") && l["forced"] == true
	})
	if r := e.get("/r"); r.degraded() != "" {
		t.Errorf("after SIGHUP: got %v, want visitThreshold 1000 in force", r)
	}

	e.metricIs(1, "sds_config_last_reload_successful")
	e.metricIs(1, "sds_config_watch_mode", "mode", "polling")
	if r := e.getURL(e.proxy.admin + "/readyz"); r.status != 200 {
		t.Errorf("/readyz while polling: got %v, want 200", r)
	}
	if n := e.proxy.countLog(0, msgStarts("config watch falls back to polling")); n != 1 {
		t.Errorf("fallback logged %d times, want once", n)
	}
}

// TestWatchDirectoryRecreated deletes the config file's directory and
// creates it again with a new valid file, twice: each new file applies by
// the watch, which stays on inotify.
func TestWatchDirectoryRecreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.config = filepath.Join(e.dir, "conf", "sds.yaml")
	if err := os.Mkdir(filepath.Dir(e.config), 0o755); err != nil {
		t.Fatal(err)
	}
	e.write(e.config, configHeader(e.upstream, "10s", 10)+watchBody("0"))
	e.proxy = startProxy(t, e.config)
	if r := e.get("/r"); r.degraded() == "" {
		t.Fatalf("visitThreshold 0: got %v, want degraded", r)
	}
	for i, v := range []string{"1000", "0"} {
		mark := e.proxy.stderr.mark()
		if err := os.RemoveAll(filepath.Dir(e.config)); err != nil {
			t.Fatal(err)
		}
		e.proxy.waitLog(t, mark, wait, msgStarts("config rejected"))
		if err := os.Mkdir(filepath.Dir(e.config), 0o755); err != nil {
			t.Fatal(err)
		}
		if took := e.applied(v, wait); took > 1500*time.Millisecond {
			t.Errorf("round %d: the new file applied after %v, want within 1s", i+1, took)
		}
	}
	e.metricIs(1, "sds_config_watch_mode", "mode", "inotify")
	if n := e.proxy.countLog(0, msgStarts("config watch falls back to polling")); n != 0 {
		t.Errorf("fallback logged %d times, want never", n)
	}
}

// settleTime is how long the watcher waits for an empty or invalid file to
// be written (config/watch.go).
const settleTime = 250 * time.Millisecond

// TestWatchTruncatingWriter writes the file the way `>` in a shell does:
// truncated, and the new content later: once the proxy has opened the
// empty file (seen by inotify), so that every round goes through the
// watcher's settle time (250ms), and a loaded machine can neither skip it
// (a write before the read) nor outlast it by much (the write follows the
// read at once). The empty file is not rejected when its content comes
// within the settle time, and the new content applies. Rounds of an
// editor's rename first measure the time for an edit to apply by the
// watch.
func TestWatchTruncatingWriter(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, watchBody("0"))
	header := configHeader(e.upstream, "10s", 10)

	// An editor's rename, for the time an edit takes to apply by the watch.
	// Once one applied, the watcher's first read, at its start, is over:
	// the proxy's next read of the file follows the next change.
	var took []time.Duration
	for i := range 5 {
		took = append(took, e.applied([]string{"1000", "0"}[i%2], wait))
	}
	t.Logf("edit applied by inotify after %v (median %v)", took, median(took))

	took = took[:0]
	var empty []time.Duration
	late := 0 // rounds whose content came after the settle time
	for i := range 5 {
		v := []string{"0", "1000"}[i%2] // the renames left 1000
		round := e.proxy.stderr.mark()
		start := time.Now()
		f, err := os.OpenFile(e.config, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Our own open is done: the next one is the proxy's read.
		if !opened(t, e.config, wait) {
			t.Fatalf("round %d: the proxy did not read the truncated file within %v", i+1, wait)
		}
		empty = append(empty, time.Since(start))
		writtenAfter := time.Since(start)
		_, err = f.WriteString(header + watchBody(v))
		if err := errors.Join(err, f.Close()); err != nil {
			t.Fatal(err)
		}
		if !eventually(wait, func() bool { return (e.get("/r").degraded() != "") == (v == "0") }) {
			t.Fatalf("round %d: visitThreshold %s not applied within %v", i+1, v, wait)
		}
		took = append(took, time.Since(start))
		// A writer slower than the settle time is rejected, rightly: the
		// file stayed empty that long. Only this test's own stalls on a
		// loaded machine make it so (seeing the proxy's open took 779ms
		// once); such a round is counted, not failed.
		if n := e.proxy.countLog(round, msgStarts("config rejected")); n != 0 {
			if writtenAfter < settleTime {
				t.Errorf("round %d: %d \"config rejected\" lines for a file written %v after its truncation, want none", i+1, n, writtenAfter)
			}
			late += n
			t.Logf("round %d: written %v after the truncation, past the settle time: rejected, and the content applied after", i+1, writtenAfter)
		}
	}
	t.Logf("truncated, read empty by the proxy after %v, applied after %v (median %v)", empty, took, median(took))
	if late == 5 {
		t.Errorf("every round was late: the settle time was never tested")
	}
	e.metricIs(float64(late), "sds_config_reloads_total", "result", "failure")
}

// TestReloadRefusedByTheProcess: a file that validates but that the
// request path refuses (a token rate the limiter cannot represent) is
// rejected, and stays rejected on every SIGHUP while the old config
// serves: the watcher records a file as in force only once the running
// process has accepted it.
func TestReloadRefusedByTheProcess(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, watchBody("0"))
	refused := configHeader(e.upstream, "10s", 10) + watchBody("1000") + "    tokenBucketGeneratedTokensInSecond: 2000000000\n"
	mark := e.proxy.stderr.mark()
	e.write(e.config, refused)
	e.proxy.waitLog(t, mark, wait, msgStarts("config rejected"))
	for i := range 3 {
		mark = e.proxy.stderr.mark()
		e.proxy.cmd.Process.Signal(syscall.SIGHUP)
		entry := e.proxy.waitLog(t, mark, wait, func(l logEntry) bool {
			msg, _ := l["msg"].(string)
			return l["forced"] == true && (strings.HasPrefix(msg, "config rejected") || msg == "config unchanged" || msg == "config reloaded")
		})
		if msg := entry["msg"].(string); !strings.HasPrefix(msg, "config rejected") {
			t.Errorf("SIGHUP %d with the refused file: got %q, want config rejected", i+1, msg)
		}
	}
	e.metricIs(0, "sds_config_last_reload_successful")
	if r := e.get("/r"); r.degraded() != "visit; point=r" {
		t.Errorf("the old config (visitThreshold 0) should still serve: got %v", r)
	}
	e.applied("1000", wait)
	e.metricIs(1, "sds_config_last_reload_successful")
}

// TestReloadRejectedShowsNoChange: /status's lastReload describes the last
// attempt only. After a reload that changed visitThreshold, a rejected
// file shows the failure and no change (it changed nothing), and so does
// the attempt that finds the config in force again.
func TestReloadRejectedShowsNoChange(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, watchBody("0"))
	type lastReload struct {
		OK            bool
		Error, Change string
	}
	last := func() lastReload {
		var doc struct {
			Config struct{ LastReload *lastReload }
		}
		if r := e.getURL(e.proxy.admin + "/status"); json.Unmarshal([]byte(r.body), &doc) != nil || doc.Config.LastReload == nil {
			t.Fatalf("/status config.lastReload: got %v, want one", r)
		}
		return *doc.Config.LastReload
	}
	e.applied("1000", wait)
	if got := last(); !got.OK || !strings.Contains(got.Change, "points changed [r]") {
		t.Errorf("after a valid edit: lastReload %+v, want ok with its change (points changed [r])", got)
	}

	mark := e.proxy.stderr.mark()
	e.write(e.config, configHeader(e.upstream, "10s", 10)+watchBody("0")+"    bogusKey: 1\n")
	e.proxy.waitLog(t, mark, wait, msgStarts("config rejected"))
	if got := last(); got.OK || !strings.Contains(got.Error, "bogusKey") || got.Change != "" {
		t.Errorf("after a rejected edit: lastReload %+v, want not ok, the error naming bogusKey and no change", got)
	}

	mark = e.proxy.stderr.mark()
	e.write(e.config, configHeader(e.upstream, "10s", 10)+watchBody("1000"))
	e.proxy.waitLog(t, mark, wait, msgIs("config unchanged"))
	if got := last(); !got.OK || got.Error != "" || got.Change != "" {
		t.Errorf("after the config in force came back: lastReload %+v, want ok with no error and no change", got)
	}
}

// TestHotReload edits the config of a running proxy.
func TestHotReload(t *testing.T) {
	t.Parallel()
	t.Run("file edits", reloadFileEdits)

	t.Run("SIGHUP", func(t *testing.T) {
		t.Parallel()
		// The config path is a symlink into a directory the proxy does not
		// watch, so an edit there is seen only when SIGHUP forces a reload.
		e := newEnv(t)
		real := filepath.Join(e.dir, "data", "sds.yaml")
		os.Mkdir(filepath.Dir(real), 0o755)
		os.Mkdir(filepath.Join(e.dir, "conf"), 0o755)
		e.write(real, configHeader(e.upstream, "10s", 10)+reloadRoutes("0"))
		e.config = filepath.Join(e.dir, "conf", "sds.yaml")
		if err := os.Symlink(real, e.config); err != nil {
			t.Fatal(err)
		}
		e.proxy = startProxy(t, e.config)
		if r := e.get("/r"); r.degraded() == "" {
			t.Fatalf("visitThreshold 0: got %v, want degraded", r)
		}
		e.write(real, configHeader(e.upstream, "10s", 10)+reloadRoutes("1000"))
		mark := e.proxy.stderr.mark()
		e.proxy.signal(syscall.SIGHUP)
		if !eventually(wait, func() bool { return e.get("/r").degraded() == "" }) {
			t.Fatalf("SIGHUP did not apply the edit within %v", wait)
		}
		e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	})
}

// reloadFileEdits: a valid edit of the file applies within a second; an
// invalid one changes nothing and is reported; a later valid one applies.
func reloadFileEdits(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, reloadRoutes("0"))
	header := configHeader(e.upstream, "10s", 10)
	if r := e.get("/r"); r.degraded() != "visit; point=r" {
		t.Fatalf("visitThreshold 0: got %v, want degraded", r)
	}

	// A valid edit applies within a second.
	mark := e.proxy.stderr.mark()
	edited := time.Now()
	e.write(e.config, header+reloadRoutes("1000"))
	if !eventually(wait, func() bool { return e.get("/r").degraded() == "" }) {
		t.Fatalf("visitThreshold 1000 not applied within %v", wait)
	}
	if d := time.Since(edited); d > 1500*time.Millisecond {
		t.Errorf("edit applied after %v, want within 1s", d)
	}
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	e.metricIs(1, "sds_config_last_reload_successful")

	// An invalid edit, which would degrade everything if any of it
	// applied, changes nothing.
	mark = e.proxy.stderr.mark()
	e.write(e.config, header+reloadRoutes("0")+"    bogusKey: 1\n")
	rejected := e.proxy.waitLog(t, mark, wait, msgStarts("config rejected"))
	if !strings.Contains(fmt.Sprint(rejected["error"]), "bogusKey") {
		t.Errorf("rejection log: got %v, want the error naming bogusKey", rejected)
	}
	for range 5 {
		if r := e.get("/r"); r.status != 200 || r.degraded() != "" {
			t.Errorf("after an invalid edit: got %v, want 200 (visitThreshold 1000 kept)", r)
		}
	}
	e.metricIs(0, "sds_config_last_reload_successful")
	e.metricIs(1, "sds_config_reloads_total", "result", "failure")
	if st := e.status(); st.Config.LastReload == nil || st.Config.LastReload.OK || st.Config.LastReload.Error == "" {
		t.Errorf("/status config.lastReload: got %+v, want ok false with the error", st.Config.LastReload)
	}

	// A later valid edit still applies.
	mark = e.proxy.stderr.mark()
	e.write(e.config, header+reloadRoutes("0"))
	if !eventually(wait, func() bool { return e.get("/r").degraded() == "visit; point=r" }) {
		t.Fatalf("a valid edit after an invalid one was not applied within %v", wait)
	}
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	e.metricIs(1, "sds_config_last_reload_successful")
	e.metricIs(2, "sds_config_reloads_total", "result", "success")
}

// reloadRoutes routes /r to point r of the given visitThreshold.
func reloadRoutes(visitThreshold string) string {
	return "routes:\n  - point: r\n    match: {pathPrefix: /r}\npoints:\n  r:\n    visitThreshold: " + visitThreshold + "\n"
}

// TestHotReloadFileEvents checks the ways a config file changes besides an
// edit: it is deleted and comes back, and a Kubernetes ConfigMap swaps the
// ..data symlink of its folder.
func TestHotReloadFileEvents(t *testing.T) {
	t.Parallel()
	body := func(visitThreshold string) string {
		return "routes:\n  - point: r\n    match: {}\npoints:\n  r:\n    visitThreshold: " + visitThreshold + "\n"
	}
	t.Run("deleted and back", func(t *testing.T) {
		t.Parallel()
		e := setup(t, "10s", 10, body("0"))
		mark := e.proxy.stderr.mark()
		if err := os.Remove(e.config); err != nil {
			t.Fatal(err)
		}
		rejected := e.proxy.waitLog(t, mark, wait, msgStarts("config rejected"))
		t.Logf("deleted: %v", rejected["error"])
		if r := e.get("/r"); r.degraded() != "visit; point=r" {
			t.Errorf("with the file deleted: got %v, want the last good config (degraded)", r)
		}
		back := time.Now()
		e.write(e.config, configHeader(e.upstream, "10s", 10)+body("1000"))
		if !eventually(wait, func() bool { return e.get("/r").degraded() == "" }) {
			t.Fatalf("the file came back with visitThreshold 1000, not applied within %v", wait)
		}
		if d := time.Since(back); d > 1500*time.Millisecond {
			t.Errorf("the file came back: applied after %v, want within 1s", d)
		}
	})

	t.Run("ConfigMap symlink swap", func(t *testing.T) {
		t.Parallel()
		// The kubelet's layout: sds.yaml -> ..data/sds.yaml, ..data ->
		// a timestamped directory; an update writes a new timestamped
		// directory, renames a new ..data symlink over the old one, and
		// removes the old directory.
		e := newEnv(t)
		previous := ""
		n := 0
		version := func(content string) {
			n++
			name := fmt.Sprintf("..2026_12_01_04_0%d_00.00000000%d", n, n)
			if err := os.Mkdir(filepath.Join(e.dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(e.dir, name, "sds.yaml"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(e.dir, "..data_tmp")
			if err := os.Symlink(name, tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(e.dir, "..data")); err != nil {
				t.Fatal(err)
			}
			if previous != "" {
				if err := os.RemoveAll(filepath.Join(e.dir, previous)); err != nil {
					t.Fatal(err)
				}
			}
			previous = name
		}
		version(configHeader(e.upstream, "10s", 10) + body("0"))
		e.config = filepath.Join(e.dir, "sds.yaml")
		if err := os.Symlink(filepath.Join("..data", "sds.yaml"), e.config); err != nil {
			t.Fatal(err)
		}
		e.proxy = startProxy(t, e.config)
		if r := e.get("/r"); r.degraded() == "" {
			t.Fatalf("visitThreshold 0: got %v, want degraded", r)
		}
		version(configHeader(e.upstream, "10s", 10) + body("1000"))
		if !eventually(wait, func() bool { return e.get("/r").degraded() == "" }) {
			t.Fatalf("first swap not applied within %v", wait)
		}
		version(configHeader(e.upstream, "10s", 10) + body("0"))
		if !eventually(wait, func() bool { return e.get("/r").degraded() != "" }) {
			t.Fatalf("second swap not applied within %v (the watch was lost after the first)", wait)
		}
	})
}

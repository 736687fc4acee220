package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sds-proxy/sds-proxy/config"
)

// fakeNotifier stands in for fsnotify: a test sends its events and errors,
// and chooses what Add returns.
type fakeNotifier struct {
	events chan fsnotify.Event
	errs   chan error
	addErr error // returned by every Add; nil: Add succeeds

	mu       sync.Mutex
	added    []string // every Add, in order
	watching map[string]bool
	closed   bool
}

func newFakeNotifier() *fakeNotifier {
	return &fakeNotifier{events: make(chan fsnotify.Event), errs: make(chan error), watching: make(map[string]bool)}
}

func (n *fakeNotifier) Add(dir string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.addErr != nil {
		return n.addErr
	}
	n.added = append(n.added, dir)
	n.watching[dir] = true
	return nil
}

func (n *fakeNotifier) Remove(dir string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.watching, dir)
	return nil
}

func (n *fakeNotifier) WatchList() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Collect(maps.Keys(n.watching))
}

func (n *fakeNotifier) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	return nil
}

func (n *fakeNotifier) Events() <-chan fsnotify.Event { return n.events }
func (n *fakeNotifier) Errors() <-chan error          { return n.errs }

func (n *fakeNotifier) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// runWatcher runs w.Run until the test's end, and then checks that it
// returned once its context was done, and not before.
func runWatcher(t *testing.T, w *Watcher) {
	t.Helper()
	// Not t.Context: it is cancelled before the cleanup runs.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
			t.Errorf("Run returned before its context was done")
			return
		default:
		}
		cancel()
		<-done
	})
}

// nextMode returns the next mode change, failing after two inotify retries
// of fake time.
func nextMode(t *testing.T, w *Watcher) ModeChange {
	t.Helper()
	select {
	case c := <-w.ModeChanges():
		return c
	case <-time.After(2 * inotifyRetry):
		t.Fatalf("no mode change within %v; mode %v", 2*inotifyRetry, w.Mode())
		return ModeChange{}
	}
}

// TestRunPolls checks the polling mode when inotify has no instance left:
// one mode change, edits applied at the next poll, Reload at once, an
// invalid file reported once, inotify tried again every minute without a
// new mode change while it still fails.
func TestRunPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		var mu sync.Mutex
		tries := 0
		w.start = func() (notifier, error) {
			mu.Lock()
			defer mu.Unlock()
			tries++
			return nil, syscall.EMFILE
		}
		runWatcher(t, w)
		c := nextMode(t, w)
		if c.Mode != Polling || !errors.Is(c.Reason, syscall.EMFILE) || w.Mode() != Polling {
			t.Fatalf("got %+v (Mode %v), want polling because of EMFILE", c, w.Mode())
		}
		synctest.Wait() // the first poll found the file unchanged
		start := time.Now()

		writeFile(t, path, configWith(2))
		r := <-w.Results()
		if got := time.Since(start); got != PollInterval {
			t.Errorf("edit applied after %v, want at the next poll, %v", got, PollInterval)
		}
		if r.Err != nil || r.Forced || visits(r) != 2 {
			t.Errorf("edit: got %+v, want visitThreshold 2 applied", r)
		}

		writeFile(t, path, configWith(3))
		start = time.Now()
		w.Reload()
		r = <-w.Results()
		if got := time.Since(start); got != 0 {
			t.Errorf("Reload answered after %v, want at once", got)
		}
		if !r.Forced || visits(r) != 3 {
			t.Errorf("Reload: got %+v, want visitThreshold 3, forced", r)
		}

		writeFile(t, path, pointWith("visitThreshold: x"))
		if r := <-w.Results(); r.Err == nil || r.File != nil {
			t.Errorf("invalid file: got %+v, want its error", r)
		}
		noResult(t, w) // later polls read the same bytes: nothing more

		// A minute of polling in all; then inotify is tried again, fails
		// again, and nothing is said about it.
		time.Sleep(inotifyRetry) // fake time: the retry is due
		mu.Lock()
		got := tries
		mu.Unlock()
		if got < 2 {
			t.Errorf("inotify tried %d times in over a minute, want it tried again", got)
		}
		select {
		case c := <-w.ModeChanges():
			t.Errorf("got mode change %+v while inotify still fails, want none", c)
		default:
		}
		if w.Mode() != Polling {
			t.Errorf("Mode: got %v, want polling", w.Mode())
		}
	})
}

// TestRunFallsBack makes inotify fail in each way it can, and checks that
// the watcher says so once, polls, and reports no config error for it.
func TestRunFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fail makes n fail after Run watched with it; nil: n fails at once.
		fail func(n *fakeNotifier)
		// addErr is what Add returns.
		addErr error
		want   string // in the reason
	}{
		{name: "Add fails", addErr: syscall.ENOSPC, want: "no space left on device"},
		{name: "events end", fail: func(n *fakeNotifier) { close(n.events) }, want: "event stream ended"},
		{name: "errors end", fail: func(n *fakeNotifier) { close(n.errs) }, want: "event stream ended"},
		{name: "error", fail: func(n *fakeNotifier) { n.errs <- errors.New("read: input/output error") }, want: "input/output error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w, path := newTestWatcher(t, 1)
				n := newFakeNotifier()
				n.addErr = tc.addErr
				w.start = func() (notifier, error) { return n, nil }
				runWatcher(t, w)
				if tc.fail != nil {
					if c := nextMode(t, w); c.Mode != Inotify || c.Reason != nil {
						t.Fatalf("got %+v, want inotify", c)
					}
					synctest.Wait()
					tc.fail(n)
				}
				c := nextMode(t, w)
				if c.Mode != Polling || c.Reason == nil || !strings.Contains(c.Reason.Error(), tc.want) {
					t.Fatalf("got %+v, want polling because of %q", c, tc.want)
				}
				synctest.Wait()
				if !n.isClosed() {
					t.Errorf("the failed notifier was not closed")
				}
				writeFile(t, path, configWith(2))
				if r := <-w.Results(); r.Err != nil || visits(r) != 2 {
					t.Errorf("edit while polling: got %+v (err %v), want visitThreshold 2", r, r.Err)
				}
			})
		})
	}
}

// TestRunBackToInotify checks that inotify is taken up again a minute
// after it failed, once it works.
func TestRunBackToInotify(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		n := newFakeNotifier()
		var mu sync.Mutex
		full := true
		w.start = func() (notifier, error) {
			mu.Lock()
			defer mu.Unlock()
			if full {
				return nil, syscall.EMFILE
			}
			return n, nil
		}
		runWatcher(t, w)
		if c := nextMode(t, w); c.Mode != Polling {
			t.Fatalf("got %+v, want polling", c)
		}
		start := time.Now()
		mu.Lock()
		full = false
		mu.Unlock()
		if c := nextMode(t, w); c.Mode != Inotify || c.Reason != nil {
			t.Fatalf("got %+v, want inotify", c)
		}
		if got := time.Since(start); got != inotifyRetry {
			t.Errorf("back to inotify after %v, want %v", got, inotifyRetry)
		}
		synctest.Wait()
		start = time.Now()
		writeFile(t, path, configWith(2))
		n.events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		if r := <-w.Results(); r.Err != nil || visits(r) != 2 {
			t.Errorf("edit: got %+v, want visitThreshold 2", r)
		}
		if got := time.Since(start); got != debounce {
			t.Errorf("edit applied after %v, want the inotify debounce, %v", got, debounce)
		}
	})
}

// TestRunPollsConfigMapSwap checks that polling reads through the
// kubelet's symlinks: each swap of ..data applies.
func TestRunPollsConfigMapSwap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		publish := func(version string, visits int) {
			t.Helper()
			if err := os.Mkdir(filepath.Join(dir, version), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, version, "sds.yaml"), configWith(visits))
			tmp := filepath.Join(dir, "..data_tmp")
			if err := os.Symlink(version, tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
		}
		publish("..v1", 1)
		path := filepath.Join(dir, "sds.yaml")
		if err := os.Symlink(filepath.Join("..data", "sds.yaml"), path); err != nil {
			t.Fatal(err)
		}
		w := watcherOf(t, path)
		w.start = func() (notifier, error) { return nil, syscall.EMFILE }
		runWatcher(t, w)
		nextMode(t, w)
		for i, want := range []int{2, 3} {
			publish(fmt.Sprintf("..v%d", i+2), want)
			if r := <-w.Results(); r.Err != nil || visits(r) != int64(want) {
				t.Fatalf("swap %d: got %+v (err %v), want visitThreshold %d", i+1, r, r.Err, want)
			}
		}
	})
}

// TestSettle writes a file the way a careless writer does: it is empty,
// half written or missing when the event comes and when the debounce ends,
// and whole 150ms later.
// The failure is never reported; the whole file applies settle after the
// debounce. A failure still there after the settle is reported then.
func TestSettle(t *testing.T) {
	full := configWith(2)
	for _, tc := range []struct {
		name  string
		first func(path string) error // leaves the file broken
		then  string                  // written 150ms later; "" writes nothing
	}{
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o644) }, full},
		{"half written", func(p string) error { return os.WriteFile(p, []byte(full[:strings.Index(full, "points:")]), 0o644) }, full},
		{"missing", os.Remove, full},
		{"empty for good", func(p string) error { return os.WriteFile(p, nil, 0o644) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w, path := newTestWatcher(t, 1)
				events, stop := startLoop(t, w)
				defer stop()
				synctest.Wait()
				start := time.Now()
				if err := tc.first(path); err != nil {
					t.Fatal(err)
				}
				events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
				if tc.then != "" {
					time.AfterFunc(150*time.Millisecond, func() { writeFile(t, path, tc.then) })
				}
				r := <-w.Results()
				if got, want := time.Since(start), debounce+settle; got != want {
					t.Errorf("reported after %v, want %v", got, want)
				}
				switch {
				case tc.then == "" && r.Err == nil:
					t.Errorf("got %+v, want the error, still there after the settle", r)
				case tc.then != "" && (r.Err != nil || visits(r) != 2):
					t.Errorf("got %+v (err %v), want visitThreshold 2 and no error", r, r.Err)
				}
				noResult(t, w)
			})
		})
	}
}

// TestSettleForced checks that a Reload of a broken file settles too, and
// that an error already reported is not read twice.
func TestSettleForced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		events, stop := startLoop(t, w)
		defer stop()
		synctest.Wait()
		writeFile(t, path, "")
		start := time.Now()
		w.Reload()
		if r := <-w.Results(); r.Err == nil || !r.Forced {
			t.Errorf("Reload of an empty file: got %+v, want its error", r)
		}
		if got := time.Since(start); got != settle {
			t.Errorf("reported after %v, want %v", got, settle)
		}
		// The same failure on an event: not reported, and no settle.
		events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		time.Sleep(debounce) // fake time: the debounce has passed
		synctest.Wait()
		writeFile(t, path, configWith(2))
		start = time.Now()
		events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		if r := <-w.Results(); r.Err != nil || visits(r) != 2 {
			t.Errorf("got %+v, want visitThreshold 2", r)
		}
		if got := time.Since(start); got != debounce {
			t.Errorf("applied after %v, want %v", got, debounce)
		}
	})
}

// --- The directory deleted and created again, the real fsnotify -------------

// TestWatchDirectoryRecreated deletes the config file's directory (or one
// of its ancestors) and creates it again with a new file, in the ways it
// happens: slowly, at once, renamed away; twice each, to show that the
// watch survives more than once.
func TestWatchDirectoryRecreated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		depth int // how many levels above the file are deleted: 1 is its directory
		// remove deletes dir; wait says whether to wait for the watcher
		// to report the file missing before dir comes back.
		remove func(dir string) error
		wait   bool
	}{
		{"deleted", 1, os.RemoveAll, true},
		{"deleted with its parent", 2, os.RemoveAll, true},
		{"deleted and back at once", 1, os.RemoveAll, false},
		{"renamed away", 1, func(dir string) error {
			if err := os.RemoveAll(dir + ".old"); err != nil {
				return err
			}
			return os.Rename(dir, dir+".old")
		}, true},
		{"renamed away and back at once", 1, func(dir string) error {
			if err := os.Rename(dir, dir+".old"); err != nil {
				return err
			}
			return os.RemoveAll(dir + ".old")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a", "conf", "sds.yaml")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, configWith(1))
			w := watch(t, path)
			gone := filepath.Dir(path)
			for range tc.depth - 1 {
				gone = filepath.Dir(gone)
			}
			for want := 2; want <= 3; want++ {
				if err := tc.remove(gone); err != nil {
					t.Fatal(err)
				}
				if tc.wait {
					if r := next(t, w); !errors.Is(r.Err, fs.ErrNotExist) {
						t.Fatalf("removed: got %+v (err %v), want the file missing", r, r.Err)
					}
				}
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, configWith(want))
				waitVisits(t, w, int64(want))
			}
			if w.Mode() != Inotify {
				t.Errorf("Mode: got %v, want inotify", w.Mode())
			}
			inForce(t, w, 3)
		})
	}
}

// TestWatchDirectoryCreatedLater starts with the file's directory missing:
// the ancestor is watched, and the file applies once it is there.
func TestWatchDirectoryCreatedLater(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "conf", "sds.yaml")
	w, err := New(path, config.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runWatcher(t, w)
	if r := next(t, w); !errors.Is(r.Err, fs.ErrNotExist) {
		t.Fatalf("got %+v (err %v), want the file missing", r, r.Err)
	}
	if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, configWith(2))
	waitVisits(t, w, 2)
	if w.Mode() != Inotify {
		t.Errorf("Mode: got %v, want inotify", w.Mode())
	}
}

// TestDirWatchTargets checks which directories are watched: the file's,
// its symlink target's, one watch for two names of one directory, and the
// nearest ancestor of a missing one.
func TestDirWatchTargets(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(real, "sds.yaml"), configWith(1))
	if err := os.Symlink(real, filepath.Join(base, "linked")); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(base, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(real, "sds.yaml"), filepath.Join(other, "sds.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{filepath.Join(real, "sds.yaml"), []string{real}},
		{filepath.Join(base, "linked", "sds.yaml"), []string{filepath.Join(base, "linked")}},
		{filepath.Join(other, "sds.yaml"), []string{other, real}},
		{filepath.Join(base, "gone", "deeper", "sds.yaml"), []string{base}},
	} {
		n := newFakeNotifier()
		if err := newDirWatch(n, tc.path).sync(); err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		slices.Sort(n.added) // the order of the adds is a map's
		if !slices.Equal(n.added, tc.want) {
			t.Errorf("%s: watched %q, want %q", tc.path, n.added, tc.want)
		}
	}
}

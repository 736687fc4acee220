package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/limiter"
)

// pointWith returns a config whose only point, p, has the settings given,
// one a line from line 7, column 5.
func pointWith(settings ...string) string {
	return "upstream: http://127.0.0.1:9000\nroutes:\n  - point: p\n    match: {}\npoints:\n  p:\n    " +
		strings.Join(settings, "\n    ") + "\n"
}

// configWith returns a valid config whose only point has visitThreshold
// visits.
func configWith(visits int) string {
	return pointWith(fmt.Sprintf("visitThreshold: %d", visits))
}

// sdsValue returns t as the file spells it: -1 when off.
func sdsValue(t limiter.Threshold) int64 {
	if n, on := t.Get(); on {
		return n
	}
	return -1
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// visits returns the visitThreshold of a result's config, or -2 when the
// result carries no config.
func visits(r Result) int64 {
	if r.File == nil || len(r.File.Points) == 0 {
		return -2
	}
	return sdsValue(r.File.Points[0].VisitThreshold)
}

// --- The debounce, on a fake clock -------------------------------------------

// startLoop runs w's event loop on events inside a synctest bubble; the
// returned stop ends it and waits for it.
func startLoop(t *testing.T, w *Watcher) (events chan fsnotify.Event, stop func()) {
	events = make(chan fsnotify.Event)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- w.loop(ctx, events, make(chan error), nil) }()
	return events, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("loop: %v", err)
		}
	}
}

// newTestWatcher writes configWith(visits) to a new file and returns a
// watcher whose config in force is that file's.
func newTestWatcher(t *testing.T, visits int) (*Watcher, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sds.yaml")
	writeFile(t, path, configWith(visits))
	return watcherOf(t, path), path
}

// watcherOf loads the config at path and returns a watcher whose config
// in force is it.
func watcherOf(t *testing.T, path string) *Watcher {
	t.Helper()
	current, err := config.Load(path, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(path, config.Options{}, current)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// noResult fails if w reports anything within a minute of fake time.
func noResult(t *testing.T, w *Watcher) {
	t.Helper()
	select {
	case r := <-w.Results():
		t.Errorf("unexpected result %+v", r)
	case <-time.After(time.Minute):
	}
}

func TestDebounceBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		events, stop := startLoop(t, w)
		defer stop()
		synctest.Wait() // the initial check found the file unchanged
		start := time.Now()
		for i := range 50 {
			writeFile(t, path, configWith(100+i))
			events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		}
		r := <-w.Results()
		if got := time.Since(start); got != debounce {
			t.Errorf("applied after %v, want %v", got, debounce)
		}
		if r.Err != nil || visits(r) != 149 {
			t.Errorf("got %+v, want the last write (visitThreshold 149)", r)
		}
		if got := r.Change.String(); got != "points changed [p]" {
			t.Errorf("change: got %q", got)
		}
		noResult(t, w)
	})
}

func TestDebounceRestartsOnEachEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		events, stop := startLoop(t, w)
		defer stop()
		synctest.Wait()
		start := time.Now()
		writeFile(t, path, configWith(2))
		events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		time.AfterFunc(60*time.Millisecond, func() { events <- fsnotify.Event{Name: path, Op: fsnotify.Chmod} })
		r := <-w.Results()
		if got, want := time.Since(start), 60*time.Millisecond+debounce; got != want {
			t.Errorf("applied after %v, want %v", got, want)
		}
		if visits(r) != 2 {
			t.Errorf("got %+v, want visitThreshold 2", r)
		}
	})
}

func TestDebounceHasAMaximum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		events, stop := startLoop(t, w)
		defer stop()
		synctest.Wait()
		// Another file in the directory changes every 50ms, for ever.
		ticker := time.NewTicker(50 * time.Millisecond)
		quit := make(chan struct{})
		defer func() { close(quit); ticker.Stop() }()
		go func() {
			for {
				select {
				case <-ticker.C:
					select {
					case events <- fsnotify.Event{Name: "app.log", Op: fsnotify.Write}:
					case <-quit:
						return
					}
				case <-quit:
					return
				}
			}
		}()
		start := time.Now()
		writeFile(t, path, configWith(2))
		events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		r := <-w.Results()
		if got := time.Since(start); got != maxDelay {
			t.Errorf("applied after %v, want %v", got, maxDelay)
		}
		if visits(r) != 2 {
			t.Errorf("got %+v, want visitThreshold 2", r)
		}
	})
}

func TestReloadForced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		_, stop := startLoop(t, w)
		defer stop()
		synctest.Wait()
		start := time.Now()

		w.Reload()
		r := <-w.Results()
		if !r.Forced || !r.Unchanged || r.Err != nil || visits(r) != 1 {
			t.Errorf("unchanged file: got %+v, want a forced, unchanged result", r)
		}
		noResult(t, w)

		writeFile(t, path, configWith(2)) // no event comes
		start = time.Now()
		w.Reload()
		r = <-w.Results()
		if time.Since(start) != 0 {
			t.Errorf("forced reload took %v, want it at once", time.Since(start))
		}
		if !r.Forced || r.Unchanged || visits(r) != 2 {
			t.Errorf("changed file: got %+v, want it applied", r)
		}
	})
}

func TestInitialCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		writeFile(t, path, configWith(2)) // changed between Load and Run
		_, stop := startLoop(t, w)
		defer stop()
		if r := <-w.Results(); visits(r) != 2 {
			t.Errorf("got %+v, want the file as it is when Run starts", r)
		}
	})
}

func TestInvalidReportedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		events, stop := startLoop(t, w)
		defer stop()
		synctest.Wait()
		writeFile(t, path, pointWith("visitThreshold: x"))
		events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		if r := <-w.Results(); r.Err == nil || r.File != nil {
			t.Fatalf("got %+v, want the error", r)
		}
		events <- fsnotify.Event{Name: "other", Op: fsnotify.Create}
		noResult(t, w)
		if visits(Result{File: w.Current()}) != 1 {
			t.Errorf("config in force: got %+v, want the last good one", w.Current())
		}
		// Back to the content in force: reported, so the error clears.
		writeFile(t, path, configWith(1))
		events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		if r := <-w.Results(); r.Err != nil || !r.Unchanged || visits(r) != 1 {
			t.Errorf("got %+v, want an unchanged result", r)
		}
	})
}

// TestWatcherErrors checks that an overflow, or a watch that was already
// gone, re-reads the file, and that any other error ends the inotify loop
// with its reason (Run then polls) and is not reported as a rejected
// config.
func TestWatcherErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		events := make(chan fsnotify.Event)
		errs := make(chan error)
		done := make(chan error)
		go func() { done <- w.loop(t.Context(), events, errs, nil) }()
		synctest.Wait()

		writeFile(t, path, configWith(2))
		errs <- fsnotify.ErrEventOverflow // events were lost: re-read
		if r := <-w.Results(); visits(r) != 2 {
			t.Errorf("after an overflow: got %+v, want the file re-read", r)
		}
		writeFile(t, path, configWith(3))
		errs <- syscall.EINVAL // a watch already gone: re-sync and re-read
		if r := <-w.Results(); visits(r) != 3 {
			t.Errorf("after EINVAL: got %+v, want the file re-read", r)
		}
		errs <- errors.New("boom")
		if err := <-done; err == nil || !strings.Contains(err.Error(), "boom") {
			t.Errorf("loop: got %v, want the error that ended it", err)
		}
		noResult(t, w)
	})
}

// --- Real files, the real fsnotify ------------------------------------------

// watch loads path, starts a watcher of it and stops it at the test's end.
func watch(t *testing.T, path string) *Watcher {
	t.Helper()
	return watchAccepting(t, path, nil)
}

// watchAccepting is watch with the watcher's Accept set to accept.
func watchAccepting(t *testing.T, path string, accept func(*config.File) error) *Watcher {
	t.Helper()
	w := watcherOf(t, path)
	w.Accept = accept
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// Once a forced reload is answered, Run watches the directory: the
	// test's changes then reach it as events, not through the first check.
	w.Reload()
	if r := next(t, w); !r.Forced || !r.Unchanged {
		t.Fatalf("first forced reload: got %+v (err %v), want it unchanged", r, r.Err)
	}
	return w
}

// next returns the next result, failing after a generous deadline.
func next(t *testing.T, w *Watcher) Result {
	t.Helper()
	select {
	case r := <-w.Results():
		return r
	case <-time.After(5 * time.Second):
		t.Fatalf("no result within 5s; config in force: %+v", w.Current())
		return Result{}
	}
}

// waitVisits receives results until one applies visitThreshold want,
// skipping others (a reader can see a file half written).
func waitVisits(t *testing.T, w *Watcher, want int64) Result {
	t.Helper()
	for {
		r := next(t, w)
		if r.Err == nil && visits(r) == want {
			return r
		}
	}
}

// waitErr receives results until one reports an error containing want,
// skipping others (a reader can see a file truncated but not yet written).
func waitErr(t *testing.T, w *Watcher, want string) Result {
	t.Helper()
	for {
		r := next(t, w)
		if r.Err != nil && strings.Contains(r.Err.Error(), want) {
			return r
		}
		if r.Err == nil {
			t.Fatalf("got %+v, want an error containing %q", r, want)
		}
	}
}

// inForce checks, through a forced reload, that the file holds visits and
// that it is the config in force; stale results queued before are skipped.
func inForce(t *testing.T, w *Watcher, want int64) {
	t.Helper()
	w.Reload()
	for {
		r := next(t, w)
		if !r.Forced {
			continue
		}
		if r.Err != nil || !r.Unchanged || visits(r) != want {
			t.Errorf("forced reload: got %+v (err %v), want visitThreshold %d unchanged", r, r.Err, want)
		}
		if got := visits(Result{File: w.Current()}); got != want {
			t.Errorf("Current: got visitThreshold %d, want %d", got, want)
		}
		return
	}
}

func newConfigFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sds.yaml")
	writeFile(t, path, configWith(1))
	return path
}

// TestWatchAcceptRefuses: a valid file that the running process refuses
// is reported as a failure and is not in force, so a forced reload tries
// it again and fails again, instead of finding it "unchanged" and calling
// the reload a success while the old config serves.
func TestWatchAcceptRefuses(t *testing.T) {
	path := newConfigFile(t)
	refused := errors.New("the limiter refuses visitThreshold 5")
	w := watchAccepting(t, path, func(f *config.File) error {
		if sdsValue(f.Points[0].VisitThreshold) == 5 {
			return refused
		}
		return nil
	})
	writeFile(t, path, configWith(5))
	if r := waitErr(t, w, refused.Error()); r.File != nil {
		t.Errorf("refused file: got a config with the error")
	}
	if got := visits(Result{File: w.Current()}); got != 1 {
		t.Errorf("after the refusal: in force visitThreshold %d, want 1", got)
	}
	for range 2 {
		w.Reload()
		if r := next(t, w); !r.Forced || !errors.Is(r.Err, refused) {
			t.Errorf("forced reload of the refused file: got %+v (err %v), want the refusal again", r, r.Err)
		}
	}
	writeFile(t, path, configWith(6))
	waitVisits(t, w, 6)
	inForce(t, w, 6)
}

func TestWatchEditorRename(t *testing.T) {
	path := newConfigFile(t)
	w := watch(t, path)
	for want := 2; want <= 3; want++ {
		tmp := filepath.Join(filepath.Dir(path), ".sds.yaml.swp")
		writeFile(t, tmp, configWith(want))
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		r := next(t, w)
		if r.Err != nil || visits(r) != int64(want) {
			t.Fatalf("after rename %d: got %+v (err %v)", want, r, r.Err)
		}
	}
	inForce(t, w, 3)
}

func TestWatchTruncateAndRewrite(t *testing.T) {
	path := newConfigFile(t)
	w := watch(t, path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(configWith(2)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitVisits(t, w, 2)
	inForce(t, w, 2)
}

func TestWatchHalfWritten(t *testing.T) {
	path := newConfigFile(t)
	w := watch(t, path)
	full := configWith(2)
	half := full[:strings.Index(full, "points:")]
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(half); err != nil {
		t.Fatal(err)
	}
	if r := waitErr(t, w, `point "p" is not defined`); r.File != nil {
		t.Errorf("half a file: got a config with the error")
	}
	if got := visits(Result{File: w.Current()}); got != 1 {
		t.Errorf("half a file: in force visitThreshold %d, want 1", got)
	}
	if _, err := f.WriteString(full[len(half):]); err != nil {
		t.Fatal(err)
	}
	r := next(t, w)
	if r.Err != nil || visits(r) != 2 {
		t.Fatalf("the rest: got %+v (err %v), want visitThreshold 2", r, r.Err)
	}
	inForce(t, w, 2)
}

// TestWatchConfigMapSwap updates a file the way the kubelet updates a
// mounted ConfigMap, twice:
//
//	..2026_01_01_00_00_01.1/sds.yaml
//	..data -> ..2026_01_01_00_00_01.1
//	sds.yaml -> ..data/sds.yaml
func TestWatchConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	publish := func(stamp string, visits int) {
		t.Helper()
		ts := filepath.Join(dir, "..2026_01_01_00_00_0"+stamp)
		if err := os.Mkdir(ts, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(ts, "sds.yaml"), configWith(visits))
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
			t.Fatal(err)
		}
		old, _ := os.Readlink(filepath.Join(dir, "..data"))
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if old != "" {
			if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish("1", 1)
	if err := os.Symlink(filepath.Join("..data", "sds.yaml"), filepath.Join(dir, "sds.yaml")); err != nil {
		t.Fatal(err)
	}
	w := watch(t, filepath.Join(dir, "sds.yaml"))
	for i, want := range []int{2, 3} {
		publish(fmt.Sprint(i+2), want)
		r := next(t, w)
		if r.Err != nil || visits(r) != int64(want) {
			t.Fatalf("swap %d: got %+v (err %v), want visitThreshold %d", i+1, r, r.Err, want)
		}
	}
	inForce(t, w, 3)
}

func TestWatchSymlinkElsewhere(t *testing.T) {
	real := newConfigFile(t)
	link := filepath.Join(t.TempDir(), "sds.yaml")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	w := watch(t, link) // the target's directory is watched from the first check on
	writeFile(t, real, configWith(2))
	waitVisits(t, w, 2)
	inForce(t, w, 2)
}

func TestWatchDeleteAndRecreate(t *testing.T) {
	path := newConfigFile(t)
	w := watch(t, path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	r := next(t, w)
	if !errors.Is(r.Err, fs.ErrNotExist) || r.File != nil {
		t.Fatalf("deleted: got %+v (err %v), want fs.ErrNotExist", r, r.Err)
	}
	if got := visits(Result{File: w.Current()}); got != 1 {
		t.Errorf("deleted: in force visitThreshold %d, want 1", got)
	}
	writeFile(t, path, configWith(3))
	waitVisits(t, w, 3)
	inForce(t, w, 3)
}

func TestWatchBurst(t *testing.T) {
	path := newConfigFile(t)
	w := watch(t, path)
	start := time.Now()
	for i := range 50 {
		writeFile(t, path, configWith(100+i))
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Logf("the 50 writes took %v, more than 100ms", d)
	}
	r := waitVisits(t, w, 149)
	if !strings.Contains(r.Change.String(), "points changed [p]") {
		t.Errorf("change: got %q", r.Change)
	}
	inForce(t, w, 149)
}

func TestWatchInvalidKeepsLastGood(t *testing.T) {
	path := newConfigFile(t)
	w := watch(t, path)
	writeFile(t, path, configWith(2))
	waitVisits(t, w, 2)

	writeFile(t, path, pointWith("visitThreshold: 2", "concurrentThreshold: 0"))
	r := waitErr(t, w, path+":8:26: concurrentThreshold: 0 would degrade every request")
	var errs config.Errors
	if !errors.As(r.Err, &errs) || r.File != nil {
		t.Fatalf("invalid: got %+v (err %v), want Errors and no config", r, r.Err)
	}
	if got := visits(Result{File: w.Current()}); got != 2 {
		t.Errorf("invalid: in force visitThreshold %d, want 2", got)
	}
	w.Reload()
	if r := next(t, w); !r.Forced || r.Err == nil {
		t.Errorf("forced reload of the invalid file: got %+v, want the error again", r)
	}

	writeFile(t, path, configWith(4))
	r = waitVisits(t, w, 4)
	if got := r.Change.String(); got != "points changed [p]" {
		t.Errorf("change from the last good config: got %q", got)
	}
	inForce(t, w, 4)
}

// TestUnchangedFileNotParsed: an event that leaves the file holding the
// bytes in force costs a read, not a parse: a few dozen allocations, where
// parsing this file of 2,000 points makes about 196,000.
func TestUnchangedFileNotParsed(t *testing.T) {
	var b strings.Builder
	b.WriteString("upstream: http://127.0.0.1:9000\npoints:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "  p%d: {visitThreshold: 100}\n", i)
	}
	b.WriteString("routes:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "- {point: p%d, match: {path: /r%d}}\n", i, i)
	}
	path := filepath.Join(t.TempDir(), "sds.yaml")
	writeFile(t, path, b.String())
	w := watcherOf(t, path)
	current := w.Current()
	allocs := testing.AllocsPerRun(5, func() { w.check(t.Context(), false) })
	if allocs > 100 {
		t.Errorf("a check of the file in force: got %.0f allocations, want <= 100 (no parse)", allocs)
	}
	if w.Current() != current {
		t.Error("a check of the file in force replaced the config")
	}
}

// TestUnchangedFileOtherFileChanged: when the config names another file
// (here a fallback's bodyFile), an event re-parses the file even when its
// own bytes are those in force, so the other file's new content applies.
func TestUnchangedFileOtherFileChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		path, body := filepath.Join(dir, "sds.yaml"), filepath.Join(dir, "body.json")
		writeFile(t, body, `{"v":1}`)
		writeFile(t, path, pointWith("visitThreshold: 1", "fallback: {bodyFile: body.json}"))
		w := watcherOf(t, path)
		events, stop := startLoop(t, w)
		defer stop()
		synctest.Wait()
		writeFile(t, body, `{"v":2}`)
		events <- fsnotify.Event{Name: body, Op: fsnotify.Write}
		r := <-w.Results()
		if r.Err != nil || r.File == nil || string(r.File.Points[0].Fallback.Body) != `{"v":2}` {
			t.Fatalf("got %+v, want the new body applied", r)
		}
	})
}

// TestWatchRestartAgainstBoot: a change of a restart-only setting is
// reported against the config the process started with, on every later
// reload too, though the watcher keeps only that config's restart-only
// settings (restartPart).
func TestWatchRestartAgainstBoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		if w.boot.Points != nil || w.boot.Raw != nil {
			t.Errorf("the watcher keeps the boot config's points or bytes: %+v", w.boot)
		}
		events, stop := startLoop(t, w)
		defer stop()
		synctest.Wait()
		for _, step := range []struct {
			file    string
			restart []string
		}{
			{configWith(2), nil},
			{"listen: 127.0.0.1:1234\n" + configWith(2), []string{"listen"}},
			{"listen: 127.0.0.1:1234\n" + configWith(3), []string{"listen"}},
			{"h2c: true\n" + configWith(3), []string{"h2c"}},
			{configWith(4), nil},
		} {
			writeFile(t, path, step.file)
			events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
			r := <-w.Results()
			if r.Err != nil || fmt.Sprint(r.Change.NeedsRestart) != fmt.Sprint(step.restart) {
				t.Errorf("%q: got %v, %v; want needs restart %v", step.file, r.Err, r.Change.NeedsRestart, step.restart)
			}
		}
	})
}

// TestWatchParse: a file that changed is made a config by Parse, with its
// absolute path and its bytes, and what Parse returns is what applies; a
// file left as it is is not parsed, so Parse does not run.
func TestWatchParse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, path := newTestWatcher(t, 1)
		var parsed []string
		w.Parse = func(p string, data []byte) (*config.File, error) {
			parsed = append(parsed, p)
			return config.Parse(p, bytes.Replace(data, []byte("visitThreshold: 2"), []byte("visitThreshold: 3"), 1), config.Options{})
		}
		events, stop := startLoop(t, w)
		defer stop()
		synctest.Wait()
		if len(parsed) != 0 {
			t.Errorf("the first check of the file in force ran Parse %d times, want 0", len(parsed))
		}
		writeFile(t, path, configWith(2))
		events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		if r := <-w.Results(); r.Err != nil || visits(r) != 3 {
			t.Fatalf("got %+v, want visitThreshold 3, as Parse made it", r)
		}
		if len(parsed) != 1 || parsed[0] != path {
			t.Errorf("Parse ran for %q, want once for %q", parsed, path)
		}
	})
}

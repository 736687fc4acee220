package config

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// The watcher's timing. A file is re-read debounce after the last event in
// its directory, and at most maxDelay after the first event of a burst, so
// a directory that never goes quiet still reloads within a second.
const (
	debounce = 100 * time.Millisecond
	maxDelay = 500 * time.Millisecond
)

// Result is the outcome of one reload attempt.
type Result struct {
	// File is the config in force after the attempt: the new one when it
	// applied, the previous one when Unchanged. nil when Err is set.
	File *File
	// Err says why the file was not applied: it could not be read or is
	// invalid (an Errors). The last good config stays in force.
	Err error
	// Change is what changed from the previous config in force. Its
	// NeedsRestart compares with the config the watcher started with, so a
	// restart-only change is reported on each reload until a restart.
	Change Change
	// Forced is true for a reload asked for by Reload.
	Forced bool
	// Unchanged is true when the file holds the config already in force.
	Unchanged bool
}

// Watcher hot-reloads a config file. It watches the file's directory, not
// the file: editors replace a file by renaming another over it, and
// Kubernetes updates a ConfigMap by swapping a ..data symlink, so no event
// may ever name the file. On any event it re-reads the file through its
// path, and applies it when its content differs from the config in force
// and it is valid. When the path is a symlink, the directory of its target
// is watched too.
//
// A Watcher reports on Results: once per attempt that found new content
// (valid or not) and once per Reload. An unchanged invalid file is
// reported once, not on every event. A deleted file is reported once and
// the watch goes on: the file applies again when it comes back.
type Watcher struct {
	path    string
	opts    Options
	boot    *File
	applied atomic.Pointer[File]
	// failed identifies the last failure reported, "" after a success.
	failed  string
	results chan Result
	reload  chan struct{}
}

// NewWatcher returns a watcher of the config file at path, parsed with
// opts, whose config now in force is current (nil: none yet, so the first
// valid file applies). current's restart-only settings are those the
// process runs with.
func NewWatcher(path string, opts Options, current *File) (*Watcher, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		path:    abs,
		opts:    opts,
		boot:    current,
		results: make(chan Result),
		reload:  make(chan struct{}, 1),
	}
	w.applied.Store(current)
	return w, nil
}

// Results returns the channel of reload outcomes. Run blocks while no one
// receives.
func (w *Watcher) Results() <-chan Result { return w.results }

// Current returns the config in force: the last one applied, or the one
// NewWatcher was given. Safe to call from any goroutine.
func (w *Watcher) Current() *File { return w.applied.Load() }

// Reload asks Run to re-read the file now (for SIGHUP). It does not block;
// requests made while one is pending count once.
func (w *Watcher) Reload() {
	select {
	case w.reload <- struct{}{}:
	default:
	}
}

// Run watches until ctx is done and then returns nil; it returns an error
// when the directory cannot be watched. It re-reads the file once at the
// start, in case it changed since it was loaded.
func (w *Watcher) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", w.path, err)
	}
	defer fw.Close()
	dir := filepath.Dir(w.path)
	if err := fw.Add(dir); err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	target := ""
	follow := func() {
		real, err := filepath.EvalSymlinks(w.path)
		if err != nil {
			return
		}
		td := filepath.Dir(real)
		if td == dir || td == target {
			return
		}
		if target != "" {
			_ = fw.Remove(target) // gone already when its directory was deleted
		}
		target = ""
		if fw.Add(td) == nil {
			target = td
		}
	}
	return w.loop(ctx, fw.Events, fw.Errors, follow)
}

// loop is Run's event loop, apart from fsnotify: an event (re)starts the
// debounce timer, the timer or a Reload re-reads the file. follow runs
// before each read, so that the directory of a symlink's current target is
// watched before its content is read; nil does nothing.
func (w *Watcher) loop(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error, follow func()) error {
	if follow == nil {
		follow = func() {}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	var first time.Time // the first event of the pending burst; zero when none
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-events:
			if !ok {
				return errors.New("watching " + w.path + ": the event stream ended")
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			timer.Reset(min(debounce, first.Add(maxDelay).Sub(now)))
		case err, ok := <-errs:
			if !ok {
				return errors.New("watching " + w.path + ": the event stream ended")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were lost: re-read as if one came.
				timer.Reset(0)
				continue
			}
			w.send(ctx, Result{Err: fmt.Errorf("watching %s: %w", w.path, err)})
		case <-timer.C:
			first = time.Time{}
			follow()
			w.check(ctx, false)
		case <-w.reload:
			timer.Stop()
			first = time.Time{}
			follow()
			w.check(ctx, true)
		}
	}
}

// check re-reads the file and applies it when it is new and valid.
func (w *Watcher) check(ctx context.Context, forced bool) {
	data, err := readFile(w.path, maxFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%s is missing; the last good config stays in force until it comes back: %w", w.path, err)
	}
	if err != nil {
		w.fail(ctx, "read "+err.Error(), err, forced)
		return
	}
	f, err := Parse(w.path, data, w.opts)
	if err != nil {
		sum := sha256.Sum256(data)
		w.fail(ctx, hex.EncodeToString(sum[:])+err.Error(), err, forced)
		return
	}
	prev := w.applied.Load()
	change := Diff(prev, f)
	if prev != nil && prev.Hash == f.Hash && change.Empty() {
		if forced || w.failed != "" {
			w.failed = ""
			w.send(ctx, Result{File: prev, Forced: forced, Unchanged: true})
		}
		return
	}
	if w.boot != nil {
		change.NeedsRestart = restart(w.boot, f)
	}
	w.failed = ""
	w.applied.Store(f)
	w.send(ctx, Result{File: f, Change: change, Forced: forced})
}

// fail reports a failed attempt, once per distinct failure unless forced.
func (w *Watcher) fail(ctx context.Context, key string, err error, forced bool) {
	if !forced && key == w.failed {
		return
	}
	w.failed = key
	w.send(ctx, Result{Err: err, Forced: forced})
}

func (w *Watcher) send(ctx context.Context, r Result) {
	select {
	case w.results <- r:
	case <-ctx.Done():
	}
}

// Package watch hot-reloads a config file (Watcher): it watches the file's
// directory with fsnotify, follows editors' renames, a ConfigMap's symlink
// swaps and a deleted directory's return, polls the file while inotify
// cannot be used, and hands each new, valid config to its caller. What a
// config holds, how it parses and which of its changes need a restart is
// package config's.
package watch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sds-proxy/sds-proxy/config"
)

// The watcher's timing. A file is re-read debounce after the last event in
// its directory, and at most maxDelay after the first event of a burst, so
// a directory that never goes quiet still reloads within a second.
const (
	debounce = 100 * time.Millisecond
	maxDelay = 500 * time.Millisecond
)

// PollInterval is how often the file is read while inotify is unavailable
// (Polling): an edit then applies within about 2s instead of 100ms.
// A poll reads the file and parses it only when its bytes changed, so an
// idle proxy pays one read of at most 1 MiB per interval.
const PollInterval = 2 * time.Second

// inotifyRetry is how long the watcher polls before it tries inotify again.
// Instances freed by other processes are then taken back within a minute;
// while they stay used up, a retry costs one failed system call, and is not
// logged (the mode has not changed).
const inotifyRetry = time.Minute

// settle is how long a failed read waits before it is confirmed by a second
// read. A writer that truncates the file and then writes it (shell `>`,
// many editors' "save in place") leaves it empty or half written for a
// moment; a failure is reported only when it is still there settle later.
const settle = 250 * time.Millisecond

// Mode is how a Watcher learns that the file changed. The zero value
// means Run has not started.
type Mode int32

const (
	// Inotify is event-driven: fsnotify watches the file's directory
	// (inotify on Linux, the system's own mechanism elsewhere).
	Inotify Mode = iota + 1
	// Polling reads the file every PollInterval, because inotify
	// could not be used: the user's instances or watches are used up
	// (fs.inotify.max_user_instances is counted per UID per node), or
	// the event stream failed.
	Polling
)

// String returns "inotify", "polling", or "" for the zero value.
func (m Mode) String() string {
	switch m {
	case Inotify:
		return "inotify"
	case Polling:
		return "polling"
	}
	return ""
}

// ModeChange reports that a Watcher now watches in Mode.
type ModeChange struct {
	Mode Mode
	// Reason says why inotify was given up; nil for Inotify.
	Reason error
}

// Result is the outcome of one reload attempt.
type Result struct {
	// File is the config in force after the attempt: the new one when it
	// applied, the previous one when Unchanged. nil when Err is set.
	File *config.File
	// Err says why the file was not applied: it could not be read, is
	// invalid (a config.Errors), or Accept refused it. The last good config
	// stays in force.
	Err error
	// Change is what changed from the previous config in force. Its
	// NeedsRestart compares with the config the watcher started with, so a
	// restart-only change is reported on each reload until a restart.
	Change config.Change
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
// The watch does not die. When the file's directory is deleted, its
// nearest existing ancestor is watched until it comes back (see dirWatch).
// When inotify cannot be used (no instance left, no watch left, the event
// stream failed), the watcher polls the file every PollInterval, and tries
// inotify again every minute; ModeChanges says which mode is in force.
//
// A Watcher reports on Results: once per attempt that found new content
// (valid or not) and once per Reload. An unchanged invalid file is
// reported once, not on every event. A deleted file is reported once and
// the watch goes on: the file applies again when it comes back. A failed
// attempt (the file missing, unreadable, empty or invalid) is read again
// settle (250ms) later, and reported only if it still fails then, so a
// file seen between its truncation and its writing is not rejected.
type Watcher struct {
	// Accept, if set, is called with each new valid file before it is
	// recorded as in force, on Run's goroutine: it applies the file to
	// the running process, or returns why the process refused it. A
	// refused file is reported as a failure (Result.Err) and the config in
	// force stays the one before, so a later Reload tries it again. nil
	// accepts every valid file. Set it before Run.
	Accept func(*config.File) error
	// Parse, if set, makes the config of data, the bytes of the file read
	// through path (the file's absolute path), on Run's goroutine, in
	// place of config.Parse with the Options given to New. It runs only
	// for bytes that differ from the config in force's, or when those
	// read other files (config.File.ReadsOtherFiles). Set it before Run.
	Parse func(path string, data []byte) (*config.File, error)

	path string
	opts config.Options
	// boot is the part of the config the process started with that a
	// change of needs a restart (restartPart): not the whole config, which
	// would hold a second set of points once a reload replaces it.
	boot    *config.File
	applied atomic.Pointer[config.File]
	// failed identifies the last failure reported, "" after a success.
	failed  string
	results chan Result
	reload  chan struct{}

	mode  atomic.Int32             // a Mode
	modes chan ModeChange          // capacity 1: the latest change not yet received
	start func() (notifier, error) // opens fsnotify; tests make it fail
	// polled identifies what the previous poll read (a hash of the bytes,
	// or the read error); "" at the start of each polling period.
	polled string
}

// notifier is the part of an fsnotify watcher that Run uses; tests replace
// it to make inotify fail.
type notifier interface {
	Add(dir string) error
	Remove(dir string) error
	// WatchList returns the directories watched, without those whose
	// deletion or move the notifier has read.
	WatchList() []string
	Close() error
	Events() <-chan fsnotify.Event
	Errors() <-chan error
}

// fsNotifier is the real notifier.
type fsNotifier struct{ *fsnotify.Watcher }

func (n fsNotifier) Events() <-chan fsnotify.Event { return n.Watcher.Events }
func (n fsNotifier) Errors() <-chan error          { return n.Watcher.Errors }

func newFSNotifier() (notifier, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return fsNotifier{w}, nil
}

// New returns a watcher of the config file at path, parsed with
// opts, whose config now in force is current (nil: none yet, so the first
// valid file applies). current's restart-only settings are those the
// process runs with.
func New(path string, opts config.Options, current *config.File) (*Watcher, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		path:    abs,
		opts:    opts,
		boot:    config.RestartPart(current),
		results: make(chan Result),
		reload:  make(chan struct{}, 1),
		modes:   make(chan ModeChange, 1),
		start:   newFSNotifier,
	}
	w.applied.Store(current)
	return w, nil
}

// Results returns the channel of reload outcomes. Run blocks while no one
// receives.
func (w *Watcher) Results() <-chan Result { return w.results }

// ModeChanges returns the channel of watch mode changes. The first comes
// once Run has chosen its mode. It holds the latest change not yet
// received, so Run never blocks on it and a slow reader sees the mode in
// force (skipping changes that were already undone).
func (w *Watcher) ModeChanges() <-chan ModeChange { return w.modes }

// Mode returns the watch mode in force, 0 before Run chose one. Safe to
// call from any goroutine.
func (w *Watcher) Mode() Mode { return Mode(w.mode.Load()) }

// Current returns the config in force: the last one applied, or the one
// New was given. Safe to call from any goroutine.
func (w *Watcher) Current() *config.File { return w.applied.Load() }

// Reload asks Run to re-read the file now (for SIGHUP), in any mode. It
// does not block; requests made while one is pending count once.
func (w *Watcher) Reload() {
	select {
	case w.reload <- struct{}{}:
	default:
	}
}

// Run watches until ctx is done. It never returns before: when inotify
// fails it polls instead (see Watcher). It re-reads the file once at the
// start, and each time it changes modes, in case it changed unseen.
func (w *Watcher) Run(ctx context.Context) {
	for ctx.Err() == nil {
		reason := w.runInotify(ctx)
		if reason == nil {
			break
		}
		w.setMode(Polling, reason)
		w.poll(ctx, inotifyRetry)
	}
}

// runInotify watches by inotify until ctx is done, and then returns nil,
// or until inotify fails, and then returns why.
func (w *Watcher) runInotify(ctx context.Context) error {
	n, err := w.start()
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	defer n.Close()
	dirs := newDirWatch(n, w.path)
	if err := dirs.sync(); err != nil {
		return err
	}
	w.setMode(Inotify, nil)
	return w.loop(ctx, n.Events(), n.Errors(), dirs.sync)
}

// setMode records the mode in force and reports it when it changed.
func (w *Watcher) setMode(m Mode, reason error) {
	if Mode(w.mode.Swap(int32(m))) == m {
		return
	}
	select {
	case <-w.modes: // replaced by the newer change
	default:
	}
	w.modes <- ModeChange{Mode: m, Reason: reason} // Run is the only sender
}

// loop is the inotify mode's event loop, apart from fsnotify: an event
// (re)starts the debounce timer, the timer or a Reload re-reads the file.
// sync runs before each read, so that the directories whose events matter
// are watched before the file is read; nil does nothing. loop returns nil
// when ctx is done, and an error when inotify failed: the event stream
// ended, it reported an error other than an overflow (or a watch already
// gone), or sync failed.
func (w *Watcher) loop(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error, sync func() error) error {
	if sync == nil {
		sync = func() error { return nil }
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
				return errors.New("inotify: the event stream ended")
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			timer.Reset(min(debounce, first.Add(maxDelay).Sub(now)))
		case err, ok := <-errs:
			if !ok {
				return errors.New("inotify: the event stream ended")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) || errors.Is(err, syscall.EINVAL) {
				// Events were lost: re-read as if one came. EINVAL is
				// fsnotify failing to remove the watch of a directory
				// that moved and was deleted before the move was read:
				// the watch is gone either way, and the sync before the
				// re-read adds the directory again.
				timer.Reset(0)
				continue
			}
			return fmt.Errorf("inotify: %w", err)
		case <-timer.C:
			first = time.Time{}
			if err := sync(); err != nil {
				return err
			}
			w.check(ctx, false)
		case <-w.reload:
			timer.Stop()
			first = time.Time{}
			if err := sync(); err != nil {
				w.Reload() // answered by the polling that follows
				return err
			}
			w.check(ctx, true)
		}
	}
}

// poll reads the file now and then every PollInterval, until ctx is done
// or span has passed. The file is checked when what it read differs from
// the previous read, or on Reload.
func (w *Watcher) poll(ctx context.Context, span time.Duration) {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	end := time.NewTimer(span)
	defer end.Stop()
	w.polled = ""
	w.pollOnce(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-end.C:
			return
		case <-tick.C:
			w.pollOnce(ctx)
		case <-w.reload:
			w.check(ctx, true)
		}
	}
}

// pollOnce checks the file when its bytes (or its read error) differ from
// the previous poll's.
func (w *Watcher) pollOnce(ctx context.Context) {
	var key string
	if data, err := config.ReadFile(w.path); err != nil {
		key = "read " + err.Error()
	} else {
		sum := sha256.Sum256(data)
		key = hex.EncodeToString(sum[:])
	}
	if key == w.polled {
		return
	}
	w.polled = key
	w.check(ctx, false)
}

// check re-reads the file and applies it when it is new and valid. A
// failure that would be reported is first confirmed by a second read
// settle later.
func (w *Watcher) check(ctx context.Context, forced bool) {
	if !forced && w.failed == "" && w.unchanged() {
		return
	}
	f, key, err := w.attempt()
	if err != nil && (forced || key != w.failed) {
		t := time.NewTimer(settle)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		f, key, err = w.attempt()
	}
	if err != nil {
		w.fail(ctx, key, err, forced)
		return
	}
	prev := w.applied.Load()
	change := config.Diff(prev, f)
	if prev != nil && prev.Hash == f.Hash && change.Empty() {
		if forced || w.failed != "" {
			w.failed = ""
			w.send(ctx, Result{File: prev, Forced: forced, Unchanged: true})
		}
		return
	}
	if w.Accept != nil {
		if err := w.Accept(f); err != nil {
			w.fail(ctx, f.Hash+" refused: "+err.Error(), err, forced)
			return
		}
	}
	if w.boot != nil {
		change.NeedsRestart = config.NeedsRestart(w.boot, f)
	}
	w.failed = ""
	w.applied.Store(f)
	w.send(ctx, Result{File: f, Change: change, Forced: forced})
}

// unchanged reports whether the file holds the bytes of the config in
// force, which read no other file (config.File.ReadsOtherFiles): parsing
// them again would make the config in force again. This spares a parse,
// the heaviest work of a reload (it allocates many times the file's size,
// and holds a second config beside the one in force: docs/benchmarks.md,
// "10,000 points in 128 MiB"), to each event that leaves the file as it
// was, the first check of Run among them.
func (w *Watcher) unchanged() bool {
	prev := w.applied.Load()
	if prev == nil || prev.Raw == nil || prev.ReadsOtherFiles() {
		return false
	}
	data, err := config.ReadFile(w.path)
	return err == nil && bytes.Equal(data, prev.Raw)
}

// attempt reads and parses the file once. On failure, key identifies the
// failure: the read error, or the bytes read and the parse error.
func (w *Watcher) attempt() (f *config.File, key string, err error) {
	data, err := config.ReadFile(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%s is missing; the last good config stays in force until it comes back: %w", w.path, err)
	}
	if err != nil {
		return nil, "read " + err.Error(), err
	}
	if w.Parse != nil {
		f, err = w.Parse(w.path, data)
	} else {
		f, err = config.Parse(w.path, data, w.opts)
	}
	if err != nil {
		sum := sha256.Sum256(data)
		return nil, hex.EncodeToString(sum[:]) + err.Error(), err
	}
	return f, "", nil
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

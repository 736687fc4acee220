package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// maxSyncPasses bounds one dirWatch.sync: each pass after the first follows
// a directory created, deleted or replaced during the previous one. A
// directory tree that keeps changing for that many passes in a row is
// left to polling (sync returns an error).
const maxSyncPasses = 8

// dirWatch keeps a notifier on the directories whose changes can change
// what the config path reads:
//
//   - the path's directory, and
//   - when the path is a symlink, the directory of its final target (a
//     ConfigMap's ..2026_01_01_00_00_01.1, or a file elsewhere).
//
// A directory that does not exist (deleted, or not yet created) is
// replaced by its nearest existing ancestor, which is watched rather than
// polled so that its return is seen at once: a watch on /etc sees
// /etc/sds created again, and the sync after that event moves the watch
// back down. While the directory is missing, every change in the ancestor
// costs a few stats and a failed read of the file; nothing is reported
// after the first "missing".
//
// A watch follows a directory's inode, not its name, so sync also re-adds
// a directory whose name now leads to another one (deleted and created
// again, or renamed away and replaced) since the previous sync. It knows
// from the notifier's watch list, which drops a directory once its
// deletion or move is read, and from the directory's identity (device and
// inode, which a new directory may reuse at once, so this alone is not
// enough). If sync runs before the notifier has read a deletion, the
// event that follows that read triggers another sync. Two names of one
// directory (a symlinked directory and its target) get one watch.
//
// A dirWatch is used by one goroutine.
type dirWatch struct {
	n    notifier
	path string // the config file, absolute
	// watched maps each directory watched to what Stat said of it just
	// before it was added.
	watched map[string]fs.FileInfo
}

func newDirWatch(n notifier, path string) *dirWatch {
	return &dirWatch{n: n, path: path, watched: make(map[string]fs.FileInfo)}
}

// sync brings the watches in line with the directories as they are now.
// It returns an error when inotify cannot watch one of them (no watch
// left, no permission) or when they kept changing for maxSyncPasses passes.
func (d *dirWatch) sync() error {
	for range maxSyncPasses {
		done, err := d.pass()
		if err != nil || done {
			return err
		}
	}
	return fmt.Errorf("inotify: the directories of %s kept changing while they were being watched", d.path)
}

// pass is one attempt of sync. It reports false when the directories
// changed during the pass, so that one of them may have sent its event to
// no watch, and another pass is needed.
func (d *dirWatch) pass() (done bool, err error) {
	want, err := d.targets()
	if err != nil {
		return false, err
	}
	// Drop the watches that are not wanted any more, that the notifier
	// dropped (its directory was deleted or moved), or whose name now
	// leads to another directory. First: a directory now wanted under
	// another name would otherwise lose its only watch.
	listed := make(map[string]bool)
	for _, dir := range d.n.WatchList() {
		listed[dir] = true
	}
	for dir, info := range d.watched {
		if w, ok := want[dir]; !ok || !listed[dir] || !os.SameFile(w, info) {
			_ = d.n.Remove(dir) // the watch is gone already when its directory was deleted
			delete(d.watched, dir)
		}
	}
	for dir, info := range want {
		if _, ok := d.watched[dir]; ok {
			continue
		}
		if err := d.n.Add(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return false, nil // deleted since the Stat
			}
			return false, fmt.Errorf("inotify: watching %s: %w", dir, err)
		}
		d.watched[dir] = info
	}
	// A directory created or replaced between the Stat and the Add sent
	// its event to no watch: look once more.
	now, err := d.targets()
	if err != nil {
		return false, err
	}
	return sameDirs(now, d.watched), nil
}

// targets returns the directories to watch now, each with what Stat says
// of it.
func (d *dirWatch) targets() (map[string]fs.FileInfo, error) {
	dirs := []string{filepath.Dir(d.path)}
	if real, err := filepath.EvalSymlinks(d.path); err == nil {
		dirs = append(dirs, filepath.Dir(real))
	}
	want := make(map[string]fs.FileInfo, len(dirs))
	for _, dir := range dirs {
		at, info, err := nearestDir(dir)
		if err != nil {
			return nil, err
		}
		if !containsDir(want, info) {
			want[at] = info
		}
	}
	return want, nil
}

// nearestDir returns dir, or when dir does not exist (or is not a
// directory) its nearest existing ancestor, with what Stat says of it. The
// walk is bounded by dir's depth: the root always exists. An error other
// than "does not exist" ends the walk: the directory is there but cannot
// be looked at.
func nearestDir(dir string) (string, fs.FileInfo, error) {
	for {
		info, err := os.Stat(dir)
		if err == nil && info.IsDir() {
			return dir, info, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", nil, fmt.Errorf("inotify: watching %s: %w", dir, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil, fmt.Errorf("inotify: no directory of %s exists", dir)
		}
		dir = parent
	}
}

// containsDir reports whether dirs holds the directory info describes,
// under any name.
func containsDir(dirs map[string]fs.FileInfo, info fs.FileInfo) bool {
	for _, d := range dirs {
		if os.SameFile(d, info) {
			return true
		}
	}
	return false
}

// sameDirs reports whether a and b hold the same directories under the
// same names.
func sameDirs(a, b map[string]fs.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for name, info := range a {
		if other, ok := b[name]; !ok || !os.SameFile(info, other) {
			return false
		}
	}
	return true
}

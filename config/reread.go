package config

import "reflect"

// What a process that re-reads its config file (config/watch) needs of
// this package besides Parse and Diff: the file read as Load reads it, and
// what of the config it started with a later file is compared with.

// ReadFile reads the config file at path as Load does: a regular file (a
// named pipe is refused, not opened) of at most 1 MiB.
func ReadFile(path string) ([]byte, error) { return readFile(path, maxFileSize) }

// ReadsOtherFiles reports whether Parse read or checked a file besides the
// config file itself to make f (a bodyFile, the adminTokenFile, the TLS,
// ACME or cluster files: the keys marked file in keys.go). When it did
// not, the same bytes of the config file parse to the same File again.
func (f *File) ReadsOtherFiles() bool {
	names := false
	f.walk(func(k *key, _ loc, v reflect.Value) { names = names || k.file && v.String() != "" })
	return names
}

// RestartPart returns the settings of f that need a restart, in a File of
// their own; nil for nil. A process keeps it of the config it started
// with, rather than the whole config, to compare later ones with
// (NeedsRestart).
func RestartPart(f *File) *File {
	if f == nil {
		return nil
	}
	out := &File{}
	a, b := reflect.ValueOf(f).Elem(), reflect.ValueOf(out).Elem()
	for _, k := range topSection.keys {
		if k.restart {
			field(k, b).Set(field(k, a))
		}
	}
	return out
}

// NeedsRestart names the settings that need a restart and differ between a
// and b, as Change.NeedsRestart does. a may be a RestartPart.
func NeedsRestart(a, b *File) []string {
	_, r := changedKeys(a, b)
	return r
}

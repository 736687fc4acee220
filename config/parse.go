package config

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
)

// maxBodyFile bounds a fallback's bodyFile, in bytes.
const maxBodyFile = 1 << 20

// Load reads the config file at path and parses it (see Parse). An error
// reading the file is returned as it is, so errors.Is(err, fs.ErrNotExist)
// tells a missing file.
func Load(path string, opts Options) (*File, error) {
	data, err := readFile(path, maxFileSize)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, opts)
}

// Parse decodes data, the content of the config file at path, applies the
// defaults and the command-line overrides in opts, reads the fallbacks'
// body files (relative to path's directory) and validates the result.
//
// On any error it returns a nil *File and an Errors holding every problem
// found, each at its line and column; its Error method prints one
// FILE:LINE:COL: message line per problem, sorted by position. Warnings
// alone do not reject the file: they are in File.Warnings.
func Parse(path string, data []byte, opts Options) (*File, error) {
	return parse(path, data, opts, true)
}

// ParseText parses data as Parse does, but reads and checks no file the
// config names, for a config written for another machine (`sds-proxy
// validate -diff` compares the file in force at a running proxy, whose
// files may not exist here): a fallback's bodyFile is kept as written in
// Fallback.BodyFile with Body nil, and the TLS and ACME paths are kept as
// written, neither resolved nor checked. Two configs parsed by ParseText
// then compare their paths as text, not the files' contents.
func ParseText(path string, data []byte, opts Options) (*File, error) {
	return parse(path, data, opts, false)
}

// parse is Parse, which reads the files the config names when readOthers
// is true, and ParseText.
func parse(path string, data []byte, opts Options, readOthers bool) (*File, error) {
	p := &problems{file: path}
	d := decode(data, p)
	if d == nil {
		return nil, p.err()
	}
	sum := sha256.Sum256(data)
	d.f.Path, d.f.Hash, d.f.Raw = path, hex.EncodeToString(sum[:]), bytes.Clone(data)
	override(d.f, opts)
	if readOthers {
		readFiles(d, filepath.Dir(path), p)
	}
	validate(d, opts, p)
	if err := p.err(); err != nil {
		return nil, err
	}
	normalize(d.f)
	d.f.Warnings = p.warnings()
	return d.f, nil
}

// Default returns the config of a proxy run without a config file: the
// defaults, the overrides in opts, and no routes or points. opts.Upstream
// is then required.
func Default(opts Options) (*File, error) {
	p := &problems{}
	d := &decoded{f: newFile(), at: map[loc]span{}, bad: map[loc]bool{}}
	override(d.f, opts)
	validate(d, opts, p)
	if err := p.err(); err != nil {
		return nil, err
	}
	return d.f, nil
}

// readFiles reads the admin token and each fallback's bodyFile (into its
// Body), and resolves against dir and checks the other files the keys
// marked file name (keys.go): TLS, ACME and cluster files.
func readFiles(d *decoded, dir string, p *problems) {
	readAdminToken(d, dir, p)
	for i := range d.f.Points {
		pt := &d.f.Points[i]
		name := pt.Fallback.BodyFile
		if name == "" {
			continue
		}
		l := pl(pt, keyFallbackBodyFile)
		body, err := readFile(inDir(dir, name), maxBodyFile)
		if err != nil {
			p.add(d.at[l].val, "%s: %s", l.field, fileProblem(inDir(dir, name), err))
			continue
		}
		if !d.has(pl(pt, keyFallbackBody)) {
			pt.Fallback.Body = body
		}
	}
	topSection.walk(reflect.ValueOf(d.f).Elem(), loc{}, func(k *key, l loc, v reflect.Value) {
		if k.file && k != keyAdminTokenFile {
			checkFile(d, dir, p, k, l, v)
		}
	})
}

// checkFile resolves the path v of the file key k against dir and checks
// it. The TLS files are read once at start-up, so a missing one is an
// error. A missing cluster passwordFile is a warning: the proxy reads it
// for each connection (a Secret may appear later, and a config is often
// validated away from the pod that mounts it), and until it is there
// Redis refuses the proxy, whose points count on their shares.
func checkFile(d *decoded, dir string, p *problems, k *key, l loc, v reflect.Value) {
	cluster := slices.Contains(clusterTLSSection.keys, k) || k == keyClusterPasswordFile
	if v.String() == "" {
		if cluster && d.ok(l) {
			p.add(d.at[l].val, "%s is empty; give a file's path, or remove the key", l.field)
		}
		return
	}
	name := inDir(dir, v.String())
	v.SetString(resolve(dir, v.String()))
	var err error
	switch info, statErr := os.Stat(name); {
	case k == keyACMECARoot:
		err = checkCARoot(name)
	case k == keyACMEStorage:
		if statErr == nil && !info.IsDir() {
			p.add(d.at[l].val, "%s: %s is not a directory; give the directory for the ACME account and certificates (created if missing)", l.field, name)
		}
	case statErr != nil && k == keyClusterPasswordFile:
		p.warn(d.at[l].val, "%s: %s; until it is there Redis refuses this proxy and each point counts on its share", l.field, fileProblem(name, statErr))
	case statErr != nil:
		err = statErr
	case cluster && !info.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file", name)
	}
	if err != nil {
		p.add(d.at[l].val, "%s: %s", l.field, fileProblem(name, err))
	}
}

// checkCARoot reads a caRoot file: at least one PEM certificate, and
// nothing but certificates.
func checkCARoot(path string) error {
	data, err := readFile(path, maxBodyFile)
	if err != nil {
		return err
	}
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("%s holds a %q PEM block; give only the CA's certificates", path, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("%s: certificate %d: %w", path, n+1, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s holds no PEM certificate (-----BEGIN CERTIFICATE-----)", path)
	}
	return nil
}

// fileProblem describes an error reading a file the config names.
func fileProblem(path string, err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return path + " does not exist (a relative path starts at the config file's directory)"
	}
	return err.Error()
}

// resolve makes a relative path relative to dir, and absolute: the same
// file then has the same path whether the config file was named by a
// relative path (-config sds.yaml at start-up) or an absolute one (the
// watcher's), so a reload compares like with like, and a later change of
// working directory cannot move it.
func resolve(dir, path string) string {
	path = inDir(dir, path)
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// inDir makes a relative path relative to dir, as problems name it.
func inDir(dir, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// readFile reads the regular file at path, up to limit bytes. It checks
// the file is regular before opening it: opening a named pipe would block.
func readFile(path string, limit int64) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// Limits of the admin port's bearer token (File.AdminToken).
const (
	// MinAdminToken is the fewest characters a token may have: 16
	// random ones are beyond guessing through the admin port.
	MinAdminToken = 16
	// maxAdminTokenFile bounds the token file, in bytes.
	maxAdminTokenFile = 4 << 10
)

// readAdminToken reads adminTokenFile, relative to dir, into
// File.AdminToken and makes File.AdminTokenFile absolute.
func readAdminToken(d *decoded, dir string, p *problems) {
	f := d.f
	l := top(keyAdminTokenFile)
	if !d.ok(l) {
		return
	}
	at := d.at[l].val
	if f.AdminTokenFile == "" {
		p.add(at, "%s is empty; give the path of the file holding the admin port's token, or remove the key to leave the runtime switches off", l.field)
		return
	}
	name := inDir(dir, f.AdminTokenFile)
	f.AdminTokenFile = resolve(dir, f.AdminTokenFile)
	data, err := readFile(name, maxAdminTokenFile)
	if err != nil {
		p.add(at, "%s: %s", l.field, fileProblem(name, err))
		return
	}
	token := bytes.TrimSpace(data)
	if problem := checkAdminToken(token); problem != "" {
		p.add(at, "%s: %s %s; generate one with: head -c 32 /dev/urandom | base64 > %s", l.field, name, problem, name)
		return
	}
	f.AdminToken = token
}

// checkAdminToken returns what is wrong with a token, or "".
func checkAdminToken(token []byte) string {
	if len(token) < MinAdminToken {
		return fmt.Sprintf("holds a token of %d characters; it needs at least %d", len(token), MinAdminToken)
	}
	for _, c := range token {
		if c <= ' ' || c > '~' {
			return fmt.Sprintf("holds a token with %q in it; a token is visible ASCII characters only, on one line", rune(c))
		}
	}
	return ""
}

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

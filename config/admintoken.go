package config

import (
	"bytes"
	"fmt"
)

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
	if !d.has(l) || d.bad[l] {
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

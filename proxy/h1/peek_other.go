//go:build !linux

package h1

// peekSupported is false where no non-blocking peek is wired: there the
// Transport sends every request to its http.Transport, which keeps a
// reader on each idle connection instead.
const peekSupported = false

// peekFD finds nothing it can vouch for, so no connection counts as quiet.
func (c *conn) peekFD(fd uintptr) bool {
	c.peekSays = false
	return true
}

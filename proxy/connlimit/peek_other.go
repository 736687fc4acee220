//go:build !linux

package connlimit

// pending reports whether bytes the server has not read yet wait in c's
// socket. Only Linux looks; elsewhere nothing is pending, and a waiting
// connection is evicted as if its request had not arrived.
func (c *conn) pending() bool { return false }

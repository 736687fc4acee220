//go:build linux

package connlimit

import (
	"syscall"
	"unsafe"
)

// pending reports whether bytes the server has not read yet wait in c's
// socket: a request that has arrived. It looks with recv(MSG_PEEK |
// MSG_DONTWAIT) on the descriptor through RawConn.Control, which does not
// wait for the server's own read of the connection to return. A socket
// with nothing to read, at its end (the client closed it) or failing, and
// a connection with no socket, have nothing pending.
func (c *conn) pending() bool {
	if c.raw == nil {
		return false
	}
	var buf [1]byte
	var n uintptr
	var errno syscall.Errno
	if err := c.raw.Control(func(fd uintptr) {
		n, _, errno = syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&buf[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	}); err != nil {
		return false
	}
	return errno == 0 && n > 0
}

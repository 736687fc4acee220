//go:build linux

package h1

import (
	"syscall"
	"unsafe"
)

// peekSupported is true where conn.peekFD can look at a socket without
// reading from it or blocking.
const peekSupported = true

// peekFD looks at the socket fd for one byte without taking it and without
// waiting (recv with MSG_PEEK and MSG_DONTWAIT): EAGAIN means nothing has
// arrived, which it records in c.peekSays. A byte, an EOF (0) or any
// other error leaves peekSays false. It returns true: syscall.RawConn.Read
// is not to wait for the socket to be readable.
func (c *conn) peekFD(fd uintptr) bool {
	_, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&c.peekBuf[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	c.peekSays = errno == syscall.EAGAIN
	return true
}

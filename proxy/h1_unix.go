package proxy

import (
	"errors"
	"syscall"
)

// isConnReset reports whether err is a connection reset or a broken pipe.
func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

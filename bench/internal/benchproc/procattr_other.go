//go:build !linux

package benchproc

import "syscall"

// sysProcAttr is nil off Linux: there, only the harness's own stop ends
// its children.
func sysProcAttr() *syscall.SysProcAttr { return nil }

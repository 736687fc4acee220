package benchproc

import "syscall"

// sysProcAttr asks Linux to send a child SIGTERM when the harness dies
// without stopping it (killed with SIGKILL, say), so no process outlives
// a sitting.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} }

// Command pause is the pod sandbox's process for the test cluster: the
// kubelet's pause image (registry.k8s.io/pause) is out of reach here, so
// containerd's sandbox_image is built from this. Like the real one it holds
// the pod's namespaces open, reaps the zombies it inherits as the pod's
// PID 1, and exits 0 on SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

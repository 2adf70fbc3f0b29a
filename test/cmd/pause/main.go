// Command pause is the sandbox ("pause") container of the e2e suite's real
// node: it holds a pod's namespaces while the pod lives, as
// registry.k8s.io/pause does, which these machines cannot pull. It reaps
// the zombies it inherits (it is PID 1 of the pod when the pod shares its
// process namespace) and exits on SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

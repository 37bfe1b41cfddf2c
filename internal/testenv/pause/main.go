// Command pause is the sandbox image of the test node's pods: it holds a
// pod's namespaces open, reaps what is reparented to it, and ends on SIGINT
// or SIGTERM. Kubernetes' own pause image is a prebuilt download, which the
// test node cannot have, so it is built here from this one file.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-children:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}

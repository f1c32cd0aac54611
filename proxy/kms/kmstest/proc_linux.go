// The dev server dies with the test binary that started it: a test that
// panics or is killed leaves no OpenBao behind.

package kmstest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill the server when the thread that
// started it exits.  Main starts it from the test binary's main
// goroutine after runtime.LockOSThread, so that thread lives as long as
// the binary (Go does not otherwise retire threads that run goroutines).
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

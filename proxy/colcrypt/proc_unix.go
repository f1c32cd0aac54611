//go:build unix

// Running the CMK command in its own process group, so that a timeout
// kills the shell's children too (a "sleep" left behind would hold our
// stdout and stderr open).

package colcrypt

import (
	"os/exec"
	"syscall"
)

func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

//go:build !unix

// Elsewhere a timeout kills the shell only (see proc_unix.go).

package colcrypt

import "os/exec"

func killGroupOnCancel(cmd *exec.Cmd) {}

//go:build !linux

package kmstest

import "os/exec"

// setDeathSignal: no parent-death signal here; Stop must be called.
func setDeathSignal(*exec.Cmd) {}

//go:build unix

package kms

import (
	"io/fs"
	"os"
	"syscall"
)

// fileOwner returns the owner of a file and the effective user of this
// process.
func fileOwner(fi fs.FileInfo) (owner, me int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), os.Geteuid(), true
}

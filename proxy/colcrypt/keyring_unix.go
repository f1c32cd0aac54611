//go:build unix

// A tenant keyring file replaced keeps its group (Keyring.Write), so
// that the proxy's user still reads it.

package colcrypt

import (
	"os"
	"syscall"
)

// keepGroup gives f the group of the file fi describes.
func keepGroup(f *os.File, fi os.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return f.Chown(-1, int(st.Gid))
	}
	return nil
}

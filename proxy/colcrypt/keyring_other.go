//go:build !unix

// Elsewhere a replaced tenant keyring keeps no group (see keyring_unix.go).

package colcrypt

import "os"

// keepGroup: no groups to keep here.
func keepGroup(*os.File, os.FileInfo) error { return nil }

package wire

import "time"

// SetCatalogIdle sets how long a catalog connection may stay unused, for
// the tests of package wire_test; it returns the previous value.
func SetCatalogIdle(d time.Duration) time.Duration {
	old := catalogIdle
	catalogIdle = d
	return old
}

// ServeTest starts a proxy with cfg for the length of a test (serveTest).
var ServeTest = serveTest

// Package metrics is what pgcipher-proxy tells Prometheus: client
// connections (open now, and how each ended), statements by what the
// proxy did with them (passed through, rewritten, computed in the proxy,
// refused — by SQLSTATE), their latency, the errors clients got (the
// proxy's and the server's, by SQLSTATE), the bytes on the client and the
// server sockets, and SIGHUP reloads.  It is a thin layer over
// github.com/prometheus/client_golang: New registers the collectors on a
// registry of its own (with the Go runtime's and the process's), Handler
// serves it in Prometheus's text format.
//
// Every method is safe on a nil *Metrics, which counts nothing: package
// wire calls them where it decides each outcome (the client loop when it
// plans or refuses a statement, the relay when its answer ends, the
// connection handler when a connection ends) without asking whether
// metrics are on, and wraps each socket with Client or Server to count its
// bytes.  cmd/pgcipher-proxy makes one Metrics when --metrics is given and
// serves Handler at /metrics.  docs/design.md, section 15.11, lists the
// metrics.
package metrics

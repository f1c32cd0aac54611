package metrics

import (
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Outcome is what the proxy did with one statement: a simple Query
// message, an Execute, or an extended-protocol message it refused.
type Outcome string

const (
	// Passed: the statement names no relation with encrypted columns and
	// went to the server as the client sent it.
	Passed Outcome = "passed"
	// Rewritten: the statement reads or writes a relation with encrypted
	// columns: its literals and parameters were encrypted, its results
	// decrypted (COPY rows too).
	Rewritten Outcome = "rewritten"
	// Computed: the proxy computed its results or its UPDATE's new values
	// from what the server returned (design 15.8).
	Computed Outcome = "computed"
	// Refused: the proxy answered with its own error; the statement never
	// reached the server.
	Refused Outcome = "refused"
)

var outcomes = []Outcome{Passed, Rewritten, Computed, Refused}

// End is how a client connection ended.
type End string

const (
	ClientClosed   End = "client_closed"   // the client said Terminate or went away
	ServerClosed   End = "server_closed"   // the server closed its connection
	Shutdown       End = "shutdown"        // the proxy closed it: shutting down
	Cancel         End = "cancel_request"  // a CancelRequest, forwarded
	StartupFailed  End = "startup_failed"  // no startup message: TLS or protocol failure
	UpstreamFailed End = "upstream_failed" // the server could not be reached
	AuthFailed     End = "auth_failed"     // authentication failed or was cut short
	CatalogFailed  End = "catalog_failed"  // the encrypted-column catalog could not be read
	Failed         End = "error"           // any other error
)

var ends = []End{ClientClosed, ServerClosed, Shutdown, Cancel, StartupFailed, UpstreamFailed, AuthFailed, CatalogFailed, Failed}

// Source says who made an error a client got.
type Source string

const (
	Proxy  Source = "proxy"  // the proxy's own: a refusal, a value that does not decrypt, a computation
	Server Source = "server" // the server's, relayed
)

// durationBuckets: statements through the proxy take from a tenth of a
// millisecond (a point query on a Unix socket) to seconds.
var durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Metrics holds the proxy's collectors.
type Metrics struct {
	reg         *prometheus.Registry
	open        prometheus.Gauge
	connections *prometheus.CounterVec
	statements  *prometheus.CounterVec
	durations   *prometheus.HistogramVec
	errors      *prometheus.CounterVec
	clientIn    prometheus.Counter
	clientOut   prometheus.Counter
	serverIn    prometheus.Counter
	serverOut   prometheus.Counter
	reloads     *prometheus.CounterVec
	poolWait    prometheus.Histogram // transaction mode: Pools
	audited     *prometheus.CounterVec
	// the series of each outcome but Refused (whose count has a SQLSTATE
	// label), looked up once and read only after New: a statement counted
	// costs no label hashing, lookup or lock of the vectors
	byOutcome map[Outcome]outcomeSeries
}

type outcomeSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// New makes the collectors and registers them, with the Go runtime's and
// the process's, on a registry of their own.
func New() *Metrics {
	const ns = "pgcipher_proxy"
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		open: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "client_connections",
			Help: "Client connections open now (in startup, authentication or a session)."}),
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "client_connections_total",
			Help: "Client connections closed, by how they ended."}, []string{"outcome"}),
		statements: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "statements_total",
			Help: "Statements (simple Query messages and Executes) by what the proxy did with them; sqlstate: the proxy's error of a refused one."},
			[]string{"outcome", "sqlstate"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "statement_duration_seconds",
			Help:    "From the client's message to the end of its answer, by what the proxy did with the statement.",
			Buckets: durationBuckets}, []string{"outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "errors_total",
			Help: "Errors the clients got in answer to statements, by who made them and SQLSTATE."}, []string{"source", "sqlstate"}),
		clientIn: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "client_received_bytes_total",
			Help: "Bytes read from client sockets (TLS records included)."}),
		clientOut: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "client_sent_bytes_total",
			Help: "Bytes written to client sockets (TLS records included)."}),
		serverIn: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "server_received_bytes_total",
			Help: "Bytes read from server sockets (TLS records included)."}),
		serverOut: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "server_sent_bytes_total",
			Help: "Bytes written to server sockets (TLS records included)."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "config_reloads_total",
			Help: "SIGHUP reloads of the configuration file, by result (failed: the running configuration stays)."}, []string{"result"}),
		audited: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "audited_values_total",
			Help: "Values of encrypted columns the audit log recorded as decrypted or encrypted, by role and column (design 15.15)."},
			[]string{"role", "column", "direction"}),
	}
	m.reg.MustRegister(m.open, m.connections, m.statements, m.durations, m.errors,
		m.clientIn, m.clientOut, m.serverIn, m.serverOut, m.reloads, m.audited,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// every series that exists from the start shows 0 rather than nothing
	for _, e := range ends {
		m.connections.WithLabelValues(string(e))
	}
	m.byOutcome = make(map[Outcome]outcomeSeries, len(outcomes))
	for _, o := range outcomes {
		d := m.durations.WithLabelValues(string(o))
		if o != Refused {
			m.byOutcome[o] = outcomeSeries{count: m.statements.WithLabelValues(string(o), ""), duration: d}
		}
	}
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("failed")
	return m
}

// Handler serves the metrics in Prometheus's exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Opened: a client connection was accepted.
func (m *Metrics) Opened() {
	if m != nil {
		m.open.Inc()
	}
}

// Closed: a client connection ended.
func (m *Metrics) Closed(e End) {
	if m != nil {
		m.open.Dec()
		m.connections.WithLabelValues(string(e)).Inc()
	}
}

// Statement counts a statement that ended after d; sqlstate is the
// proxy's error of a refused one ("" otherwise).
func (m *Metrics) Statement(o Outcome, sqlstate string, d time.Duration) {
	if m == nil {
		return
	}
	if series, ok := m.byOutcome[o]; ok {
		series.count.Inc()
		series.duration.Observe(d.Seconds())
		return
	}
	if o != Refused {
		sqlstate = ""
	}
	m.statements.WithLabelValues(string(o), sqlstate).Inc()
	m.durations.WithLabelValues(string(o)).Observe(d.Seconds())
}

// Audited counts the values of a column a role decrypted and encrypted
// in a statement the audit log recorded.
func (m *Metrics) Audited(role, column string, decrypted, encrypted int64) {
	if m == nil {
		return
	}
	if decrypted > 0 {
		m.audited.WithLabelValues(role, column, "decrypted").Add(float64(decrypted))
	}
	if encrypted > 0 {
		m.audited.WithLabelValues(role, column, "encrypted").Add(float64(encrypted))
	}
}

// Error counts an error a client got in answer to a statement.
func (m *Metrics) Error(src Source, sqlstate string) {
	if m != nil {
		m.errors.WithLabelValues(string(src), sqlstate).Inc()
	}
}

// Reload counts a SIGHUP reload of the configuration file.
func (m *Metrics) Reload(ok bool) {
	if m == nil {
		return
	}
	result := "ok"
	if !ok {
		result = "failed"
	}
	m.reloads.WithLabelValues(result).Inc()
}

// Client wraps a client's socket so that its bytes are counted.
func (m *Metrics) Client(c net.Conn) net.Conn {
	if m == nil {
		return c
	}
	return &countedConn{Conn: c, in: m.clientIn, out: m.clientOut}
}

// Server wraps a server socket so that its bytes are counted.
func (m *Metrics) Server(c net.Conn) net.Conn {
	if m == nil {
		return c
	}
	return &countedConn{Conn: c, in: m.serverIn, out: m.serverOut}
}

// countedConn counts what is read from and written to a socket.
type countedConn struct {
	net.Conn
	in, out prometheus.Counter
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.in.Add(float64(n))
	}
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.out.Add(float64(n))
	}
	return n, err
}

// PoolState is one pool's state in transaction mode.
type PoolState struct {
	Database, User                string
	ClientsActive, ClientsWaiting int
	ServersActive, ServersIdle    int
}

// poolCollector reports the pools' states when the metrics are read.
type poolCollector struct {
	states                                       func() []PoolState
	clients, waiting, serversActive, serversIdle *prometheus.Desc
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.clients
	ch <- c.waiting
	ch <- c.serversActive
	ch <- c.serversIdle
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.states() {
		ch <- prometheus.MustNewConstMetric(c.clients, prometheus.GaugeValue, float64(p.ClientsActive), p.Database, p.User)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(p.ClientsWaiting), p.Database, p.User)
		ch <- prometheus.MustNewConstMetric(c.serversActive, prometheus.GaugeValue, float64(p.ServersActive), p.Database, p.User)
		ch <- prometheus.MustNewConstMetric(c.serversIdle, prometheus.GaugeValue, float64(p.ServersIdle), p.Database, p.User)
	}
}

// Pools registers the pools' gauges (transaction mode): clients
// connected and waiting for a server connection, server connections
// attached and idle, per database and user; and the wait histogram.
func (m *Metrics) Pools(states func() []PoolState) {
	if m == nil {
		return
	}
	const ns = "pgcipher_proxy"
	labels := []string{"database", "user"}
	m.reg.MustRegister(&poolCollector{states: states,
		clients:       prometheus.NewDesc(ns+"_pool_clients", "Clients connected, per pool (transaction mode).", labels, nil),
		waiting:       prometheus.NewDesc(ns+"_pool_clients_waiting", "Clients waiting for a server connection, per pool.", labels, nil),
		serversActive: prometheus.NewDesc(ns+"_pool_servers_active", "Server connections serving a client's transaction, per pool.", labels, nil),
		serversIdle:   prometheus.NewDesc(ns+"_pool_servers_idle", "Server connections idle in the pool, per pool.", labels, nil)})
	m.poolWait = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "pool_wait_seconds",
		Help: "How long clients waited for a server connection when none was idle (transaction mode).", Buckets: durationBuckets})
	m.reg.MustRegister(m.poolWait)
}

// PoolWait counts a client's wait for a server connection.
func (m *Metrics) PoolWait(d time.Duration) {
	if m != nil && m.poolWait != nil {
		m.poolWait.Observe(d.Seconds())
	}
}

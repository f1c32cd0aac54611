package metrics_test

import (
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgcipher/pgcipher/proxy/metrics"
)

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func TestMetrics(t *testing.T) {
	m := metrics.New()
	m.Opened()
	m.Opened()
	m.Closed(metrics.ClientClosed)
	m.Statement(metrics.Passed, "", time.Millisecond)
	m.Statement(metrics.Passed, "PC001", time.Millisecond) // only a refusal has one
	m.Statement(metrics.Rewritten, "", 2*time.Millisecond)
	m.Statement(metrics.Computed, "", 3*time.Millisecond)
	m.Statement(metrics.Refused, "PC001", 50*time.Microsecond)
	m.Statement(metrics.Refused, "PC001", 50*time.Microsecond)
	m.Statement(metrics.Refused, "PC004", 50*time.Microsecond)
	m.Error(metrics.Server, "23505")
	m.Error(metrics.Proxy, "PC001")
	m.Reload(true)
	m.Reload(false)

	// the byte counters, through a pair of sockets
	a, b := net.Pipe()
	ca, cb := m.Client(a), m.Server(b)
	go func() {
		ca.Write([]byte("hello"))
		ca.Close()
	}()
	if got, _ := io.ReadAll(cb); string(got) != "hello" {
		t.Fatalf("through the counted pipe: %q", got)
	}
	cb.Close()

	out := scrape(t, m)
	for _, want := range []string{
		"pgcipher_proxy_client_connections 1\n",
		`pgcipher_proxy_client_connections_total{outcome="client_closed"} 1` + "\n",
		`pgcipher_proxy_client_connections_total{outcome="upstream_failed"} 0` + "\n",
		`pgcipher_proxy_statements_total{outcome="passed",sqlstate=""} 2` + "\n",
		`pgcipher_proxy_statements_total{outcome="rewritten",sqlstate=""} 1` + "\n",
		`pgcipher_proxy_statements_total{outcome="computed",sqlstate=""} 1` + "\n",
		`pgcipher_proxy_statements_total{outcome="refused",sqlstate="PC001"} 2` + "\n",
		`pgcipher_proxy_statements_total{outcome="refused",sqlstate="PC004"} 1` + "\n",
		`pgcipher_proxy_statement_duration_seconds_bucket{outcome="refused",le="0.0001"} 3` + "\n",
		`pgcipher_proxy_statement_duration_seconds_count{outcome="computed"} 1` + "\n",
		`pgcipher_proxy_errors_total{source="server",sqlstate="23505"} 1` + "\n",
		`pgcipher_proxy_errors_total{source="proxy",sqlstate="PC001"} 1` + "\n",
		"pgcipher_proxy_client_sent_bytes_total 5\n",
		"pgcipher_proxy_server_received_bytes_total 5\n",
		"pgcipher_proxy_client_received_bytes_total 0\n",
		`pgcipher_proxy_config_reloads_total{result="failed"} 1` + "\n",
		"go_goroutines ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// refused is the only outcome with a SQLSTATE
	if strings.Contains(out, `outcome="passed",sqlstate="P`) {
		t.Error("a SQLSTATE on a statement that was not refused")
	}
}

// A statement that was not refused is counted without allocating: its
// series are looked up once, in New.
func TestStatementAllocs(t *testing.T) {
	m := metrics.New()
	if n := testing.AllocsPerRun(100, func() { m.Statement(metrics.Passed, "", time.Millisecond) }); n != 0 {
		t.Fatalf("%v allocations per statement", n)
	}
}

// A nil *Metrics counts nothing and wraps nothing.
func TestNil(t *testing.T) {
	var m *metrics.Metrics
	m.Opened()
	m.Closed(metrics.Failed)
	m.Statement(metrics.Passed, "", time.Second)
	m.Error(metrics.Proxy, "PC002")
	m.Reload(true)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if m.Client(a) != a || m.Server(b) != b {
		t.Error("a nil Metrics wrapped a socket")
	}
}

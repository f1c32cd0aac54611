// Tests of pgcipher-proxy's command line, config file and signals; no
// server needed (the upstream is unreachable on purpose).  What the
// service does with real sessions is package wire's to test.

package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Every setting is a flag, a config file name, in --help and in the
// example config file; the file sets each, and a flag wins over it.
func TestSettingsEverywhere(t *testing.T) {
	example, err := os.ReadFile("proxy.conf.example")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var file strings.Builder
	for _, x := range table {
		if !strings.Contains(usage, "--"+x.name+" ") && !strings.Contains(usage, "--"+x.name+",") {
			t.Errorf("--help does not mention --%s", x.name)
		}
		if !strings.Contains(string(example), "\n# "+x.name+" = ") {
			t.Errorf("proxy.conf.example has no line \"# %s = ...\"", x.name)
		}
		fmt.Fprintf(&file, "%s = 'value of %s'\n", x.name, x.name)
	}
	conf := filepath.Join(dir, "proxy.conf")
	os.WriteFile(conf, []byte("# a comment\n\n"+file.String()), 0o600)
	st, err := parse([]string{"--config", conf, "--cmk-command", "", "--tls-cert", "from the flag"})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range table {
		want := "value of " + x.name
		switch x.name {
		case "cmk-command":
			want = ""
		case "tls-cert":
			want = "from the flag"
		}
		if got := *x.field(st); got != want {
			t.Errorf("%s = %q, want %q", x.name, got, want)
		}
	}
	// the example, as shipped, is all comments
	os.WriteFile(conf, example, 0o600)
	st, err = parse([]string{"--config", conf, "--upstream", "host=/tmp", "--cmk-file", "k"})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range table {
		if got := *x.field(st); got != x.def && x.name != "upstream" && x.name != "cmk-file" {
			t.Errorf("the example sets %s = %q", x.name, got)
		}
	}
}

// files makes a CMK file, a TLS pair and a CA in a temporary directory.
func files(t *testing.T) string {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "cmk.hex"), []byte(hex.EncodeToString(make([]byte, 32))+"\n"), 0o600)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "proxy"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	os.WriteFile(filepath.Join(dir, "proxy.crt"), certPEM, 0o644)
	os.WriteFile(filepath.Join(dir, "ca.crt"), certPEM, 0o644)
	os.WriteFile(filepath.Join(dir, "proxy.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "users"), []byte("\"app\" \"secret\"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "badusers"), []byte("app secret\n"), 0o600)
	return dir
}

func TestCheckConfig(t *testing.T) {
	dir := files(t)
	base := []string{"--upstream", "host=/nonexistent port=5432", "--cmk-file", filepath.Join(dir, "cmk.hex"), "--check-config"}
	tls := []string{"--tls-cert", filepath.Join(dir, "proxy.crt"), "--tls-key", filepath.Join(dir, "proxy.key")}
	conf := filepath.Join(dir, "proxy.conf")
	os.WriteFile(conf, []byte("upstream = \"host=/nonexistent port=5432\"\ncmk-file = "+filepath.Join(dir, "cmk.hex")+"\nmetrics = :9433\n"), 0o600)
	bad := filepath.Join(dir, "bad.conf")
	os.WriteFile(bad, []byte("upstream = host=/tmp\nno-such-setting = 1\n"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		want string // the error; "": OK
	}{
		{"flags", base, ""},
		{"config file", []string{"--config", conf, "--check-config"}, ""},
		{"TLS", append(append(base, tls...), "--tls-client-ca", filepath.Join(dir, "ca.crt"), "--upstream-certs", dir), ""},
		{"everything else", append(base, "--log-level", "debug", "--log-format", "json", "--metrics", "127.0.0.1:0",
			"--pprof", "[::1]:6060", "--shutdown-timeout", "2m", "--record", filepath.Join(dir, "rec"), "--catalog", "user=cat"), ""},
		{"CMK command", []string{"--upstream", "host=/tmp", "--check-config", "--cmk-command", "cat " + filepath.Join(dir, "cmk.hex")}, ""},
		{"no upstream", []string{"--cmk-file", "k", "--check-config"}, "--upstream is required"},
		{"two CMKs", append(base, "--cmk-command", "true"), "exactly one of --cmk-file and --cmk-command"},
		{"no CMK file", []string{"--upstream", "host=/tmp", "--cmk-file", filepath.Join(dir, "none"), "--check-config"}, "no such file"},
		{"not a CMK", []string{"--upstream", "host=/tmp", "--cmk-file", filepath.Join(dir, "empty"), "--check-config"}, "the column master key"},
		{"CMK command fails", []string{"--upstream", "host=/tmp", "--cmk-command", "exit 3", "--check-config"}, "the column master key"},
		{"listen", append(base, "--listen", "localhost"), "--listen: address localhost: missing port"},
		{"listen port", append(base, "--listen", "127.0.0.1:99999"), "--listen: port"},
		{"metrics", append(base, "--metrics", "9433"), "--metrics:"},
		{"log level", append(base, "--log-level", "loud"), "--log-level:"},
		{"log format", append(base, "--log-format", "xml"), "--log-format:"},
		{"shutdown timeout", append(base, "--shutdown-timeout", "soon"), "--shutdown-timeout:"},
		{"upstream", append(base, "--upstream", "port=notanumber"), "--upstream:"},
		{"catalog", append(base, "--catalog", "port=notanumber"), "--catalog:"},
		{"TLS key missing", append(base, "--tls-cert", filepath.Join(dir, "proxy.crt")), "--tls-cert and --tls-key go together"},
		{"TLS pair", append(base, "--tls-cert", filepath.Join(dir, "proxy.crt"), "--tls-key", filepath.Join(dir, "empty")), "--tls-cert, --tls-key:"},
		{"client CA", append(append(base, tls...), "--tls-client-ca", filepath.Join(dir, "empty")), "--tls-client-ca: no certificate"},
		{"client CA without TLS", append(base, "--tls-client-ca", filepath.Join(dir, "ca.crt")), "--tls-client-ca needs"},
		{"upstream certs", append(base, "--upstream-certs", filepath.Join(dir, "none")), "--upstream-certs:"},
		{"record", append(base, "--record", filepath.Join(dir, "none", "rec")), "--record:"},
		{"config file missing", []string{"--config", filepath.Join(dir, "none"), "--check-config"}, "--config:"},
		{"unknown setting", []string{"--config", bad, "--check-config"}, "bad.conf:2: expected \"name = value\""},
		{"argument", append(base, "extra"), "unexpected argument"},
		{"transaction mode", append(base, "--pool-mode", "transaction", "--auth-file", filepath.Join(dir, "users"),
			"--default-pool-size", "5", "--query-wait-timeout", "30", "--server-lifetime", "1h"), ""},
		{"pool mode", append(base, "--pool-mode", "statement"), "--pool-mode:"},
		{"auth type", append(base, "--auth-type", "md5"), "--auth-type:"},
		{"SCRAM without auth file", append(base, "--pool-mode", "transaction"), "needs --auth-file or --auth-user"},
		{"auth query alone", append(base, "--pool-mode", "transaction", "--auth-user", "pgbouncer",
			"--auth-query", "SELECT usename, passwd FROM lookup($1)"), ""},
		{"cert without CA", append(base, "--pool-mode", "transaction", "--auth-type", "cert"), "needs --tls-client-ca"},
		{"pool size", append(base, "--default-pool-size", "0"), "--default-pool-size"},
		{"count", append(base, "--max-client-conn", "many"), "--max-client-conn:"},
		{"duration", append(base, "--query-wait-timeout", "soon"), "--query-wait-timeout:"},
		{"auth file", append(base, "--auth-file", filepath.Join(dir, "badusers")), "--auth-file: auth file"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(tc.args, nil, &stdout, &stderr)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && !strings.HasPrefix(stdout.String(), "pgcipher-proxy: configuration OK") || strings.Count(stdout.String(), "\n") > 1:
			t.Errorf("%s: printed %q", tc.name, stdout.String())
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		case tc.want != "" && stdout.Len() > 0:
			t.Errorf("%s: failed and printed %q", tc.name, stdout.String())
		}
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"host=/tmp port=5432", "host=/tmp port=5432"},
		{"host=db password=s3cret user=u", "host=db password=xxxxx user=u"},
		{"host=db password = 'a b\\' c' sslpassword=x", "host=db password = xxxxx sslpassword=xxxxx"},
		{"postgres://u:s3cret@db:5432/d?sslmode=require", "postgres://u:xxxxx@db:5432/d?sslmode=require"},
		{"postgresql://db/d?password=s3cret", "postgresql://db/d?password=xxxxx"},
	} {
		if got := redact(tc.in); got != tc.want {
			t.Errorf("redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// logLines reads JSON log lines as they come.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// wait returns the first line whose msg is msg, from line from on, and
// the index of the line after it.
func (l *logLines) wait(t *testing.T, from int, msg string) (map[string]any, int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		text := l.buf.String()
		l.mu.Unlock()
		sc := bufio.NewScanner(strings.NewReader(text))
		for i := 0; sc.Scan(); i++ {
			if i < from {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
			}
			if m["msg"] == msg {
				return m, i + 1
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q after line %d:\n%s", msg, from, text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scrapeValue reads one sample of a /metrics page.
func scrapeValue(t *testing.T, url, series string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return v
		}
	}
	return "(none)"
}

// The service end to end, without a server: JSON logs, metrics, SIGHUP
// (a live change applied, one waiting for a restart reported, a broken
// file refused) and SIGTERM.
func TestSignals(t *testing.T) {
	dir := files(t)
	conf := filepath.Join(dir, "proxy.conf")
	write := func(extra string) {
		os.WriteFile(conf, []byte("listen = 127.0.0.1:0\nmetrics = 127.0.0.1:0\nupstream = host="+dir+" port=1\n"+
			"cmk-file = "+filepath.Join(dir, "cmk.hex")+"\nlog-format = json\n"+extra), 0o600)
	}
	write("")
	sigs := make(chan os.Signal, 1)
	var log logLines
	done := make(chan error, 1)
	go func() { done <- run([]string{"--config", conf}, sigs, &bytes.Buffer{}, &log) }()
	m, _ := log.wait(t, 0, "serving metrics")
	url := fmt.Sprintf("http://%s/metrics", m["address"])
	m, line := log.wait(t, 0, "listening")
	addr := m["address"].(string)

	// a client whose server cannot be reached
	connectOnce := func() string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		f := pgproto3.NewFrontend(c, c)
		f.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": "u"}})
		f.Flush()
		msg, err := f.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			return e.Code
		}
		return fmt.Sprintf("%T", msg)
	}
	if code := connectOnce(); code != "08006" {
		t.Errorf("no server: %s, want 08006", code)
	}
	log.wait(t, line, "connection closed") // at warn
	if v := scrapeValue(t, url, `pgcipher_proxy_client_connections_total{outcome="upstream_failed"}`); v != "1" {
		t.Errorf("upstream_failed connections: %s, want 1", v)
	}

	// SIGHUP: log-level is live, listen waits for a restart
	write("log-level = debug\nshutdown-timeout = 5s\n")
	conf2 := strings.Replace(readFile(t, conf), "listen = 127.0.0.1:0", "listen = 127.0.0.1:1", 1)
	os.WriteFile(conf, []byte(conf2), 0o600)
	sigs <- syscall.SIGHUP
	m, line = log.wait(t, line, "SIGHUP: configuration reloaded")
	if got := fmt.Sprint(m["changed"]); got != "[log-level shutdown-timeout]" {
		t.Errorf("changed: %s, want [log-level shutdown-timeout]", got)
	}
	m, line = log.wait(t, line, "SIGHUP: these settings change only at a restart; the running values stay")
	if got := fmt.Sprint(m["settings"]); got != "[listen]" {
		t.Errorf("waiting for a restart: %s, want [listen]", got)
	}
	if v := scrapeValue(t, url, `pgcipher_proxy_config_reloads_total{result="ok"}`); v != "1" {
		t.Errorf("reloads: %s, want 1", v)
	}
	connectOnce()
	m, line = log.wait(t, line, "connection closed")
	if m["level"] != "WARN" {
		t.Errorf("connection closed at %v", m["level"])
	}
	// the debug level applies: a connection that is refused at once (a
	// CancelRequest) now shows
	c, err := net.Dial("tcp", addr) // still the old address: listen waits for a restart
	if err != nil {
		t.Fatal(err)
	}
	f := pgproto3.NewFrontend(c, c)
	f.Send(&pgproto3.CancelRequest{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	f.Flush()
	c.Close()
	m, line = log.wait(t, line, "connection closed")
	if m["level"] != "DEBUG" || m["outcome"] != "cancel_request" {
		t.Errorf("after SIGHUP with log-level = debug: %v", m)
	}

	// a file that does not load: the running configuration stays
	write("tls-cert = " + filepath.Join(dir, "none") + "\ntls-key = " + filepath.Join(dir, "proxy.key") + "\n")
	sigs <- syscall.SIGHUP
	m, line = log.wait(t, line, "SIGHUP: configuration not reloaded, the running one stays")
	if !strings.Contains(fmt.Sprint(m["err"]), "--tls-cert, --tls-key") {
		t.Errorf("the refused reload says %v", m["err"])
	}
	if v := scrapeValue(t, url, `pgcipher_proxy_config_reloads_total{result="failed"}`); v != "1" {
		t.Errorf("failed reloads: %s, want 1", v)
	}

	// SIGTERM: nothing open, so it ends at once
	sigs <- syscall.SIGTERM
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not stop the proxy")
	}
	log.wait(t, line, "shut down: every session ended")
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("the proxy still accepts connections after SIGTERM")
	}
}

func readFile(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A client's startup in transaction mode (design 15.14): the proxy logs
// it in, tells it the pool's server parameters with its own settings
// over them and a cancel key of the proxy's, and maps that key to the
// backend that runs the client's transaction when a cancel comes.

package wire

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/metrics"
)

// protocol30 is protocol version 3.0, what the proxy speaks with pooled
// server connections.
const protocol30 = 3 << 16

func (s *Server) startupPooled(cc *clientConn, b *pgproto3.Backend, client net.Conn, c *peekedConn, version uint32,
	params map[string]string, certUser string) (*session, map[string]string, metrics.End, error) {
	cfg := s.PoolConfig()
	n := s.clients.Add(1)
	counted := true
	defer func() {
		if counted {
			s.clients.Add(-1)
		}
	}()
	if cfg.MaxClientConn > 0 && n > int64(cfg.MaxClientConn) {
		return nil, nil, metrics.StartupFailed, fatalHint(b, "53300", "pgcipher-proxy: no more connections allowed (max-client-conn)",
			"Raise max-client-conn, or connect fewer clients.")
	}
	if err := s.authenticateClient(b, params["database"], params["user"], certUser); err != nil {
		return nil, nil, metrics.AuthFailed, err
	}
	p := s.poolFor(params["database"], params["user"])
	ps, err := p.serverParams()
	if err != nil {
		return nil, nil, metrics.UpstreamFailed, serverFatal(b, err)
	}
	// a client asking for a newer protocol, or for protocol options, is
	// told what the proxy speaks (PostgreSQL's NegotiateProtocolVersion)
	var unknown []string
	for k := range params {
		if strings.HasPrefix(k, "_pq_.") {
			unknown = append(unknown, k)
		}
	}
	b.Send(&pgproto3.AuthenticationOk{})
	if version != protocol30 || len(unknown) > 0 {
		b.Send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: unknown})
	}
	for k, v := range ps {
		if cv, ok := params[k]; ok {
			v = cv
		}
		b.Send(&pgproto3.ParameterStatus{Name: k, Value: v})
	}
	sess := newSession(s, &conns{r: client, w: client}, nil, params["database"], params["user"])
	sess.clientSock = c
	sess.clientAddr, sess.certIdentity = c.RemoteAddr().String(), certUser
	sess.pooled = newPooledSession(p, params)
	pid, key := s.newCancelKey(sess)
	b.Send(&pgproto3.BackendKeyData{ProcessID: pid, SecretKey: key})
	if err := b.Flush(); err != nil {
		s.dropCancelKey(sess)
		return nil, nil, metrics.StartupFailed, err
	}
	if !s.started(cc, sess) {
		s.dropCancelKey(sess)
		return nil, nil, metrics.Shutdown, fatal(b, "57P01", shutdownError().Message)
	}
	p.mu.Lock()
	p.clients++
	p.mu.Unlock()
	counted = false // endPooled counts it out
	return sess, params, "", nil
}

// endPooled forgets a session that ended.
func (s *Server) endPooled(sess *session) {
	s.dropCancelKey(sess)
	s.clients.Add(-1)
	p := sess.pooled.pool
	p.mu.Lock()
	p.clients--
	p.mu.Unlock()
}

// serverFatal tells a client the server refused the pool's connection:
// the server's own error where it gave one.
func serverFatal(b *pgproto3.Backend, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		b.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: pe.Code,
			Message: pe.Message, Detail: pe.Detail, Hint: pe.Hint})
		b.Flush()
		return err
	}
	if errors.Is(err, errQueryWait) {
		return fatal(b, "08P01", "pgcipher-proxy: "+err.Error())
	}
	return fatal(b, "08006", "pgcipher-proxy: cannot connect to the server: "+err.Error())
}

// noServer ends a session whose transaction found no server connection.
func (s *session) noServer(err error) error {
	s.clientMu.Lock()
	defer s.clientMu.Unlock()
	var pe *pgconn.PgError
	r := &pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "08006",
		Message: "pgcipher-proxy: cannot connect to the server: " + err.Error()}
	switch {
	case errors.As(err, &pe):
		r.Code, r.Message, r.Detail, r.Hint = pe.Code, pe.Message, pe.Detail, pe.Hint
	case errors.Is(err, errQueryWait):
		r.Code, r.Message = "08P01", "pgcipher-proxy: "+err.Error()
		r.Hint = "Raise default-pool-size or query-wait-timeout, or keep transactions shorter."
	}
	s.clW.send(r)
	s.clW.flush()
	return err
}

// newCancelKey gives a session a process id and key of the proxy's own.
func (s *Server) newCancelKey(sess *session) (uint32, []byte) {
	key := make([]byte, 4)
	s.cancelMu.Lock()
	defer s.cancelMu.Unlock()
	for {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(err)
		}
		pid := binary.BigEndian.Uint32(b[:4]) & 0x7fffffff
		if pid == 0 || s.cancels[pid] != nil {
			continue
		}
		copy(key, b[4:])
		s.cancels[pid] = sess
		sess.pooled.cancelPID = pid
		sess.pooled.cancelKey = key
		return pid, key
	}
}

func (s *Server) dropCancelKey(sess *session) {
	s.cancelMu.Lock()
	defer s.cancelMu.Unlock()
	if s.cancels[sess.pooled.cancelPID] == sess {
		delete(s.cancels, sess.pooled.cancelPID)
	}
}

// pooledCancel maps a client's cancel request to the backend that runs
// its transaction; nil: nothing to cancel.  done must be called once the
// cancel has reached the server: until then the client's connection does
// not go back to its pool, so that a cancel cannot hit the next client's
// statement there.
func (s *Server) pooledCancel(m *pgproto3.CancelRequest) (*pgproto3.CancelRequest, func()) {
	s.cancelMu.Lock()
	sess := s.cancels[m.ProcessID]
	s.cancelMu.Unlock()
	if sess == nil || subtle.ConstantTimeCompare(sess.pooled.cancelKey, m.SecretKey) != 1 {
		return nil, nil
	}
	ps := sess.pooled
	ps.cancelMu.Lock()
	defer ps.cancelMu.Unlock()
	sc := ps.cur.Load()
	if sc == nil {
		return nil, nil
	}
	ps.cancelling.Add(1)
	return &pgproto3.CancelRequest{ProcessID: sc.pid, SecretKey: sc.key}, ps.cancelling.Done
}

// Running as a service: the connections a server tracks, certificates
// replaced while it runs, and a shutdown that lets transactions finish
// (design 15.11).

package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/metrics"
)

// tlsSettings is what a connection takes from the configuration when it
// starts: the TLS offered to clients and the upstream certificates.
type tlsSettings struct {
	client        *tls.Config
	upstreamCerts string
}

// SetTLS replaces what Config.ClientTLS and Config.UpstreamCerts gave
// (SIGHUP: certificates read again): connections opened from now on use
// it, open ones keep theirs; a nil client stops offering TLS.
func (s *Server) SetTLS(client *tls.Config, upstreamCerts string) {
	if client != nil {
		client = directTLS(client) // ALPN "postgresql", for direct SSL negotiation
	}
	s.tls.Store(&tlsSettings{client: client, upstreamCerts: upstreamCerts})
}

// clientConn is one client connection as the server tracks it.
type clientConn struct {
	sock  net.Conn // the accepted socket (under TLS, if any)
	start time.Time
	// set by startup as it learns them
	user, db string
	sess     *session // once the session runs; under Server.mu
}

// track registers a connection; false: the server is shutting down.
func (s *Server) track(cc *clientConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining.Load() {
		return false
	}
	s.conns[cc] = true
	return true
}

func (s *Server) untrack(cc *clientConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, cc)
	if len(s.conns) == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
}

// started records a connection's session; false: the server is
// shutting down, and the session must not start.
func (s *Server) started(cc *clientConn, sess *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cc.sess = sess
	return !s.draining.Load()
}

// Shutdown stops accepting connections and closes each session at its
// next idle point: outside a transaction block with nothing pending (a
// session inside a transaction is closed when the transaction ends).
// Connections that have not started their session yet are closed at
// once.  The clients get FATAL 57P01, as from a server shutting down.
// When ctx ends first (the timeout, or a second signal), every remaining
// connection is closed (open transactions roll back on the server) and
// Shutdown reports how many, after waiting at most a few seconds more for
// them to end.  Call it once; Close afterwards closes the catalog
// connections.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining.Store(true)
	for l := range s.listeners {
		l.Close()
	}
	var sessions []*session
	for cc := range s.conns {
		if cc.sess == nil {
			cc.sock.Close() // in startup or authentication
			continue
		}
		sessions = append(sessions, cc.sess)
	}
	drained := make(chan struct{})
	if len(s.conns) == 0 {
		close(drained)
	} else {
		s.drained = drained
	}
	s.mu.Unlock()
	for _, sess := range sessions {
		go sess.drain(ctx)
	}
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	var left []*clientConn
	for cc := range s.conns {
		left = append(left, cc)
	}
	sessions = sessions[:0]
	for _, cc := range left {
		if cc.sess != nil {
			sessions = append(sessions, cc.sess)
		} else {
			cc.sock.Close()
		}
	}
	s.mu.Unlock()
	for _, sess := range sessions {
		sess.closeNow()
	}
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		// a session still reading its catalog ends when that read does
	}
	return fmt.Errorf("wire: %d connections were closed before their sessions were idle", len(left))
}

// Draining reports whether Shutdown has begun.
func (s *Server) Draining() bool { return s.draining.Load() }

// shutdownError is the client's FATAL when the proxy closes its session.
func shutdownError() *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01",
		Message: "pgcipher-proxy: terminating connection because the proxy is shutting down"}
}

var errShutdown = errors.New("wire: closed by the proxy's shutdown")

// idle: outside a transaction block, with nothing pending and no batch or
// COPY open.  Called with mu held (the client loop is between messages).
// The queue first: once it is empty, the relay has stored the status of
// the last ReadyForQuery (before it finished that answer).
func (s *session) idle() bool {
	return s.q.empty() && s.txStatus.Load() == 'I' && !s.inBatch && s.copyIn == nil
}

// wakeDrain tells a draining session to look again whether it is idle.
func (s *session) wakeDrain() {
	if s.srv.draining.Load() {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// drain closes the session at its next idle point (Shutdown).
func (s *session) drain(ctx context.Context) {
	for {
		if s.closeIfIdle() {
			return
		}
		select {
		case <-s.wake:
		case <-s.ended:
			return
		case <-ctx.Done():
			return // Shutdown closes what is left
		}
	}
}

// closeIfIdle closes the session if the client loop waits for a message
// and the session is idle.
func (s *session) closeIfIdle() bool {
	if !s.mu.TryLock() {
		return false // the client loop is handling a message
	}
	defer s.mu.Unlock()
	if !s.idle() {
		return false
	}
	s.endIdle()
	return true
}

// endIdle ends an idle session: the client gets FATAL 57P01, the server
// Terminate.  Called with mu held.
func (s *session) endIdle() {
	s.closedByShutdown.Store(true)
	s.tellClient(shutdownError())
	if s.pooled == nil {
		s.upW.send(&pgproto3.Terminate{})
		s.upW.flush()
	}
	s.closeSockets()
}

// closeNow ends the session whatever it is doing (the shutdown timeout,
// or a second signal): the client gets FATAL 57P01 if it can be written
// at once, and the server sees the connection close, which rolls back an
// open transaction.
func (s *session) closeNow() {
	s.closedByShutdown.Store(true)
	s.tellClient(shutdownError())
	s.closeSockets()
}

// tellClient writes a last message to the client, giving up after a
// moment (a client that does not read must not hold the shutdown).
func (s *session) tellClient(m pgproto3.BackendMessage) {
	s.clientSock.SetWriteDeadline(time.Now().Add(time.Second))
	// the relay holds clientMu while it writes, and gives it back
	// within the deadline
	s.clientMu.Lock()
	defer s.clientMu.Unlock()
	s.clW.send(m)
	s.clW.flush()
}

func (s *session) closeSockets() {
	s.clientSock.Close()
	if s.serverSock != nil {
		s.serverSock.Close()
	}
	if s.pooled != nil {
		if sc := s.pooled.cur.Load(); sc != nil {
			sc.sock.Close() // its transaction is rolled back
		}
	}
}

// clientGone: an error that says the client (or the server, for the
// relay) closed its connection, as opposed to a protocol error.
func closedError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, errTerminated)
}

// endOf says how a session ended: which loop stopped first and why.
func (s *session) endOf(err error, byClient bool) metrics.End {
	switch {
	case s.closedByShutdown.Load():
		return metrics.Shutdown
	case !closedError(err):
		return metrics.Failed
	case byClient:
		return metrics.ClientClosed
	}
	return metrics.ServerClosed
}

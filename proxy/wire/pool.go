// Server connections pooled per (database, user) for transaction mode
// (design 15.14): opened with pgconn (authentication, TLS and fallbacks
// as libpq does them) and then taken over, handed to a session for one
// transaction at a time, and given back when the server reports idle.

package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcipher/pgcipher/proxy/internal/rawsock"
	"github.com/pgcipher/pgcipher/proxy/metrics"
)

// Pool modes.
const (
	SessionMode     = "session"     // one server connection per client (the default)
	TransactionMode = "transaction" // a server connection per transaction
)

// PoolConfig is how transaction mode pools, under PgBouncer's names.
// Sizes and timeouts are read at each use: SetPool replaces them (SIGHUP).
type PoolConfig struct {
	Mode string // SessionMode ("") or TransactionMode
	// MaxClientConn bounds the clients connected at once (0: no bound).
	MaxClientConn int
	// DefaultPoolSize: server connections per (database, user).
	DefaultPoolSize int
	// MinPoolSize: idle connections kept open per pool.
	MinPoolSize int
	// ReservePoolSize: more connections a pool may open once a client has
	// waited ReservePoolTimeout.
	ReservePoolSize    int
	ReservePoolTimeout time.Duration
	// ServerIdleTimeout closes connections idle that long (0: never);
	// ServerLifetime closes them once that old, when given back.
	ServerIdleTimeout time.Duration
	ServerLifetime    time.Duration
	// QueryWaitTimeout: how long a client waits for a server connection
	// before it is disconnected (0: for ever).
	QueryWaitTimeout time.Duration
	// ServerResetQuery runs on a server connection before it serves a
	// client whose session settings differ from what the last one left
	// (then the client's settings are replayed after it).
	ServerResetQuery string
	// MaxPreparedStatements: statements kept prepared per server
	// connection (least recently used closed first).
	MaxPreparedStatements int
	// AuthType: how the proxy authenticates clients in transaction mode
	// (trust, scram-sha-256 or cert); AuthFile: the users' secrets.
	AuthType string
	AuthFile string
	// AuthUser: the role that runs AuthQuery ($1: a user's name; it
	// answers the user's name and secret) for users not in the auth file
	// ("": no lookup)
	AuthUser  string
	AuthQuery string
}

// DefaultAuthQuery is PgBouncer's auth_query.
const DefaultAuthQuery = "SELECT usename, passwd FROM pg_shadow WHERE usename=$1"

// DefaultPoolConfig is PgBouncer's defaults where it has them.
func DefaultPoolConfig() PoolConfig {
	return PoolConfig{Mode: SessionMode, MaxClientConn: 100, DefaultPoolSize: 20, ReservePoolTimeout: 5 * time.Second,
		ServerIdleTimeout: 600 * time.Second, ServerLifetime: 3600 * time.Second, QueryWaitTimeout: 120 * time.Second,
		ServerResetQuery: "RESET ALL", MaxPreparedStatements: 200, AuthType: "scram-sha-256",
		AuthQuery: DefaultAuthQuery}
}

// errQueryWait: no server connection came free within query-wait-timeout.
var errQueryWait = errors.New("no server connection became free within query-wait-timeout")

// serverConn is one pooled server connection.
type serverConn struct {
	pool *pool
	sock net.Conn  // as pgconn left it (TLS or not), counted by the metrics
	raw  net.Conn  // the socket itself, for the liveness check
	w    io.Writer // sock, or sock with the recorder
	r    *frameReader
	pid  uint32
	key  []byte
	born time.Time
	// relays: the session attached, for the connection's relay goroutine
	relays    chan *session
	closeOnce sync.Once
	// owned by the pool while idle, by one session while attached
	idleSince time.Time
	sig       string // the session settings a session left on it
	prepared  *stmtCache
	unnamed   string // the key of its unnamed statement
	// unnamedEntry: whether that statement's Parse succeeded
	unnamedEntry *cachedStmt
}

// close ends the connection (a Terminate first, as a client would).
func (sc *serverConn) close() {
	sc.w.Write([]byte{'X', 0, 0, 0, 4})
	sc.sock.Close()
	sc.closeOnce.Do(func() { close(sc.relays) })
}

// relayLoop runs the relay of each session attached to sc in turn, on
// one goroutine for the connection's life (design 15.14): a goroutine
// per attachment grew its stack again at every transaction (9 % of the
// proxy's CPU in the pooler's profile).  A session's relay returns when
// it gives the connection back, or when the session ends (the pool then
// closes the connection, which ends the loop).
func (sc *serverConn) relayLoop() {
	for s := range sc.relays {
		s.relayFor(sc.r)
	}
}

// alive: nothing arrived on an idle connection (a server that ended it
// sends a FATAL and closes); one non-blocking peek, no wait.
func (sc *serverConn) alive() bool {
	rc, ok := sc.raw.(syscall.Conn)
	if !ok {
		return true
	}
	c, err := rc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	c.Read(func(fd uintptr) bool {
		alive = rawsock.NothingToRead(fd)
		return true
	})
	return alive
}

type poolKey struct{ db, user string }

// pool is the server connections of one (database, user).
type pool struct {
	srv  *Server
	key  poolKey
	mu   sync.Mutex
	idle []*serverConn // the most recently used last
	open int           // open or being opened
	// waiters, first come first served: each gets a connection, or nil
	// (a slot counted in open: it opens one itself)
	waiters []chan *serverConn
	params  map[string]string // ParameterStatus of the newest connection
	active  int               // attached to a session
	clients int
	// clients' Closes of statements, by server name (pooled.go)
	closedMu  sync.RWMutex
	closed    map[string]uint64
	good      map[string]*goodStmt // statements prepared once: their Parse parses
	clock     atomic.Uint64        // ticks: statements prepared, Parsed, Closed
	lastClose atomic.Uint64        // the clock at the last Close
}

// poolFor returns the pool of (db, user), made on first use.
func (s *Server) poolFor(db, user string) *pool {
	s.poolsMu.Lock()
	defer s.poolsMu.Unlock()
	k := poolKey{db, user}
	p := s.pools[k]
	if p == nil {
		p = &pool{srv: s, key: k}
		s.pools[k] = p
	}
	return p
}

// acquire returns a server connection, waiting for one as long as the
// configuration allows.
func (p *pool) acquire() (*serverConn, error) {
	cfg := p.srv.PoolConfig()
	p.mu.Lock()
	for len(p.idle) > 0 {
		sc := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		p.active++
		p.mu.Unlock()
		// the liveness check is a system call: outside the pool's lock
		if !expired(sc, cfg) && sc.alive() {
			return sc, nil
		}
		sc.close()
		p.mu.Lock()
		p.active--
		p.open--
	}
	if p.open < cfg.DefaultPoolSize {
		p.open++
		p.mu.Unlock()
		return p.dialSlot()
	}
	ch := make(chan *serverConn, 1)
	p.waiters = append(p.waiters, ch)
	p.mu.Unlock()
	start := time.Now()
	defer func() { p.srv.metrics.PoolWait(time.Since(start)) }()
	var reserve, timeout <-chan time.Time
	if cfg.ReservePoolSize > 0 {
		t := time.NewTimer(cfg.ReservePoolTimeout)
		defer t.Stop()
		reserve = t.C
	}
	if cfg.QueryWaitTimeout > 0 {
		t := time.NewTimer(cfg.QueryWaitTimeout)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case sc := <-ch:
			return p.got(sc)
		case <-reserve:
			reserve = nil
			p.mu.Lock()
			if p.open < cfg.DefaultPoolSize+cfg.ReservePoolSize && p.dropWaiter(ch) {
				p.open++
				p.mu.Unlock()
				return p.dialSlot()
			}
			p.mu.Unlock()
		case <-timeout:
			p.mu.Lock()
			dropped := p.dropWaiter(ch)
			p.mu.Unlock()
			if dropped {
				return nil, errQueryWait
			}
			return p.got(<-ch) // handed one as the timer fired
		}
	}
}

// got takes what a waiter was handed: a connection, or a slot.
func (p *pool) got(sc *serverConn) (*serverConn, error) {
	if sc == nil {
		return p.dialSlot()
	}
	return sc, nil
}

// dialSlot opens a connection for a slot already counted in open.
func (p *pool) dialSlot() (*serverConn, error) {
	sc, err := p.dial()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.open--
		p.handOffSlot()
		return nil, err
	}
	p.active++
	return sc, nil
}

// handOffSlot gives a waiter the slot a closed connection freed.  Called
// with mu held.
func (p *pool) handOffSlot() {
	if len(p.waiters) > 0 && p.open < p.srv.PoolConfig().DefaultPoolSize {
		w := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.open++
		w <- nil
	}
}

func (p *pool) dropWaiter(ch chan *serverConn) bool {
	for i, w := range p.waiters {
		if w == ch {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// release gives a connection back: to the first waiter, or to the idle
// list; closed instead when it is not clean or too old.
func (p *pool) release(sc *serverConn, clean bool) {
	cfg := p.srv.PoolConfig()
	p.mu.Lock()
	p.active--
	if !clean || expired(sc, cfg) || p.srv.draining.Load() {
		p.open--
		p.handOffSlot()
		p.mu.Unlock()
		sc.close()
		return
	}
	if len(p.waiters) > 0 {
		w := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.active++
		p.mu.Unlock()
		w <- sc
		return
	}
	sc.idleSince = time.Now()
	p.idle = append(p.idle, sc)
	p.mu.Unlock()
}

func expired(sc *serverConn, cfg PoolConfig) bool {
	return cfg.ServerLifetime > 0 && time.Since(sc.born) > cfg.ServerLifetime
}

// dial opens a server connection for the pool's database and user with
// the proxy's own credentials (--upstream's password or passfile, or the
// user's password in the auth file).
func (p *pool) dial() (*serverConn, error) {
	s := p.srv
	cfg := s.upstream.Copy()
	if !s.setUser {
		cfg.User = p.key.user
	}
	if !s.setDB {
		cfg.Database = p.key.db
	}
	s.loginAs(cfg)
	var raw net.Conn
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		raw = rawsock.Wrap(c)
		return s.metrics.Server(raw), nil
	}
	timeout := cfg.ConnectTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pc, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pc.SyncConn(ctx); err != nil {
		pc.Close(ctx)
		return nil, err
	}
	hc, err := pc.Hijack()
	if err != nil {
		pc.Close(ctx)
		return nil, err
	}
	sc := &serverConn{pool: p, sock: hc.Conn, raw: raw, w: hc.Conn, pid: hc.PID, key: hc.SecretKey, born: time.Now(),
		prepared: newStmtCache(p), relays: make(chan *session, 1)}
	if s.cfg.Record != nil {
		sc.w = &recorder{w: hc.Conn, rec: s.cfg.Record, mu: &s.recordMu}
	}
	sc.r = newFrameReader(hc.Conn)
	go sc.relayLoop()
	p.mu.Lock()
	p.params = hc.ParameterStatuses
	p.mu.Unlock()
	return sc, nil
}

// serverParams returns what a server connection of the pool reports
// (ParameterStatus), opening one if none was opened yet: a client is
// told them at login, and a database or user the server refuses is
// refused at login.
func (p *pool) serverParams() (map[string]string, error) {
	p.mu.Lock()
	ps := p.params
	p.mu.Unlock()
	if ps != nil {
		return ps, nil
	}
	sc, err := p.acquire()
	if err != nil {
		return nil, err
	}
	p.release(sc, true)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.params, nil
}

// maintain closes idle connections past server-idle-timeout or
// server-lifetime and opens them up to min-pool-size (once a second).
func (s *Server) maintain(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		cfg := s.PoolConfig()
		s.poolsMu.Lock()
		pools := make([]*pool, 0, len(s.pools))
		for _, p := range s.pools {
			pools = append(pools, p)
		}
		s.poolsMu.Unlock()
		for _, p := range pools {
			p.maintain(cfg)
		}
	}
}

func (p *pool) maintain(cfg PoolConfig) {
	var closing []*serverConn
	p.mu.Lock()
	keep := p.idle[:0]
	for _, sc := range p.idle {
		idleLong := cfg.ServerIdleTimeout > 0 && time.Since(sc.idleSince) > cfg.ServerIdleTimeout && p.open > cfg.MinPoolSize
		if idleLong || expired(sc, cfg) {
			closing = append(closing, sc)
			p.open--
			continue
		}
		keep = append(keep, sc)
	}
	for i := len(keep); i < len(p.idle); i++ {
		p.idle[i] = nil
	}
	p.idle = keep
	open := 0
	if p.open < cfg.MinPoolSize && p.params != nil {
		// a pool a client has used: opened to its minimum
		open = cfg.MinPoolSize - p.open
		p.open += open
	}
	p.mu.Unlock()
	for _, sc := range closing {
		sc.close()
	}
	for range open {
		sc, err := p.dialSlot()
		if err != nil {
			p.srv.cfg.Log.Warn("pool: cannot open a server connection", "database", p.key.db, "user", p.key.user, "err", err)
			return
		}
		p.release(sc, true)
	}
}

// Pools reports every pool's state (transaction mode).
func (s *Server) Pools() []metrics.PoolState {
	s.poolsMu.Lock()
	defer s.poolsMu.Unlock()
	out := make([]metrics.PoolState, 0, len(s.pools))
	for k, p := range s.pools {
		p.mu.Lock()
		out = append(out, metrics.PoolState{Database: k.db, User: k.user, ClientsActive: p.clients,
			ClientsWaiting: len(p.waiters), ServersActive: p.active, ServersIdle: len(p.idle)})
		p.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Database+"\x00"+out[i].User < out[j].Database+"\x00"+out[j].User
	})
	return out
}

// closePools closes every idle connection (the proxy is stopping).
func (s *Server) closePools() {
	s.poolsMu.Lock()
	defer s.poolsMu.Unlock()
	for _, p := range s.pools {
		p.mu.Lock()
		for _, sc := range p.idle {
			sc.close()
			p.open--
		}
		p.idle = nil
		p.mu.Unlock()
	}
}

// String names a pool in messages.
func (p *pool) String() string { return fmt.Sprintf("%s@%s", p.key.user, p.key.db) }

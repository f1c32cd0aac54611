// A session in transaction mode (design 15.14): a server connection from
// its pool for each transaction, the client's session settings replayed
// on it, its prepared statements prepared on it as they are used, and
// what would outlive the transaction on a shared connection refused.

package wire

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/rewrite"
)

// pooledSession is what a session in transaction mode adds.
//
// mu is held by the client loop while it handles a message, except
// while it writes to the server's socket or waits for the relay; the
// relay takes it (TryLock, never blocking: the client loop may be
// writing to a server that waits for the relay to read) to give the
// connection back once the server is idle and no answer is pending.
type pooledSession struct {
	pool *pool
	mu   sync.Mutex
	// kick: the client loop gave mu back (the relay may try again)
	kick chan struct{}
	sc   *serverConn                // attached; nil between transactions
	cur  atomic.Pointer[serverConn] // sc, for cancel requests
	// the client's session settings: its startup parameters, then its
	// SET statements outside transaction blocks (by name, newest last),
	// and their signature; settingsMu, because the relay records SETs
	settingsMu sync.Mutex
	startup    [][2]string
	sets       []sessionSet
	sig        string
	// the cancel key the proxy gave the client; cancelling counts the
	// cancels on their way to the attached connection's backend, which
	// does not go back to its pool before they arrive (cancelMu orders
	// them with the release)
	cancelPID  uint32
	cancelKey  []byte
	cancelMu   sync.Mutex
	cancelling sync.WaitGroup
}

type sessionSet struct{ name, sql string }

func newPooledSession(p *pool, params map[string]string) *pooledSession {
	ps := &pooledSession{pool: p, kick: make(chan struct{}, 1)}
	for k, v := range params {
		switch k {
		case "user", "database", "replication", "options":
			continue
		}
		if strings.HasPrefix(k, "_pq_.") {
			continue
		}
		ps.startup = append(ps.startup, [2]string{k, v})
	}
	ps.startup = append(ps.startup, optionSettings(params["options"])...)
	sort.Slice(ps.startup, func(i, j int) bool { return ps.startup[i][0] < ps.startup[j][0] })
	ps.sig = ps.signature()
	return ps
}

// optionSettings reads the -c NAME=VALUE and --NAME=VALUE settings of a
// startup "options" parameter.
func optionSettings(opts string) [][2]string {
	var out [][2]string
	f := strings.Fields(opts)
	for i := 0; i < len(f); i++ {
		a := f[i]
		switch {
		case a == "-c" && i+1 < len(f):
			i++
			a = f[i]
		case strings.HasPrefix(a, "-c"):
			a = a[2:]
		case strings.HasPrefix(a, "--"):
			a = a[2:]
		default:
			continue
		}
		if k, v, ok := strings.Cut(a, "="); ok {
			out = append(out, [2]string{strings.ReplaceAll(k, "-", "_"), v})
		}
	}
	return out
}

// signature names the settings: two sessions with the same signature
// need nothing replayed between them.  Called with settingsMu held (or
// before the relay runs).
func (ps *pooledSession) signature() string {
	h := sha256.New()
	for _, kv := range ps.startup {
		fmt.Fprintf(h, "%d:%s%d:%s", len(kv[0]), kv[0], len(kv[1]), kv[1])
	}
	h.Write([]byte{0})
	for _, st := range ps.sets {
		fmt.Fprintf(h, "%d:%s", len(st.sql), st.sql)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// settingsSig is the client's signature now.
func (ps *pooledSession) settingsSig() string {
	ps.settingsMu.Lock()
	defer ps.settingsMu.Unlock()
	return ps.sig
}

// replay is what puts a server connection into the client's settings:
// the reset query, the startup parameters, then the SETs.
func (ps *pooledSession) replay(reset string) string {
	ps.settingsMu.Lock()
	defer ps.settingsMu.Unlock()
	var b strings.Builder
	if reset != "" {
		b.WriteString(reset)
		b.WriteString(";")
	}
	if len(ps.startup) > 0 {
		// set_config takes a value as the startup packet gives it (a
		// list such as search_path, unquoted)
		b.WriteString("SELECT ")
		for i, kv := range ps.startup {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "pg_catalog.set_config(%s,%s,false)", quoteLiteral(kv[0]), quoteLiteral(kv[1]))
		}
		b.WriteString(";")
	}
	for _, st := range ps.sets {
		b.WriteString(st.sql)
		b.WriteString(";")
	}
	return b.String()
}

// recordSet records a session-level SET or RESET the server ran
// successfully outside a transaction block: replayed on the server
// connections of the client's later transactions.  The attached
// connection has it already.  Called by the relay.
func (s *session) recordSet(e *rewrite.SessionEffect, sql string) {
	ps := s.pooled
	ps.settingsMu.Lock()
	switch {
	case e.ResetAll:
		ps.sets = nil
	default:
		kept := ps.sets[:0]
		for _, st := range ps.sets {
			if st.name != e.Set {
				kept = append(kept, st)
			}
		}
		ps.sets = kept
		if !e.Reset {
			ps.sets = append(ps.sets, sessionSet{name: e.Set, sql: sql})
		}
	}
	ps.sig = ps.signature()
	sig := ps.sig
	ps.settingsMu.Unlock()
	if sc := ps.cur.Load(); sc != nil {
		sc.sig = sig
	}
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// lockPool and unlockPool bracket the client loop's handling of a message.
func (s *session) lockPool() {
	if s.pooled != nil {
		s.pooled.mu.Lock()
	}
}

func (s *session) unlockPool() {
	if s.pooled != nil {
		s.pooled.mu.Unlock()
		select {
		case s.pooled.kick <- struct{}{}:
		default:
		}
	}
}

// attach takes a server connection from the pool for the client's next
// transaction, replays its settings there if the connection's differ,
// and starts a relay on it.  Called with mu held.
func (s *session) attach() error {
	ps := s.pooled
	sc, err := ps.pool.acquire()
	if err != nil {
		return err
	}
	ps.sc = sc
	ps.cur.Store(sc)
	s.upW.dst = sc.w
	if sig := ps.settingsSig(); sc.sig != sig {
		reset := s.srv.PoolConfig().ServerResetQuery
		if resetDrops(reset) {
			sc.prepared.clear()
			sc.unnamed = ""
		}
		s.q.push(&preludeAnswer{})
		s.upW.send(&pgproto3.Query{String: ps.replay(reset)})
		sc.sig, sc.unnamed = sig, "" // a simple query drops the unnamed statement
	}
	sc.relays <- s
	return nil
}

// resetDrops: the reset query deallocates prepared statements.
func resetDrops(q string) bool {
	u := strings.ToUpper(q)
	return strings.Contains(u, "DISCARD") || strings.Contains(u, "DEALLOCATE")
}

// release gives the attached connection back once the server is idle
// outside a transaction with no answer pending.  Called by the relay
// after a ReadyForQuery 'I'; it waits while the client loop handles a
// message (which may queue answers), never blocking on mu.
func (s *session) release() bool {
	ps := s.pooled
	for {
		if !s.q.empty() || s.txStatus.Load() != 'I' {
			return false
		}
		if ps.mu.TryLock() {
			break
		}
		select {
		case <-ps.kick:
		case <-s.ended:
			return false
		}
	}
	defer ps.mu.Unlock()
	if !s.q.empty() || s.txStatus.Load() != 'I' || ps.sc == nil {
		return false
	}
	sc := ps.sc
	ps.sc = nil
	ps.cancelMu.Lock()
	ps.cur.Store(nil)
	ps.cancelMu.Unlock()
	ps.cancelling.Wait() // a cancel on its way reaches this backend first
	ps.pool.release(sc, true)
	return true
}

// detachAtEnd gives the attached connection back when the session ends:
// clean only when the server is idle with nothing pending (a client gone
// in a transaction leaves a connection that is closed, which rolls the
// transaction back).
func (s *session) detachAtEnd() {
	ps := s.pooled
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.sc == nil {
		return
	}
	sc := ps.sc
	ps.sc = nil
	ps.cur.Store(nil)
	ps.pool.release(sc, false)
}

// preludeAnswer: the replay of the session's settings, answered to no
// one; an error ends the session (its settings cannot be restored).
type preludeAnswer struct{}

func (*preludeAnswer) take(s *session, m pgproto3.BackendMessage) bool { return false }

// errPrelude: the server refused to restore the session's settings.
type errPrelude struct{ msg string }

func (e *errPrelude) Error() string {
	return "wire: restoring the session's settings on a pooled connection failed: " + e.msg
}

// stmtCache is a server connection's prepared statements, least recently
// used first (max-prepared-statements).  An entry is added when its Parse
// is sent; its answer marks it prepared, or failed (the server refused or
// skipped the Parse), and a failed entry is never taken as prepared.
//
// A client never runs a plan older than its own Parse, as on a connection
// of its own: its Parse is always sent (the name closed first), and a
// connection's entry prepared before the client's Parse is prepared again
// where the client binds it (another client may have prepared it before
// a change of its tables or types).  A client's Close closes the
// statement on the connection it holds; the pool records the Close, and
// the entries prepared before it on its other connections are prepared
// again where next used (pgx closes a statement after "cached plan must
// not change result type").  Times are ticks of the pool's clock.
type stmtCache struct {
	pool  *pool
	order *list.List // of *cachedStmt, the front least recently used
	names map[string]*list.Element
}

type cachedStmt struct {
	name  string
	epoch uint64       // the pool's clock when it was prepared
	state atomic.Int32 // stmtPending, stmtPrepared or stmtFailed
}

const (
	stmtPending int32 = iota
	stmtPrepared
	stmtFailed
)

func newStmtCache(p *pool) *stmtCache {
	return &stmtCache{pool: p, order: list.New(), names: map[string]*list.Element{}}
}

// touch marks a statement used; false: not prepared there (or its Parse
// failed).
func (c *stmtCache) touch(name string, since uint64) bool {
	e := c.names[name]
	if e == nil {
		return false
	}
	cs := e.Value.(*cachedStmt)
	if cs.state.Load() == stmtFailed || cs.epoch < since || (c.pool != nil && c.pool.closedAfter(name, cs.epoch)) {
		c.order.Remove(e)
		delete(c.names, name)
		return false
	}
	c.order.MoveToBack(e)
	return true
}

func (c *stmtCache) add(name string) *cachedStmt {
	cs := &cachedStmt{name: name}
	if c.pool != nil {
		cs.epoch = c.pool.clock.Add(1)
	}
	c.names[name] = c.order.PushBack(cs)
	return cs
}

func (c *stmtCache) remove(name string) {
	if e := c.names[name]; e != nil {
		c.order.Remove(e)
		delete(c.names, name)
	}
}

func (c *stmtCache) clear() { c.order.Init(); c.names = map[string]*list.Element{} }

// over returns the least recently used statement, if over max.
func (c *stmtCache) over(max int) (string, bool) {
	if max <= 0 || c.order.Len() <= max {
		return "", false
	}
	return c.order.Front().Value.(*cachedStmt).name, true
}

// parseAnswer: ParseComplete of a Parse of a pooled connection's
// statement, which marks its cache entry (and the client's statement).
type parseAnswer struct {
	quiet bool // the proxy's own Parse: not relayed
	entry *cachedStmt
	st    *stmt // the client's Parse: confirmed by its answer
}

func (a *parseAnswer) take(s *session, m pgproto3.BackendMessage) bool {
	a.entry.state.Store(stmtPrepared)
	if a.entry.name != "" && s.pooled != nil {
		s.pooled.pool.markGood(a.entry.name)
	}
	if a.st != nil {
		a.st.parsed.Store(true)
	}
	if !a.quiet {
		s.send(m)
	}
	return true
}

// stmtKey names a statement on server connections: the SQL the server
// gets, its parameter types and the session settings it was prepared
// under (search_path decides what it names).
func stmtKey(sig, sql string, oids []uint32) string {
	h := sha256.New()
	h.Write([]byte(sig))
	h.Write([]byte{0})
	h.Write([]byte(sql))
	var b [4]byte
	for _, o := range oids {
		binary.BigEndian.PutUint32(b[:], o)
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// serverStmtPrefix names the statements the proxy prepares on pooled
// connections for clients' named statements.
const serverStmtPrefix = "pgcipher.s."

// parsePooled sends a client's Parse in transaction mode: a named
// statement goes by its server name, closed first and parsed on the
// connection the client holds (its plan is never older than its Parse);
// the unnamed one is parsed as the client sent it.
func (s *session) parsePooled(st *stmt, oids []uint32) {
	sc := s.pooled.sc
	st.srvOIDs = oids
	st.key = stmtKey(s.pooled.settingsSig(), st.plan.SQL, oids)
	if st.name == "" {
		st.srvName = ""
		sc.unnamedEntry = &cachedStmt{}
		s.push(&parseAnswer{entry: sc.unnamedEntry, st: st})
		s.sendServer(&pgproto3.Parse{Query: st.plan.SQL, ParameterOIDs: oids})
		if up := st.plan.Update; up != nil {
			s.push(&completeAnswer{quiet: true})
			s.sendServer(&pgproto3.Close{ObjectType: 'S', Name: lockPrefix})
			s.parseLock(lockPrefix, up, oids)
		}
		sc.unnamed = st.key
		return
	}
	st.srvName = serverStmtPrefix + st.key
	st.since = s.pooled.pool.clock.Add(1)
	sc.prepared.remove(st.srvName)
	s.prepareOn(sc, st, false)
}

// prepareOn prepares a client's named statement on the attached
// connection (quiet: not asked for by the client), and closes the least
// recently used beyond max-prepared-statements.
//
// A Close of the name goes first: the cache may not know whether an
// earlier Parse of it ran (its answer dropped with the rest of a batch in
// which the proxy failed a result, while the server ran the batch on), and
// a Close of a name that does not exist is no error.
func (s *session) prepareOn(sc *serverConn, st *stmt, quiet bool) {
	s.push(&completeAnswer{quiet: true})
	s.sendServer(&pgproto3.Close{ObjectType: 'S', Name: st.srvName})
	entry := sc.prepared.add(st.srvName)
	a := &parseAnswer{quiet: quiet, entry: entry}
	if !quiet {
		a.st = st
	}
	s.push(a)
	s.sendServer(&pgproto3.Parse{Name: st.srvName, Query: st.plan.SQL, ParameterOIDs: st.srvOIDs})
	if up := st.plan.Update; up != nil {
		s.push(&completeAnswer{quiet: true})
		s.sendServer(&pgproto3.Close{ObjectType: 'S', Name: lockPrefix + st.srvName})
		s.parseLock(lockPrefix+st.srvName, up, st.srvOIDs)
	}
	max := s.srv.PoolConfig().MaxPreparedStatements
	for {
		name, over := sc.prepared.over(max)
		if !over || name == st.srvName {
			return
		}
		sc.prepared.remove(name)
		s.push(&completeAnswer{quiet: true})
		s.sendServer(&pgproto3.Close{ObjectType: 'S', Name: name})
	}
}

// ensurePrepared prepares a client's statement on the attached
// connection before it is bound or described there.
func (s *session) ensurePrepared(st *stmt) {
	sc := s.pooled.sc
	if st.srvName == "" {
		if sc.unnamed != st.key || sc.unnamedEntry == nil || sc.unnamedEntry.state.Load() == stmtFailed {
			sc.unnamedEntry = &cachedStmt{}
			s.push(&parseAnswer{quiet: true, entry: sc.unnamedEntry})
			s.sendServer(&pgproto3.Parse{Query: st.plan.SQL, ParameterOIDs: st.srvOIDs})
			if up := st.plan.Update; up != nil {
				s.push(&completeAnswer{quiet: true})
				s.sendServer(&pgproto3.Close{ObjectType: 'S', Name: lockPrefix})
				s.parseLock(lockPrefix, up, st.srvOIDs)
			}
			sc.unnamed = st.key
		}
		return
	}
	if !sc.prepared.touch(st.srvName, st.since) {
		s.prepareOn(sc, st, true)
	}
}

// pooledRefusal refuses what would leave state on a shared server
// connection, and reports a session-level SET to record once it has
// run.
func (s *session) pooledRefusal(sql string) (*rewrite.SessionEffect, error) {
	e, err := rewrite.SessionEffects(sql)
	if err != nil || e == nil {
		return nil, nil // the server reports what does not parse
	}
	hint := "The proxy runs in transaction mode (pool-mode = transaction): each transaction may run on another server connection. Use session mode for this client."
	switch {
	case e.Refused != "":
		return nil, &rewrite.Refusal{Code: rewrite.CodeRefused,
			Message: "pgcipher-proxy: " + e.Refused + " cannot be used in transaction mode", Hint: hint}
	case e.Set != "" || e.ResetAll:
		if e.Statements > 1 {
			return nil, &rewrite.Refusal{Code: rewrite.CodeRefused,
				Message: "pgcipher-proxy: in transaction mode, a session-level SET or RESET must be sent on its own",
				Hint:    "Send it as a statement of its own, or use SET LOCAL inside the transaction."}
		}
		if s.txStatus.Load() != 'I' || s.inBatch {
			return nil, &rewrite.Refusal{Code: rewrite.CodeRefused,
				Message: "pgcipher-proxy: in transaction mode, a session-level SET or RESET must run outside a transaction block",
				Hint:    "Use SET LOCAL inside the transaction, or SET before BEGIN: the proxy replays session settings on each transaction's server connection."}
		}
		if e.DeallocateAll {
			// the server drops every prepared statement, the client's and
			// the connection's
			clear(s.stmts)
			s.pooled.sc.prepared.clear()
			s.pooled.sc.unnamed = ""
		}
		return e, nil
	}
	return nil, nil
}

// deallocatePooled runs DEALLOCATE for the client: its statements are
// the proxy's on shared connections.  false: not a DEALLOCATE.
func (s *session) deallocatePooled(m *pgproto3.Query, t *stat) bool {
	name, all, ok := rewrite.Deallocate(m.String)
	if !ok {
		return false
	}
	sc := s.pooled.sc
	e := &queryAnswer{plan: &rewrite.Plan{}, stat: t}
	if all {
		clear(s.stmts)
		sc.prepared.clear()
		sc.unnamed = ""
		s.push(e)
		s.sendServer(&pgproto3.Query{String: "DEALLOCATE ALL"})
		return true
	}
	st := s.stmts[name]
	if st == nil || st.srvName == "" {
		return false // as the client sent it: the server reports it
	}
	delete(s.stmts, name)
	s.ensurePrepared(st)
	sc.prepared.remove(st.srvName)
	s.pooled.pool.markClosed(st.srvName)
	s.push(e)
	s.sendServer(&pgproto3.Query{String: "DEALLOCATE " + quoteIdent(st.srvName)})
	return true
}

// errAlreadyPrepared is PostgreSQL's own error for a second Parse of a
// name, given by the proxy (the server's statement has another name).
func errAlreadyPrepared(name string) error {
	return &rewrite.Refusal{Code: "42P05", Message: fmt.Sprintf("prepared statement %q already exists", name)}
}

// markClosed records a client's Close of a statement (see stmtCache).
func (p *pool) markClosed(name string) {
	p.closedMu.Lock()
	defer p.closedMu.Unlock()
	if p.closed == nil || len(p.closed) > 100000 {
		p.closed = map[string]uint64{} // what was prepared before is older still
	}
	t := p.clock.Add(1)
	p.closed[name] = t
	p.lastClose.Store(t)
}

// closedAfter: a client closed the statement after epoch.
func (p *pool) closedAfter(name string, epoch uint64) bool {
	if p.lastClose.Load() <= epoch {
		return false // no Close since: the common case, no lock
	}
	p.closedMu.RLock()
	defer p.closedMu.RUnlock()
	return p.closed[name] > epoch
}

// unattached answers what a client sends between transactions without a
// server connection where it can, and reports whether it did: Terminate
// and Flush; a Parse of a named statement that the pool's connections
// have prepared before (known to parse), answered ParseComplete and
// prepared on a connection where it is bound; a Sync, answered
// ReadyForQuery.  A client that prepares synchronously (pgbench -M
// prepared: each client's Parse and Sync in turn, on one thread for many
// clients) then never waits for a server connection that its own other
// clients hold in open transactions.  Databases with encrypted columns
// are answered so once a connection has described the statement (its
// result types, which the proxy decrypts by).
func (s *session) unattached(typ byte, raw []byte) (bool, error) {
	switch typ {
	case 'X':
		return true, errTerminated // no server to tell
	case 'H':
		return true, s.flushClient()
	case 'S':
		s.inBatch, s.skipping = false, false
		s.clientMu.Lock()
		s.clW.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		s.clientMu.Unlock()
		return true, s.flushClientIfIdle()
	case 'P':
		return s.localParse(raw)
	}
	return false, nil
}

func (s *session) localParse(raw []byte) (bool, error) {
	m, err := decodeFrontend('P', raw[5:])
	if err != nil || s.cat == nil {
		return false, nil
	}
	pm := m.(*pgproto3.Parse)
	if pm.Name == "" || (s.stmts[pm.Name] != nil && s.stmts[pm.Name].parsed.Load()) {
		return false, nil
	}
	p, err := s.prepare(pm.Query)
	if err != nil || p.Reload || p.Copy != nil || p.Update != nil {
		return false, nil
	}
	if e, _ := rewrite.SessionEffects(pm.Query); e != nil {
		return false, nil
	}
	oids := serverOIDs(pm, p)
	key := stmtKey(s.pooled.settingsSig(), p.SQL, oids)
	ps := s.pooled
	good := ps.pool.goodStmt(serverStmtPrefix + key)
	if good == nil || (s.cat.HasEncryption() && (!good.described || good.catGen != s.srv.catalogs.gen.Load())) {
		return false, nil
	}
	st := &stmt{name: pm.Name, sql: pm.Query, gen: s.gen, plan: p, clientOIDs: append([]uint32(nil), pm.ParameterOIDs...),
		srvName: serverStmtPrefix + key, srvOIDs: oids, key: key, since: ps.pool.clock.Add(1)}
	if good.desc != nil {
		st.desc = good.desc // shared, read only
		st.shape = s.shapeOf(p, good.desc)
	}
	st.parsed.Store(true)
	s.stmts[pm.Name] = st
	s.inBatch = true
	s.copyIn, s.dropCopy = nil, false
	s.clientMu.Lock()
	s.clW.send(&pgproto3.ParseComplete{})
	s.clientMu.Unlock()
	return true, s.flushClientIfIdle()
}

// flushClient writes what the client loop answered itself.
func (s *session) flushClient() error {
	s.clientMu.Lock()
	defer s.clientMu.Unlock()
	return s.clW.flush()
}

// flushClientIfIdle: once the client has nothing more in flight.
func (s *session) flushClientIfIdle() error {
	if s.cl.buffered() > 0 {
		return nil
	}
	return s.flushClient()
}

// goodStmt is a statement a pooled connection prepared (it parses), and
// once described, its result types (desc nil: no rows).
type goodStmt struct {
	described bool
	desc      *pgproto3.RowDescription
	// catGen: the catalogs' generation when described (a change of
	// encrypted columns since may have changed what the types mean)
	catGen uint64
}

// markGood records a statement a pooled connection prepared: a client's
// Parse of it may be answered without a connection (unattached).
func (p *pool) markGood(name string) {
	p.closedMu.Lock()
	defer p.closedMu.Unlock()
	if p.good == nil || len(p.good) > 100000 {
		p.good = map[string]*goodStmt{}
	}
	if p.good[name] == nil {
		p.good[name] = &goodStmt{}
	}
}

// markDescribed records a prepared statement's result types.
func (p *pool) markDescribed(name string, desc *pgproto3.RowDescription) {
	gen := p.srv.catalogs.gen.Load()
	p.closedMu.Lock()
	defer p.closedMu.Unlock()
	if g := p.good[name]; g != nil && (!g.described || g.catGen != gen) {
		p.good[name] = &goodStmt{described: true, desc: desc, catGen: gen}
	}
}

func (p *pool) goodStmt(name string) *goodStmt {
	p.closedMu.RLock()
	defer p.closedMu.RUnlock()
	return p.good[name]
}

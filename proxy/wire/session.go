// The client loop of one connection.

package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/compute"
	"github.com/pgcipher/pgcipher/proxy/metrics"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
)

// catalogCache keeps the newest catalog of each database.
type catalogCache struct {
	mu  sync.Mutex
	dbs map[string]*cachedCatalog
	gen atomic.Uint64 // bumped by invalidations
}

type cachedCatalog struct {
	cat *catalog.Catalog
	gen uint64
}

func newCatalogCache() *catalogCache { return &catalogCache{dbs: map[string]*cachedCatalog{}} }

func (c *catalogCache) get(db string) (*catalog.Catalog, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.dbs[db]; e != nil && e.gen == c.gen.Load() {
		return e.cat, e.gen
	}
	return nil, 0
}

func (c *catalogCache) put(db string, cat *catalog.Catalog, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen == c.gen.Load() {
		c.dbs[db] = &cachedCatalog{cat: cat, gen: gen}
	}
}

func (c *catalogCache) invalidateAll() { c.gen.Add(1) }

// stmt is a prepared statement as the client named it.
type stmt struct {
	name       string
	sql        string // as the client sent it
	gen        uint64 // the session's names and catalog it was planned with
	plan       *rewrite.Plan
	clientOIDs []uint32 // parameter types the client declared
	// desc: the server's description of the rewritten statement, from the
	// Describe the proxy adds after each Parse (nil: no rows)
	desc  *pgproto3.RowDescription
	shape *shape // how to treat the fields of desc (the relay's)
	// srvName: the server's name for it (the client's, except in
	// transaction mode: pooled.go); srvOIDs, key: its parameter types
	// as the server got them, and its key on pooled connections
	srvName string
	srvOIDs []uint32
	key     string
	// since: the pool's clock at the client's Parse (transaction mode)
	since uint64
	// set: a session-level SET, recorded once it has run (transaction mode)
	set *rewrite.SessionEffect
	// parsed: the server answered its Parse (transaction mode: a second
	// Parse of the name is then PostgreSQL's error 42P05)
	parsed atomic.Bool
}

// portal is a bound statement.
type portal struct {
	st       *stmt
	formats  []int16  // result formats as the client asked
	patterns []string // LIKE patterns of the plan's filters
	// an UPDATE with computed assignments: the Bind of the client's
	// parameters as sent (encrypted), and the values its expressions read
	bound  *pgproto3.Bind
	params []compute.Value
	limits limits // LIMIT and OFFSET the proxy applies (plan.Limited)
	// encrypted: the values of the client's parameters encrypted at Bind,
	// by column label (for the audit log)
	encrypted map[string]int64
}

// session is one client connection.  Its state is grouped by the
// goroutine that owns it: the client loop's (clientSide), the relay's
// (relaySide), and what both read or write (shared: atomics, the queue,
// locks and channels).
type session struct {
	srv  *Server
	db   string
	user string
	// clientAddr and certIdentity: the client's address and its verified
	// certificate's common name ("" for none), for the audit log
	clientAddr, certIdentity string
	clientSide
	relaySide
	shared
}

// clientSide is the client loop's: nothing else reads or writes it.
type clientSide struct {
	// the client's connection, and the server's to write to
	cl  *frameReader
	upW *frameWriter
	// the message being handled, sent on as it came when unchanged
	fromClient pgproto3.FrontendMessage
	clientRaw  []byte

	// sharedCat: the database's catalog; cat: as this session sees it
	// (its search path and temporary relations)
	sharedCat *catalog.Catalog
	cat       *catalog.Catalog
	catGen    uint64
	rightsGen uint64 // the catalog generation rightsCat was read at
	names     names  // the session's search path and temporary relations
	// gen counts changes of names or catalog: a prepared statement
	// planned under another is planned again before it is bound
	gen   uint64
	stale bool

	stmts   map[string]*stmt
	portals map[string]*portal
	plans   map[string]*rewrite.Plan // cacheable plans by SQL text
	// fingerprints: the audit log's statement fingerprints by SQL text
	fingerprints map[string]string
	// templates: by statement shape (rewrite.Shape); nil for a shape
	// that has none
	templates map[string]*rewrite.Template

	inBatch  bool        // extended-protocol messages since the last Sync
	skipping bool        // refused in a batch: drop messages until Sync
	copyIn   *copyStream // COPY FROM STDIN in progress
	// dropCopy: the last simple query was refused; COPY data that a
	// client streams without waiting for CopyInResponse is dropped
	dropCopy bool
}

// relaySide is the relay's (in transaction mode, the relay of the
// connection attached now; one at a time).
type relaySide struct {
	// the server's connection (session mode; transaction mode reads each
	// pooled connection's own)
	up *frameReader
	// the message being relayed, sent on as it came when unchanged
	fromServer serverMsg
	// the index of columns by ciphertext header
	cands    map[colcrypt.Header][]candidate
	candsCat *catalog.Catalog
	// tenantMemo: tenant columns already looked up, with cands (rows.go)
	tenantMemo map[tenantMemo]*colcrypt.Column
	// preludeFailed: the server refused to restore the session's settings
	preludeFailed *pgproto3.ErrorResponse
}

// shared is what both loops (and Shutdown and cancel requests) use.
type shared struct {
	// clW: writes to the client, under clientMu: the relay's, the
	// startup's last, a shutdown's
	clW      *frameWriter
	clientMu sync.Mutex
	// catPtr: the catalog as the session sees it, for the relay (the
	// client loop may reload while the relay still answers a pipeline)
	catPtr atomic.Pointer[catalog.Catalog]
	// rightsCat: the catalog whose grants count (design 13.12): the
	// session's, or a newer one read inside a transaction, so that a
	// right revoked meanwhile counts at the next statement
	rightsCat atomic.Pointer[catalog.Catalog]
	q         queue
	txStatus  atomic.Uint32 // the server's last ReadyForQuery status
	// rolledBack: the relay saw an error or a ROLLBACK since the client
	// loop last settled the session's names
	rolledBack atomic.Bool
	// ddlPending: a statement that may change the catalog was sent; the
	// relay invalidates every session's catalog again once the server is
	// idle outside a transaction (a catalog read meanwhile may predate
	// its commit)
	ddlPending atomic.Bool
	relayErr   chan error
	// relayEnded is closed when the relay loop ends the session
	relayEnded chan struct{}

	// shutdown (service.go): mu is held by the client loop except while
	// it waits for the client's next message, so whoever holds it sees a
	// session between messages; wake asks a draining session to look
	// again whether it is idle; ended is closed when run returns
	mu               sync.Mutex
	wake             chan struct{}
	ended            chan struct{}
	closedByShutdown atomic.Bool
	// the sockets, to close at shutdown (nil in tests without them, and
	// serverSock in transaction mode)
	clientSock net.Conn
	serverSock net.Conn
	// pooled: transaction mode (pooled.go); nil in session mode
	pooled *pooledSession
}

func newSession(srv *Server, client, server *conns, db, user string) *session {
	var up *frameReader
	if server == nil {
		// transaction mode: a pooled connection per transaction, read by
		// its own reader (an idle client holds no server-side buffer)
		server = &conns{}
	} else {
		up = newFrameReader(server.r)
	}
	s := &session{srv: srv, db: db, user: user,
		clientSide: clientSide{cl: newFrameReader(client.r), upW: newFrameWriter(server.w),
			stmts: map[string]*stmt{}, portals: map[string]*portal{}, plans: map[string]*rewrite.Plan{}},
		relaySide: relaySide{up: up}}
	s.clW = newFrameWriter(client.w)
	s.relayErr, s.relayEnded = make(chan error, 1), make(chan struct{})
	s.wake, s.ended = make(chan struct{}, 1), make(chan struct{})
	s.txStatus.Store('I')
	return s
}

// conns is one side's connection: where to read and where to write.
type conns struct {
	r io.Reader
	w io.Writer
}

// run runs the session until either side closes; it says how it ended.
func (s *session) run(params map[string]string) (metrics.End, error) {
	defer close(s.ended)
	s.srv.catalogConns.acquire(s.db)
	defer s.srv.catalogConns.release(s.db)
	path, unusable, err := s.srv.catalogConns.sessionNames(s.db, s.user, params)
	if err == nil {
		s.names.reset(s.user, path, unusable)
		err = s.loadCatalog()
	}
	if err != nil {
		s.clW.send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "58000",
			Message: "pgcipher-proxy: cannot read the encrypted-column catalog: " + err.Error(),
			Hint:    "The proxy reads it on a connection of its own (pgcipher-proxy --catalog)."})
		s.clW.flush()
		return metrics.CatalogFailed, err
	}
	if s.pooled == nil {
		go s.relayFor(s.up)
	}
	// the ReadyForQuery that ended authentication; nothing is pending,
	// so only the relay's asynchronous messages can race with it
	s.clientMu.Lock()
	s.clW.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	err = s.clW.flush()
	s.clientMu.Unlock()
	if err != nil {
		return s.endOf(err, true), err
	}
	// the client loop runs on this goroutine: a session is two
	// goroutines, the fewest that wait on both sockets (design 15.11)
	err = s.clientLoop()
	s.q.close()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		select {
		case rerr := <-s.relayErr:
			return s.endOf(rerr, false), rerr
		default:
		}
	}
	return s.endOf(err, true), err
}

// push queues the answer to a message about to be sent; false: the
// server will skip the message (its batch has failed).
func (s *session) push(a answer) bool { return s.q.push(a) }

// sendServer writes a message of the proxy's own to the server.
func (s *session) sendServer(m pgproto3.FrontendMessage) {
	s.queryDropsUnnamed(m)
	s.upW.send(m)
}

// queryDropsUnnamed: a simple query destroys the server's unnamed
// statement; a pooled connection forgets which one it had.
func (s *session) queryDropsUnnamed(m pgproto3.FrontendMessage) {
	if _, q := m.(*pgproto3.Query); q && s.pooled != nil && s.pooled.sc != nil {
		s.pooled.sc.unnamed = ""
	}
}

// forward writes the client's message m on to the server: the bytes as
// the client sent them, unless changed says that the proxy altered m
// (then encoded again).  A message other than the one being handled is
// always encoded.
func (s *session) forward(m pgproto3.FrontendMessage, changed bool) {
	s.queryDropsUnnamed(m)
	if !changed && m == s.fromClient && s.clientRaw != nil {
		s.upW.raw(s.clientRaw)
		return
	}
	s.upW.send(m)
}

// flushServer writes what is buffered for the server; in transaction
// mode with mu given back meanwhile (the relay may need it, and the write
// may wait for the relay to read).
func (s *session) flushServer() error {
	if s.pooled == nil {
		return s.upW.flush()
	}
	s.unlockPool()
	err := s.upW.flush()
	s.lockPool()
	return err
}

func (s *session) setCatalog(c *catalog.Catalog) {
	if c != s.sharedCat {
		// plans name the columns and keys of the catalog they were made with
		s.plans = map[string]*rewrite.Plan{}
		s.templates = map[string]*rewrite.Template{}
	}
	s.sharedCat = c
	s.rightsCat.Store(c)
	s.applyNames()
	s.gen++
}

// applyNames makes the session's view of the catalog after a change of
// the catalog or of the session's names.
func (s *session) applyNames() {
	s.cat = s.sharedCat.ForSession(s.names.session())
	s.catPtr.Store(s.cat)
}

// catalog is the relay's view of the catalog.
func (s *session) catalog() *catalog.Catalog { return s.catPtr.Load() }

// loadCatalog takes the database's cached catalog or reads it.
func (s *session) loadCatalog() error {
	if cat, gen := s.srv.catalogs.get(s.db); cat != nil && !s.stale {
		s.setCatalog(cat)
		s.catGen, s.rightsGen = gen, gen
		return nil
	}
	gen := s.srv.catalogs.gen.Load()
	cat, err := s.srv.catalogConns.loadCatalog(s.db, s.user)
	if err != nil {
		return err
	}
	s.setCatalog(cat)
	s.catGen, s.stale, s.rightsGen = gen, false, gen
	s.srv.catalogs.put(s.db, cat, gen)
	return nil
}

// refreshRights reads the committed catalog for its grants only (the
// session keeps its own until its transaction ends).
func (s *session) refreshRights() {
	gen := s.srv.catalogs.gen.Load()
	if s.rightsGen == gen {
		return
	}
	cat, _ := s.srv.catalogs.get(s.db)
	if cat == nil {
		var err error
		if cat, err = s.srv.catalogConns.loadCatalog(s.db, s.user); err != nil {
			s.srv.cfg.Log.Debug("catalog reload for rights failed", "err", err)
			return
		}
	}
	s.rightsCat.Store(cat)
	s.rightsGen = gen
}

// refresh reloads the catalog before a statement when it may have
// changed (it is read on the proxy's own connection, which sees what
// was committed); a failed reload keeps the old one.
func (s *session) refresh() {
	if !s.stale && s.catGen == s.srv.catalogs.gen.Load() {
		return
	}
	if s.txStatus.Load() != 'I' || s.inBatch || !s.q.empty() {
		// inside a transaction, or with answers pending, the change may
		// not be committed yet: the next statement outside one reloads;
		// the rights, which no uncommitted change of the session's can
		// have touched, are read now
		s.refreshRights()
		return
	}
	if err := s.loadCatalog(); err != nil {
		s.srv.cfg.Log.Debug("catalog reload failed", "err", err)
	}
}

// changed: a statement may have changed the catalog.
func (s *session) changed() {
	s.stale = true
	s.srv.catalogs.invalidateAll()
}

// analyze returns the plan of sql, from the cache when it can, once the
// session's role may do what it needs with the columns it uses.
func (s *session) analyze(sql string) (*rewrite.Plan, error) {
	p, err := s.planOf(sql)
	if err != nil {
		return nil, err
	}
	if err := s.allowed(p); err != nil {
		s.auditRefused(sql, err)
		return nil, rightRefusal(err)
	}
	return p, nil
}

// planOf returns the plan of sql, from the cache when it can.
func (s *session) planOf(sql string) (*rewrite.Plan, error) {
	if p := s.plans[sql]; p != nil && s.tenantIs(p.Tenant) {
		return p, nil
	}
	if s.cat.Mentions(sql) {
		if p := s.fromTemplate(sql); p != nil {
			return p, nil
		}
	}
	p, err := rewrite.Analyze(sql, s.cat, s.srv.cfg.Keys)
	if err != nil {
		return nil, err
	}
	// statements that name no encrypted relation take the cheap path
	// each time: caching them would fill memory with literal-laden SQL
	if p.Parsed && p.Cacheable && !p.Reload {
		if len(s.plans) > 10000 {
			s.plans = map[string]*rewrite.Plan{}
		}
		s.plans[sql] = p
	}
	return p, nil
}

// fromTemplate plans a statement with literals from the template of its
// shape (design 15.12), made the first time the shape is seen; nil where
// the shape has none or the statement's literals do not fit it, and the
// statement is analysed on its own.
func (s *session) fromTemplate(sql string) *rewrite.Plan {
	shape, lits, ok := rewrite.Shape(sql)
	if !ok {
		return nil
	}
	t, known := s.templates[shape]
	if t != nil && !s.tenantIs(t.Tenant()) {
		known = false // made for another tenant's columns
	}
	if !known {
		var err error
		if t, err = rewrite.NewTemplate(shape, len(lits), sql, s.cat, s.srv.cfg.Keys); err != nil {
			t = nil
		}
		if s.templates == nil || len(s.templates) > 10000 {
			s.templates = map[string]*rewrite.Template{}
		}
		s.templates[shape] = t
	}
	if t == nil {
		return nil
	}
	p, err := t.Plan(lits, rand.Reader)
	if err != nil {
		return nil
	}
	return p
}

// refusal turns an analysis error into the proxy's error for the client.
func refusal(err error) *rewrite.Refusal {
	var r *rewrite.Refusal
	if errors.As(err, &r) {
		return r
	}
	return &rewrite.Refusal{Code: rewrite.CodeRefused, Message: "pgcipher: " + err.Error()}
}

// The harmless failing messages that put the server into the state a
// failed statement would: no side effect, a constant text.
var refusedName = "pgcipher: statement refused by the proxy " + randomTag()

// randomTag is a per-process random suffix: a client cannot prepare a
// statement of that name to make a refused statement look successful.
func randomTag() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func (s *session) clientLoop() error {
	s.mu.Lock() // never given back once the loop ends
	for {
		// between messages: a shutdown may close the session now
		s.mu.Unlock()
		s.wakeDrain()
		typ, raw, err := s.cl.next()
		s.mu.Lock()
		if err != nil {
			return err
		}
		if s.srv.draining.Load() && typ != 'X' && s.idle() {
			// the proxy is shutting down: the message is not run
			s.endIdle()
			return errShutdown
		}
		s.lockPool()
		err = s.message(typ, raw)
		s.unlockPool()
		if err != nil {
			return err
		}
	}
}

// message handles one message of the client's.
func (s *session) message(typ byte, raw []byte) error {
	if s.pooled != nil && s.pooled.sc == nil {
		// between transactions: what the proxy answers itself
		if done, err := s.unattached(typ, raw); done {
			return err
		}
		if err := s.attach(); err != nil {
			return s.noServer(err)
		}
	}
	if typ == 'd' && s.copyIn == nil {
		// COPY data not to encrypt: relayed without decoding
		if !s.dropCopy && !s.skipping {
			s.upW.raw(raw)
		}
		return s.flushIfIdle()
	}
	m, err := decodeFrontend(typ, raw[5:])
	if err != nil {
		return err
	}
	s.fromClient, s.clientRaw = m, raw
	defer func() { s.fromClient, s.clientRaw = nil, nil }()
	if s.skipping {
		_, sync := m.(*pgproto3.Sync)
		_, term := m.(*pgproto3.Terminate)
		if !sync && !term {
			if _, ok := m.(*pgproto3.Flush); ok {
				// the client waits for what it sent so far
				// (asyncpg: Parse, Describe, Flush): the failing
				// message of the refusal must be answered
				s.forward(m, false)
			}
			return s.flushIfIdle()
		}
		s.skipping = false
	}
	if err := s.handle(m); err != nil {
		return err
	}
	return s.flushIfIdle()
}

// flushIfIdle sends the server what is buffered once the client has
// nothing more in flight: every message reaches the server as soon as
// the client has sent it (a statement_timeout between Parse and Sync
// fires as it would without the proxy).
func (s *session) flushIfIdle() error {
	if s.cl.buffered() > 0 {
		return nil
	}
	return s.flushServer()
}

func (s *session) handle(m pgproto3.FrontendMessage) error {
	switch m := m.(type) {
	case *pgproto3.Query:
		return s.query(m)
	case *pgproto3.Parse:
		return s.parse(m)
	case *pgproto3.Bind:
		return s.bind(m)
	case *pgproto3.Describe:
		s.inBatch = true
		e := &describeAnswer{objType: m.ObjectType}
		changed := false
		if m.ObjectType == 'S' {
			e.st = s.stmts[m.Name]
			if e.st != nil && s.pooled != nil {
				s.ensurePrepared(e.st)
				m, changed = &pgproto3.Describe{ObjectType: 'S', Name: e.st.srvName}, true
			}
		} else if p := s.portals[m.Name]; p != nil {
			e.portal = p
		}
		s.push(e)
		s.forward(m, changed)
	case *pgproto3.Execute:
		s.inBatch = true
		p := s.portals[m.Portal]
		var t *stat
		if p == nil {
			t = s.newStat(metrics.Passed, "", "", time.Now())
		} else {
			s.applyNameChanges(p.st.plan)
			t = s.newStat(outcomeOf(p.st.plan, p.st.sql), "", p.st.plan.SQL, time.Now())
			if !s.mayRun(p.st.plan, p.st.sql) {
				return nil // a portal bound before a right was revoked
			}
			if r := s.audited(t, p.st.plan, p.st.sql, p.encrypted); r != nil {
				s.refuseInBatch(r, nil)
				return nil
			}
			p.encrypted = nil // counted once, with the first Execute
		}
		if p != nil && p.st.plan.Update != nil {
			failed, err := s.runUpdate(&rmw{plan: p.st.plan, lock: lockPrefix + p.st.srvName, write: p.st.srvName,
				bound: p.bound, params: p.params, stat: t})
			if failed {
				s.skipping = true
			}
			return err
		}
		changed := false
		if p != nil && p.st.plan.Compute != nil && p.st.plan.Compute.Buffered() {
			// the proxy sorts and limits: the server's rows are all needed
			m, changed = &pgproto3.Execute{Portal: m.Portal}, true
		}
		s.push(&executeAnswer{portal: p, stat: t})
		s.forward(m, changed)
	case *pgproto3.Close:
		s.inBatch = true
		changed := false
		if m.ObjectType == 'S' {
			name := m.Name
			if st := s.stmts[name]; st != nil && s.pooled != nil {
				// the connection's statement goes; a client that has it
				// too prepares it again where it needs it
				s.pooled.sc.prepared.remove(st.srvName)
				s.pooled.pool.markClosed(st.srvName)
				m, changed = &pgproto3.Close{ObjectType: 'S', Name: st.srvName}, true
			}
			delete(s.stmts, name)
		} else {
			delete(s.portals, m.Name)
		}
		s.push(&completeAnswer{})
		s.forward(m, changed)
	case *pgproto3.Sync:
		s.inBatch = false
		s.push(&syncAnswer{})
		s.forward(m, false)
		return s.flushServer()
	case *pgproto3.Flush:
		if s.pooled != nil && (s.pooled.sc == nil || s.q.empty()) {
			return nil // everything sent is answered: nothing to flush
		}
		s.forward(m, false)
		return s.flushServer()
	case *pgproto3.CopyData:
		if s.copyIn != nil {
			return s.copyIn.data(m.Data)
		}
		if s.dropCopy {
			return nil // data of a refused COPY: never sent
		}
		s.forward(m, false)
		return s.flushServer()
	case *pgproto3.CopyDone:
		if s.copyIn != nil {
			c := s.copyIn
			s.copyIn = nil
			return c.done()
		}
		if s.dropCopy {
			return nil
		}
		s.forward(m, false)
		return s.flushServer()
	case *pgproto3.CopyFail:
		if s.copyIn == nil && s.dropCopy {
			return nil
		}
		s.copyIn = nil
		s.forward(m, false)
		return s.flushServer()
	case *pgproto3.FunctionCall:
		s.push(&queryAnswer{plan: &rewrite.Plan{}, stat: s.newStat(metrics.Passed, "", "", time.Now())})
		s.forward(m, false)
		return s.flushServer()
	case *pgproto3.Terminate:
		if s.pooled == nil {
			// in transaction mode the server connection stays open
			s.forward(m, false)
			s.flushServer()
		}
		return errTerminated
	default:
		return fmt.Errorf("wire: unexpected client message %T", m)
	}
	return nil
}

var errTerminated = errors.New("wire: client terminated")

// prepare analyses a statement the client sent (Query or Parse), with
// the catalog and the session's names brought up to date first.
func (s *session) prepare(sql string) (*rewrite.Plan, error) {
	s.settleNames()
	s.refresh()
	p, err := s.analyze(sql)
	if err != nil {
		return nil, err
	}
	if s.pooled != nil {
		for _, c := range p.Names {
			// the pooler replays SET on the next transaction's server
			// connection, not a function's change: the server would
			// keep another tenant than the proxy encrypts for, and hand
			// it to the next client of its connection
			if c.Func && ((c.Kind == rewrite.SetTenant && !c.Local) || c.Kind == rewrite.UnknownTenant) {
				return nil, &rewrite.Refusal{Code: rewrite.CodeRefused,
					Message: "pgcipher: set_config('pgcipher.tenant', ..., false) cannot be pooled (transaction mode)",
					Hint:    "Use SET pgcipher.tenant = '...' (replayed on every transaction's connection), or set_config(..., true) inside the transaction."}
			}
		}
	}
	if p.Reload && p.Parsed && (s.txStatus.Load() != 'I' || s.inBatch) {
		if err := s.encryptionInBlock(sql); err != nil {
			return nil, err
		}
		// DDL naming an encrypted relation's name: a relation the proxy
		// cannot see yet may now come first in the search path
		if s.names.uncommittedDDL() {
			s.namesChanged()
		}
	}
	if p.Reload {
		s.changed()
		s.ddlPending.Store(true)
	}
	return p, nil
}

// encryptionInBlock refuses a statement that creates or changes
// encrypted columns (sql) inside a transaction block or a batch: the
// proxy reads the catalog on its own connection, which sees committed
// changes only.
func (s *session) encryptionInBlock(sql string) error {
	if !s.cat.NamesEncryption(sql) {
		return nil
	}
	return &rewrite.Refusal{Code: rewrite.CodeRefused,
		Message: "pgcipher: statements that create or change encrypted columns must run outside a transaction block",
		Hint:    "Run this statement on its own (autocommit), then the statements that use it: the proxy learns encrypted columns once they are committed."}
}

// settleNames settles the session's name changes once the server has
// answered everything outside a transaction block (before a batch's
// first message marks it open).
func (s *session) settleNames() {
	switch {
	case s.txStatus.Load() == 'I' && !s.inBatch && s.q.empty():
		// nothing pending: what the server did is known
		s.namesChangedIf(s.names.settle(s.rolledBack.Swap(false)))
	case s.rolledBack.Load():
		// rolled back to a savepoint (or failed) inside a block
		s.namesChangedIf(s.names.rolledBackInBlock())
	}
}

// tenantColumn is a tenant-keyed binding's crypto under tenant's key, or
// the refusal (PC007 a tenant without a key, PC003 one shredded).
func (s *session) tenantColumn(b *catalog.Binding, tenant string) (*colcrypt.Column, error) {
	col, err := s.srv.cfg.Keys.TenantColumn(s.cat, b, tenant)
	if err != nil {
		return nil, rewrite.TenantRefusal(err)
	}
	return col, nil
}

// tenantIs: a plan made for tenant ("" : for none) holds under the
// session's tenant now.
func (s *session) tenantIs(tenant string) bool {
	return tenant == "" || (!s.cat.TenantUnknown && tenant == s.cat.Tenant)
}

// namesChangedIf: what a change of name resolution needs, where there
// was one; a change of the tenant alone keeps the plans, which are used
// again under their own tenant only (rewrite.Plan.Tenant).
func (s *session) namesChangedIf(changed, tenantOnly bool) {
	switch {
	case !changed:
	case tenantOnly:
		s.applyNames()
	default:
		s.namesChanged()
	}
}

// applyNames records a statement's changes to name resolution as it is
// sent to the server.
func (s *session) applyNameChanges(p *rewrite.Plan) {
	s.namesChangedIf(s.names.apply(p.Names, s.txStatus.Load() != 'I'))
}

// namesChanged: the session's name resolution changed; plans made with
// the old one go.
func (s *session) namesChanged() {
	s.plans = map[string]*rewrite.Plan{}
	s.templates = map[string]*rewrite.Template{}
	s.applyNames()
	s.gen++
}

func (s *session) query(m *pgproto3.Query) error {
	start := time.Now()
	s.copyIn = nil
	s.dropCopy = false
	var set *rewrite.SessionEffect
	p, err := s.prepare(m.String)
	if err == nil && s.pooled != nil {
		set, err = s.pooledRefusal(m.String)
	}
	if err != nil {
		s.dropCopy = true
		r := refusal(err)
		s.push(&queryAnswer{refused: r, plan: &rewrite.Plan{}, stat: s.newStat(metrics.Refused, r.Code, "", start)})
		s.sendServer(&pgproto3.Query{String: `DEALLOCATE "` + refusedName + `"`})
		return s.flushServer()
	}
	s.applyNameChanges(p)
	t := s.newStat(outcomeOf(p, m.String), "", p.SQL, start)
	if r := s.audited(t, p, m.String, nil); r != nil {
		s.dropCopy = true
		s.push(&queryAnswer{refused: r, plan: &rewrite.Plan{}, stat: s.newStat(metrics.Refused, r.Code, "", start)})
		s.sendServer(&pgproto3.Query{String: `DEALLOCATE "` + refusedName + `"`})
		return s.flushServer()
	}
	if p.Update != nil {
		return s.simpleUpdate(p, t)
	}
	if s.pooled != nil && s.deallocatePooled(m, t) {
		return s.flushServer()
	}
	e := &queryAnswer{plan: p, stat: t, set: set}
	if p.Copy != nil && p.Copy.From {
		s.copyIn = newCopyStream(s, p.Copy)
		s.copyIn.answer = e
	}
	s.push(e)
	if p.SQL == m.String {
		s.forward(m, false)
	} else {
		s.sendServer(&pgproto3.Query{String: p.SQL})
	}
	return s.flushServer()
}

// refuseInBatch answers a refused extended-protocol message: the server
// gets a Describe of a statement that does not exist (failing the batch
// as the statement would have), the client the proxy's error, and the
// rest of the batch is dropped.  t is the statement's stat: nil for a
// refusal, which makes its own.
func (s *session) refuseInBatch(r *rewrite.Refusal, t *stat) {
	if t == nil {
		t = s.newStat(metrics.Refused, r.Code, "", time.Now())
	}
	s.push(&refusedAnswer{refused: r, stat: t})
	s.sendServer(&pgproto3.Describe{ObjectType: 'S', Name: refusedName})
	s.skipping = true
}

func (s *session) parse(m *pgproto3.Parse) error {
	s.settleNames()
	s.copyIn, s.dropCopy = nil, false // a simple query's COPY is over
	// prepared as the batch stood before this message: a Parse that
	// opens one is outside any, and may create or bind encrypted
	// columns in autocommit (psycopg's server-side binding of
	// pgcipher.encrypt_column)
	p, err := s.prepare(m.Query)
	s.inBatch = true
	if err == nil && p.Copy != nil {
		err = &rewrite.Refusal{Code: rewrite.CodeRefused,
			Message: "pgcipher: COPY of relations with encrypted columns needs the simple query protocol",
			Hint:    "Send COPY as a simple query (psql's \\copy, pgx CopyFrom, psycopg's cursor.copy do)."}
	}
	var set *rewrite.SessionEffect
	if err == nil && s.pooled != nil {
		if set, err = s.pooledRefusal(m.Query); err == nil && m.Name != "" && s.stmts[m.Name] != nil &&
			s.stmts[m.Name].parsed.Load() {
			err = errAlreadyPrepared(m.Name)
		}
	}
	if err != nil {
		s.refuseInBatch(refusal(err), nil)
		return nil
	}
	st := &stmt{name: m.Name, srvName: m.Name, sql: m.Query, gen: s.gen, plan: p,
		clientOIDs: append([]uint32(nil), m.ParameterOIDs...), set: set}
	s.stmts[m.Name] = st
	oids := serverOIDs(m, p)
	if s.pooled != nil {
		s.parsePooled(st, oids)
	} else {
		s.push(&completeAnswer{})
		s.sendServer(&pgproto3.Parse{Name: m.Name, Query: p.SQL, ParameterOIDs: oids})
		if up := p.Update; up != nil {
			s.push(&completeAnswer{quiet: true})
			s.sendServer(&pgproto3.Close{ObjectType: 'S', Name: lockPrefix + m.Name})
			s.parseLock(lockPrefix+m.Name, up, oids)
		}
	}
	if s.cat.HasEncryption() {
		// learn the result's types now: later Executes may come without
		// a Describe
		s.push(&describeAnswer{objType: 'S', st: st, quiet: true})
		s.sendServer(&pgproto3.Describe{ObjectType: 'S', Name: st.srvName})
	}
	return nil
}

// serverOIDs are the parameter types the server gets for statement p:
// the client's, the encrypted types of encrypted parameters, and the types
// of parameters of the proxy's own.
func serverOIDs(m *pgproto3.Parse, p *rewrite.Plan) []uint32 {
	oids := append([]uint32(nil), m.ParameterOIDs...)
	for len(oids) < len(p.Params) {
		oids = append(oids, 0)
	}
	for i, prm := range p.Params {
		if prm == nil {
			continue
		}
		if prm.Array {
			oids[i] = prm.ArrayOID
		} else {
			oids[i] = prm.EncType.OID
		}
	}
	if up := p.Update; up != nil {
		oids = updateOIDs(up, oids)
	}
	// parameters the server's query no longer reads (the proxy's LIMIT
	// and OFFSET, its computed outputs') are typed for it
	oids = typeParam(oids, p.LimitParam, 20) // int8
	oids = typeParam(oids, p.OffsetParam, 20)
	if cp := p.Compute; cp != nil {
		for n, oid := range cp.ParamOIDs {
			oids = typeParam(oids, n, oid)
		}
	}
	return oids
}

func (s *session) bind(m *pgproto3.Bind) error {
	if !s.inBatch {
		// a prepared statement bound again after a catalog change (an
		// order format moved on, 13.5b), or under the tenant a finished
		// transaction block's SET LOCAL left, is planned again below
		s.settleNames()
		s.refresh()
	}
	s.inBatch = true
	s.copyIn, s.dropCopy = nil, false
	st := s.stmts[m.PreparedStatement]
	if st != nil && (st.gen != s.gen || !s.tenantIs(st.plan.Tenant)) {
		if err := s.replan(st); err != nil {
			s.refuseInBatch(refusal(err), nil)
			return nil
		}
	}
	// the rights as they are now: a statement prepared before a right
	// was revoked (in a transaction too) is refused at its next Bind
	if st != nil && !s.mayRun(st.plan, st.sql) {
		return nil
	}
	if st != nil && st.plan.Reload {
		// the statement changes the catalog when it runs, not when it
		// was parsed (pgx and psycopg prepare it first, in a batch of its
		// own, and may run it again later): refused in a transaction
		// block as when parsed, and what was read since is stale once it
		// is committed
		if st.plan.Parsed && s.txStatus.Load() != 'I' {
			if err := s.encryptionInBlock(st.sql); err != nil {
				s.refuseInBatch(refusal(err), nil)
				return nil
			}
		}
		s.changed()
		s.ddlPending.Store(true)
	}
	changed := false // m altered: relayed encoded again
	if st != nil && s.pooled != nil {
		s.ensurePrepared(st)
		if m.PreparedStatement != st.srvName {
			m.PreparedStatement, changed = st.srvName, true
		}
	}
	if st != nil && st.plan.Hidden > 0 && len(m.ResultFormatCodes) > 1 {
		// the client formats the fields it sees; the hidden ones come as text
		for i := 0; i < st.plan.Hidden; i++ {
			m.ResultFormatCodes = append(m.ResultFormatCodes, 0)
		}
		changed = true
	}
	if st != nil && st.plan.Update != nil {
		return s.bindUpdate(st, m)
	}
	clientFormats := append([]int16(nil), m.ResultFormatCodes...)
	if st != nil && st.plan.Compute != nil {
		m.ResultFormatCodes, _ = computeFormats(st.plan.Compute, m.ResultFormatCodes, true)
		changed = true
	}
	var params []compute.Value // what computed outputs read
	var lim limits             // LIMIT and OFFSET the proxy applies
	if st != nil {
		var err error
		if st.plan.Compute != nil && len(st.plan.Compute.Params) > 0 {
			params, err = clientParamValues(st.plan.Compute.Params, st, m)
		}
		if err == nil {
			lim, err = portalLimits(st, m)
		}
		if err != nil {
			s.refuseInBatch(refusal(err), nil)
			return nil
		}
	}
	if st == nil || (len(st.plan.Params) == 0 && len(st.plan.Filters) == 0) {
		if st != nil {
			s.portals[m.DestinationPortal] = &portal{st: st, formats: clientFormats, params: params, limits: lim}
		}
		s.push(&completeAnswer{})
		sent := withoutUnsent(st, m)
		s.forward(sent, changed || sent != m)
		return nil
	}
	out, patterns, err := encryptParams(st, m, s.tenantColumn)
	if err != nil {
		s.refuseInBatch(refusal(err), nil)
		return nil
	}
	out = withoutUnsent(st, out)
	s.portals[m.DestinationPortal] = &portal{st: st, formats: clientFormats, patterns: patterns, params: params, limits: lim,
		encrypted: s.paramCounts(st.plan, m)}
	s.push(&completeAnswer{})
	s.sendServer(out)
	return nil
}

// replan checks a prepared statement planned before a change of the
// session's names or of the catalog: PostgreSQL plans it again with the
// new names, so the proxy does; a plan that would now differ (another
// relation, other encrypted parameters) is refused rather than bound.
func (s *session) replan(st *stmt) error {
	p, err := s.analyze(st.sql)
	if err != nil {
		return err
	}
	if !samePlan(st.plan, p) {
		return &rewrite.Refusal{Code: rewrite.CodeRefused,
			Message: fmt.Sprintf("pgcipher: prepared statement %q names other relations or columns since it was prepared", st.name),
			Hint:    "Prepare it again: a change of search_path, of temporary relations or of encrypted columns changed what it names (or of pgcipher.tenant, for a literal of a tenant-keyed column)."}
	}
	// the new plan's columns: an order format may have changed (13.5b)
	st.plan, st.gen = p, s.gen
	return nil
}

// samePlan: two plans of one statement send the same SQL and encrypt the
// same parameters the same way.
func samePlan(a, b *rewrite.Plan) bool {
	if a.SQL != b.SQL || len(a.Params) != len(b.Params) || (a.Update == nil) != (b.Update == nil) ||
		(a.Compute == nil) != (b.Compute == nil) || a.Hidden != b.Hidden {
		return false
	}
	for i := range a.Params {
		x, y := a.Params[i], b.Params[i]
		if (x == nil) != (y == nil) {
			return false
		}
		if x != nil && (x.EncType.OID != y.EncType.OID || x.Array != y.Array || x.Pattern != y.Pattern || x.TenantParam != y.TenantParam ||
			(x.Column == nil) != (y.Column == nil) || x.Column != nil && x.Column.Spec().Family() != y.Column.Spec().Family()) {
			return false
		}
	}
	return true
}

// updateOIDs adds the types of the write-back's own parameters.
func updateOIDs(up *rewrite.UpdatePlan, oids []uint32) []uint32 {
	for len(oids) < up.TableoidParam {
		oids = append(oids, 0)
	}
	for n, oid := range up.ParamOIDs {
		oids = typeParam(oids, n, oid)
	}
	return oids
}

// typeParam gives parameter $n type oid where the client declared none
// (n 0: none).
func typeParam(oids []uint32, n int, oid uint32) []uint32 {
	if n <= 0 {
		return oids
	}
	for len(oids) < n {
		oids = append(oids, 0)
	}
	if oids[n-1] == 0 {
		oids[n-1] = oid
	}
	return oids
}

// bindUpdate binds the write-back statement with the client's parameters
// (encrypted) and NULL for the computed values and the row, which
// Execute fills in per locked row; the server's portal is never run.
func (s *session) bindUpdate(st *stmt, m *pgproto3.Bind) error {
	out := m
	if len(st.plan.Params) > 0 {
		var err error
		if out, _, err = encryptParams(st, m, s.tenantColumn); err != nil {
			s.refuseInBatch(refusal(err), nil)
			return nil
		}
	}
	params, err := clientParamValues(st.plan.Update.ExprParams, st, m)
	if err != nil {
		s.refuseInBatch(refusal(err), nil)
		return nil
	}
	up := st.plan.Update
	b := &pgproto3.Bind{DestinationPortal: m.DestinationPortal, PreparedStatement: m.PreparedStatement,
		Parameters: make([][]byte, up.TableoidParam), ParameterFormatCodes: make([]int16, up.TableoidParam)}
	for i, v := range out.Parameters {
		if i < len(b.Parameters) {
			if v != nil {
				b.Parameters[i] = bytes.Clone(v)
			}
			b.ParameterFormatCodes[i] = formatOf(out.ParameterFormatCodes, i)
		}
	}
	s.portals[m.DestinationPortal] = &portal{st: st, bound: b, params: params}
	s.push(&completeAnswer{})
	s.sendServer(b)
	return nil
}

// simpleUpdate runs a simple-protocol UPDATE with computed assignments:
// lock, compute and write back with unnamed statements, then Sync (one
// implicit transaction unless the client has opened one).
func (s *session) simpleUpdate(p *rewrite.Plan, t *stat) error {
	up := p.Update
	if s.pooled != nil {
		s.pooled.sc.unnamed = "" // the lock and the write-back take its place
	}
	s.push(&completeAnswer{quiet: true})
	s.sendServer(&pgproto3.Parse{Query: up.LockSQL})
	r := &rmw{plan: p, bound: &pgproto3.Bind{},
		writeParse: &pgproto3.Parse{Query: p.SQL, ParameterOIDs: updateOIDs(up, nil)}, stat: t}
	_, err := s.runUpdate(r)
	s.skipping = false
	if err != nil {
		return err
	}
	s.push(&syncAnswer{stat: t})
	s.sendServer(&pgproto3.Sync{})
	return s.flushServer()
}

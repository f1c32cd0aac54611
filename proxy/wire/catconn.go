// The proxy's own connections to each database: the encrypted-column
// catalog and a client's default search path are read there, never on a
// client's connection (where a query of the proxy's would run inside the
// client's transaction, see its notifications and change its state).

package wire

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/singleflight"

	"github.com/pgcipher/pgcipher/proxy/catalog"
)

// catalogConns keeps one connection per database (and user, when the
// catalog connection string names none), opened when first needed and
// again after an error; each has its own lock, so that a slow database
// holds up only its own sessions.
//
// A connection must never hold a database that a DBA needs alone: DROP
// DATABASE and CREATE DATABASE … TEMPLATE fail while another session is
// connected to it, a directly connected one's too.  So a database's
// catalog connections are closed when its last session through the proxy
// ends, and any of them unused for catalogIdle.
type catalogConns struct {
	srv      *Server
	mu       sync.Mutex // guards conns and sessions
	conns    map[string]*catalogConn
	sessions map[string]int // the sessions of each database
	// logins: one lookup of a role's search_path and unusable schemas
	// in flight per database and role, shared by the logins waiting
	// for it (1,000 clients logging in at once made 2,000 round trips,
	// one after another, on the database's catalog connection)
	logins singleflight.Group
}

type catalogConn struct {
	mu   sync.Mutex
	conn *pgconn.PgConn
	// pathIsDefault: the connection's own search_path is the server's
	// (its source is the configuration, the command line or the
	// default, which no setting of the connection can change later)
	pathIsDefault bool
	db            string
	used          time.Time   // the end of its last use
	idle          *time.Timer // closes it once unused for catalogIdle
}

// catalogTimeout bounds one catalog read, connecting included.
const catalogTimeout = 30 * time.Second

// catalogIdle: a catalog connection unused this long is closed.
var catalogIdle = 10 * time.Second

// acquire counts a session of database db; release ends it, and closes
// the database's catalog connections with its last session.
func (c *catalogConns) acquire(db string) {
	c.mu.Lock()
	c.sessions[db]++
	c.mu.Unlock()
}

func (c *catalogConns) release(db string) {
	c.mu.Lock()
	c.sessions[db]--
	var closing []*catalogConn
	if c.sessions[db] <= 0 {
		delete(c.sessions, db)
	}
	// in transaction mode the database's pool holds server connections
	// past its last session anyway (server-idle-timeout): the catalog
	// connections stay too, until 10 s unused, rather than be opened
	// again at each login of clients that connect for a statement
	if c.sessions[db] <= 0 && c.srv.PoolConfig().Mode != TransactionMode {
		for k, e := range c.conns {
			if e.db == db {
				closing = append(closing, e)
				delete(c.conns, k)
			}
		}
	}
	c.mu.Unlock()
	for _, e := range closing {
		e.idle.Stop()
		e.close(0)
	}
}

// close closes e's connection if it has not been used for idle.
func (e *catalogConn) close(idle time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn == nil || idle > 0 && time.Since(e.used) < idle {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.conn.Close(ctx)
	e.conn = nil
}

// with runs f on the catalog connection of database db; user is the
// client's, used when the catalog connection string names none.
func (c *catalogConns) with(db, user string, f func(ctx context.Context, e *catalogConn) error) error {
	key := db + "\x00" + user
	if c.srv.catalogUser {
		key = db
	}
	c.mu.Lock()
	e := c.conns[key]
	if e == nil {
		e = &catalogConn{db: db}
		e.idle = time.AfterFunc(catalogIdle, func() { e.close(catalogIdle) })
		c.conns[key] = e
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	e.mu.Lock()
	defer func() {
		e.used = time.Now()
		e.idle.Reset(catalogIdle)
		e.mu.Unlock()
	}()
	reused := e.conn != nil && !e.conn.IsClosed()
	if !reused {
		if err := c.connect(ctx, e, db, user); err != nil {
			return err
		}
	}
	err := f(ctx, e)
	if err != nil && reused && e.conn.IsClosed() {
		// a kept connection the server closed meanwhile (a restart, a
		// terminated backend): once more on a new one, so that a client
		// is not refused for what happened while no one used it
		if err = c.connect(ctx, e, db, user); err != nil {
			return err
		}
		err = f(ctx, e)
	}
	if err != nil && !e.conn.IsClosed() && e.conn.TxStatus() != 'I' {
		e.conn.Close(ctx) // a connection in an unknown state is not reused
	}
	return err
}

// connect opens e's connection to database db (as user where the catalog
// connection string names none).
func (c *catalogConns) connect(ctx context.Context, e *catalogConn, db, user string) error {
	cfg := c.srv.catalogCfg.Copy()
	cfg.Database = db
	if !c.srv.catalogUser {
		// as the client: with the credentials a pooled connection of its
		// would use (transaction mode)
		cfg.User = user
		c.srv.loginAs(cfg)
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "pgcipher-proxy catalog"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("catalog connection to database %q: %w", db, err)
	}
	e.conn = conn
	rr, err := conn.Exec(ctx, pathSourceQuery).ReadAll()
	e.pathIsDefault = err == nil && len(rr) == 1 && len(rr[0].Rows) == 1 && string(rr[0].Rows[0][0]) == "t"
	return nil
}

// closeAll closes every catalog connection.
func (c *catalogConns) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for k, e := range c.conns {
		e.mu.Lock()
		e.idle.Stop()
		if e.conn != nil {
			e.conn.Close(ctx)
			e.conn = nil
		}
		e.mu.Unlock()
		delete(c.conns, k)
	}
}

// querier runs the catalog's queries on a catalog connection.
type querier struct {
	ctx  context.Context
	conn *pgconn.PgConn
}

func (q querier) SimpleQuery(sql string) ([]catalog.Result, error) {
	results, err := q.conn.Exec(q.ctx, sql).ReadAll()
	if err != nil {
		return nil, err
	}
	var out []catalog.Result
	for _, r := range results {
		if r.Err != nil {
			return nil, r.Err
		}
		if !r.CommandTag.Select() {
			continue // pgconn leaves FieldDescriptions nil for no rows: the tag says it
		}
		out = append(out, catalog.Result{Rows: r.Rows})
	}
	return out, nil
}

// loadCatalog reads database db's catalog.
func (c *catalogConns) loadCatalog(db, user string) (*catalog.Catalog, error) {
	var cat *catalog.Catalog
	err := c.with(db, user, func(ctx context.Context, e *catalogConn) error {
		if cached, _ := c.srv.catalogs.get(db); cached != nil {
			cat = cached // read by another session while this one waited
			return nil
		}
		var err error
		if cat, err = catalog.Load(querier{ctx: ctx, conn: e.conn}); err == nil {
			cat.SetDatabase(db)
		}
		return err
	})
	return cat, err
}

// searchPathQuery: the search_path a new session of a role in a database
// starts with, as PostgreSQL chooses it: the setting for the role in the
// database, for the role, for the database, then the server's (the
// catalog connection's own when it comes from the configuration file or
// the default; the built-in default otherwise).
const searchPathQuery = `SELECT COALESCE(` + roleSearchPath + `,
 (SELECT 'search_path=' || CASE WHEN source IN ('default', 'configuration file', 'command line', 'environment variable')
   THEN setting ELSE boot_val END FROM pg_catalog.pg_settings WHERE name = 'search_path'))`

// roleSearchPath: the setting for the role in the database, for the
// role, for the database (NULL: none).
const roleSearchPath = `
 (SELECT c FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) c
  WHERE c LIKE 'search\_path=%' AND s.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = $1))
    AND s.setrole IN (0, (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $2))
  ORDER BY s.setdatabase <> 0 AND s.setrole <> 0 DESC, s.setrole <> 0 DESC, s.setdatabase <> 0 DESC LIMIT 1)`

// pathSourceQuery: whether a connection's search_path is the server's
// own setting.  Then current_setting('search_path') is what
// searchPathQuery's pg_settings lookup gives, at a tenth of its cost
// (pg_settings builds every setting's row: 2 ms a login).
const pathSourceQuery = `SELECT source IN ('default', 'configuration file', 'command line', 'environment variable')
 FROM pg_catalog.pg_settings WHERE name = 'search_path'`

// searchPathQueryCurrent is searchPathQuery for a connection whose
// search_path is the server's (pathSourceQuery).
const searchPathQueryCurrent = `SELECT COALESCE(` + roleSearchPath + `,
 'search_path=' || pg_catalog.current_setting('search_path'))`

// unusableQuery: the schemas a role may not look into (no USAGE), which
// PostgreSQL skips on the search path.
const unusableQuery = `SELECT n.nspname FROM pg_catalog.pg_namespace n
 WHERE n.nspname !~ '^pg_(toast_)?temp_' AND NOT pg_catalog.has_schema_privilege($1, n.oid, 'USAGE')`

// sessionNames returns the search_path setting a client session starts
// with (its startup parameters' if it sets one, else the server's choice
// for its role and database) and the schemas its user cannot use.
func (c *catalogConns) sessionNames(db, user string, params map[string]string) (string, map[string]bool, error) {
	setting, fromStartup := startupSearchPath(params)
	v, err, _ := c.logins.Do(db+"\x00"+user, func() (any, error) { return c.roleNames(db, user) })
	if err != nil {
		return "", nil, err
	}
	r := v.(roleNames)
	if !fromStartup {
		setting = r.path
	}
	return setting, r.unusable, nil
}

// roleNames is what a role's sessions in a database start with: its
// search_path setting and the schemas it cannot use (read-only: shared
// by the sessions that asked at once).
type roleNames struct {
	path     string
	unusable map[string]bool
}

// roleNames reads a role's names in one round trip.
func (c *catalogConns) roleNames(db, user string) (roleNames, error) {
	r := roleNames{unusable: map[string]bool{}}
	err := c.with(db, user, func(ctx context.Context, e *catalogConn) error {
		q := searchPathQuery
		if e.pathIsDefault {
			q = searchPathQueryCurrent
		}
		b := &pgconn.Batch{}
		b.ExecParams(q, [][]byte{[]byte(db), []byte(user)}, nil, nil, nil)
		b.ExecParams(unusableQuery, [][]byte{[]byte(user)}, nil, nil, nil)
		res, err := e.conn.ExecBatch(ctx, b).ReadAll()
		if err != nil {
			return err
		}
		if len(res) != 2 {
			return fmt.Errorf("catalog: %d results for the role's names, want 2", len(res))
		}
		for _, x := range res {
			if x.Err != nil {
				return x.Err
			}
		}
		if len(res[0].Rows) == 1 && len(res[0].Rows[0]) == 1 {
			r.path = strings.TrimPrefix(string(res[0].Rows[0][0]), "search_path=")
		}
		for _, row := range res[1].Rows {
			r.unusable[string(row[0])] = true
		}
		return nil
	})
	return r, err
}

// startupSearchPath finds search_path in a startup packet, as a parameter
// of its own or in options (-c search_path=... or --search_path=...).
func startupSearchPath(params map[string]string) (string, bool) {
	value, found := "", false
	for k, v := range params {
		if gucName(k) == "search_path" {
			value, found = v, true
		}
	}
	// options: -c name=value, -cname=value or --name=value; "\ " is a
	// space inside a value; later settings win, as in PostgreSQL
	opts := strings.Fields(strings.ReplaceAll(params["options"], `\ `, "\x00"))
	for i := 0; i < len(opts); i++ {
		o := opts[i]
		switch {
		case o == "-c" && i+1 < len(opts):
			i++
			o = opts[i]
		case strings.HasPrefix(o, "-c"):
			o = o[2:]
		case strings.HasPrefix(o, "--"):
			o = o[2:]
		default:
			continue
		}
		if k, v, ok := strings.Cut(o, "="); ok && gucName(k) == "search_path" {
			value, found = strings.ReplaceAll(v, "\x00", " "), true
		}
	}
	return value, found
}

// gucName normalises a setting's name as PostgreSQL does: case folded,
// "-" read as "_".
func gucName(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), "-", "_")
}

// expandSearchPath splits a search_path setting into schema names as
// PostgreSQL does (identifiers, quoted or folded to lower case), with
// "$user" replaced by the user's name and pg_temp and pg_catalog first
// unless the setting places them.
func expandSearchPath(setting, user string) []string {
	var names []string
	for _, item := range splitIdentifiers(setting) {
		if item == "$user" {
			item = user
		}
		names = append(names, item)
	}
	var out []string
	has := func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
	if !has("pg_temp") {
		out = append(out, "pg_temp")
	}
	if !has("pg_catalog") {
		out = append(out, "pg_catalog")
	}
	return append(out, names...)
}

// splitIdentifiers splits a comma-separated list of identifiers, each
// quoted ("My Schema", with "" for a quote) or not (folded to lower case).
func splitIdentifiers(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			break
		}
		var b strings.Builder
		if s[i] == '"' {
			i++
			for i < len(s) {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						b.WriteByte('"')
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(s[i])
				i++
			}
		} else {
			for i < len(s) && s[i] != ',' {
				b.WriteByte(s[i])
				i++
			}
			out = append(out, strings.ToLower(strings.TrimSpace(b.String())))
			continue
		}
		out = append(out, b.String())
		for i < len(s) && s[i] != ',' {
			i++
		}
	}
	return out
}

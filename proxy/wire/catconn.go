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

	"github.com/pgcipher/pgcipher/proxy/catalog"
)

// catalogConns keeps one connection per database, opened when first
// needed and again after an error.
type catalogConns struct {
	srv   *Server
	mu    sync.Mutex
	conns map[string]*pgconn.PgConn // by database and user
}

// catalogTimeout bounds one catalog read, connecting included.
const catalogTimeout = 30 * time.Second

// with runs f on the catalog connection of database db; user is the
// client's, used when the catalog connection string names none.
func (c *catalogConns) with(db, user string, f func(ctx context.Context, conn *pgconn.PgConn) error) error {
	key := db + "\x00" + user
	if c.srv.catalogCfg.User != "" && c.srv.catalogUser {
		key = db
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	conn := c.conns[key]
	if conn == nil || conn.IsClosed() {
		cfg := c.srv.catalogCfg.Copy()
		cfg.Database = db
		if !c.srv.catalogUser {
			cfg.User = user
		}
		if cfg.RuntimeParams == nil {
			cfg.RuntimeParams = map[string]string{}
		}
		cfg.RuntimeParams["application_name"] = "pgcipher-proxy catalog"
		var err error
		if conn, err = pgconn.ConnectConfig(ctx, cfg); err != nil {
			return fmt.Errorf("catalog connection to database %q: %w", db, err)
		}
		c.conns[key] = conn
	}
	err := f(ctx, conn)
	if err != nil && !conn.IsClosed() && conn.TxStatus() != 'I' {
		conn.Close(ctx) // a connection in an unknown state is not reused
	}
	return err
}

// closeAll closes every catalog connection.
func (c *catalogConns) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for k, conn := range c.conns {
		conn.Close(ctx)
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
		if r.FieldDescriptions == nil {
			continue
		}
		out = append(out, catalog.Result{Rows: r.Rows})
	}
	return out, nil
}

// loadCatalog reads database db's catalog.
func (c *catalogConns) loadCatalog(db, user string) (*catalog.Catalog, error) {
	var cat *catalog.Catalog
	err := c.with(db, user, func(ctx context.Context, conn *pgconn.PgConn) error {
		var err error
		cat, err = catalog.Load(querier{ctx: ctx, conn: conn})
		return err
	})
	return cat, err
}

// searchPathQuery: the search_path a new session of a role in a database
// starts with, as PostgreSQL chooses it: the setting for the role in the
// database, for the role, for the database, then the server's (the
// catalog connection's own when it comes from the configuration file or
// the default; the built-in default otherwise).
const searchPathQuery = `SELECT COALESCE(
 (SELECT c FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) c
  WHERE c LIKE 'search\_path=%' AND s.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = $1))
    AND s.setrole IN (0, (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $2))
  ORDER BY s.setdatabase <> 0 AND s.setrole <> 0 DESC, s.setrole <> 0 DESC LIMIT 1),
 (SELECT 'search_path=' || CASE WHEN source IN ('default', 'configuration file', 'command line', 'environment variable')
   THEN setting ELSE boot_val END FROM pg_catalog.pg_settings WHERE name = 'search_path'))`

// defaultSearchPath returns the search_path setting a client session
// starts with: its startup parameters' if it sets one, else the server's
// choice for its role and database.
func (c *catalogConns) defaultSearchPath(db, user string, params map[string]string) (string, error) {
	if v, ok := startupSearchPath(params); ok {
		return v, nil
	}
	var setting string
	err := c.with(db, user, func(ctx context.Context, conn *pgconn.PgConn) error {
		res := conn.ExecParams(ctx, searchPathQuery, [][]byte{[]byte(db), []byte(user)}, nil, nil, nil).Read()
		if res.Err != nil {
			return res.Err
		}
		if len(res.Rows) == 1 && len(res.Rows[0]) == 1 {
			setting = strings.TrimPrefix(string(res.Rows[0][0]), "search_path=")
		}
		return nil
	})
	return setting, err
}

// startupSearchPath finds search_path in a startup packet, as a parameter
// of its own or in options (-c search_path=... or --search_path=...).
func startupSearchPath(params map[string]string) (string, bool) {
	if v, ok := params["search_path"]; ok {
		return v, true
	}
	opts := strings.Fields(strings.ReplaceAll(params["options"], `\ `, "\x00"))
	for i, o := range opts {
		o = strings.ReplaceAll(o, "\x00", " ")
		switch {
		case o == "-c" && i+1 < len(opts) && strings.HasPrefix(opts[i+1], "search_path="):
			return strings.ReplaceAll(strings.TrimPrefix(opts[i+1], "search_path="), "\x00", " "), true
		case strings.HasPrefix(o, "-csearch_path="):
			return strings.TrimPrefix(o, "-csearch_path="), true
		case strings.HasPrefix(o, "--search_path="):
			return strings.TrimPrefix(o, "--search_path="), true
		}
	}
	return "", false
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

// The catalog of one database as the proxy sees it, and the queries that
// load it.

package catalog

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// Result is one result set of a simple query, in text format; a nil
// value is NULL.
type Result struct {
	Rows [][][]byte
}

// Querier runs a simple query (several statements allowed) and returns
// one Result per statement that returned rows.
type Querier interface {
	SimpleQuery(sql string) ([]Result, error)
}

// EncType is a type of the extension: enc_T or enc_T_ord.
type EncType struct {
	OID   uint32
	Name  string // enc_int4, enc_text_ord, ...
	Plain colcrypt.Type
	Ord   bool
	// ArrayOID is the OID of the type's array type (enc_T[]).
	ArrayOID uint32
}

// Attr is a column of a relation that has encrypted columns.
type Attr struct {
	Name    string
	Num     int16
	TypeOID uint32
	Enc     *EncType // nil: a plaintext column
	Binding *Binding // nil: not bound (plaintext, or an enc type in a view or an unbound column)
}

// Binding is what pgcipher.encrypted_columns says of a column.
type Binding struct {
	Spec       colcrypt.Spec
	KeyName    string
	CMKName    string
	WrappedCEK []byte
	// Database: the database whose catalog holds the binding (labels are
	// unique within a database only: two databases may each have
	// public.t.c under keys of their own)
	Database string
	// TenantBy: "" for a column under its column key; "session" or the
	// name of the row's tenant column for a tenant-keyed one (13.13)
	TenantBy string
}

// Relation is a table, view or materialized view with at least one column
// of an encrypted type.
type Relation struct {
	OID    uint32
	Schema string
	Name   string
	Attrs  []*Attr // in attnum order
}

// Attr returns the relation's column named name, or nil.
func (r *Relation) Attr(name string) *Attr {
	for _, a := range r.Attrs {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// AttrNum returns the column with attribute number num, or nil.
func (r *Relation) AttrNum(num int16) *Attr {
	for _, a := range r.Attrs {
		if a.Num == num {
			return a
		}
	}
	return nil
}

// Catalog is one database's encrypted columns at one moment, seen from
// one session (its search path and temporary relations).
type Catalog struct {
	ExtSchema string // schema of the extension's types; "" without the extension
	Types     map[uint32]*EncType
	Relations map[uint32]*Relation
	byName    map[string][]*Relation
	// plainNamed: the schemas holding a relation without encrypted
	// columns that has the name of one with them (it may come first in a
	// search path)
	plainNamed map[string][]string
	names      []string // lower-case relation names, for Mentions
	// database: the one it was read from (SetDatabase); grants: the
	// rows of pgcipher.column_rights, verified on first use
	database string
	grants   []GrantRow
	rights   *rights
	// tenants: pgcipher.tenant_keys and shredded_tenants (design 13.13)
	tenants *tenants
	// shared: the catalog this one is a session's view of (ForSession)
	shared *Catalog
	Session
}

// Session is what name resolution needs from one client session.
type Session struct {
	// SearchPath: the schemas an unqualified name is looked up in, in
	// order (pg_temp and pg_catalog come first unless named)
	SearchPath []string
	// Temps: names of temporary relations the session created; an
	// unqualified name among them is the temporary relation
	Temps map[string]bool
	// PathUnknown: the session changed its search path in a way the
	// proxy does not follow
	PathUnknown bool
	// Tenant: the session's setting pgcipher.tenant ("" unset);
	// TenantUnknown: changed in a way the proxy does not follow
	Tenant        string
	TenantUnknown bool
	// Before: the state before changes the server has not confirmed
	// yet (nil: none); a name must resolve the same way in both
	Before *Session
}

// ForSession returns the catalog as session s sees it (the relations are
// shared, not copied).
func (c *Catalog) ForSession(s Session) *Catalog {
	out := *c
	out.Session = s
	out.shared = c.Shared()
	return &out
}

// Shared is the catalog a session's view was made from (itself for one
// that is no session's view): the same pointer for every view of it.
func (c *Catalog) Shared() *Catalog {
	if c.shared != nil {
		return c.shared
	}
	return c
}

// NameError: an unqualified name the proxy cannot resolve for sure.
type NameError struct{ Name string }

func (e *NameError) Error() string {
	return fmt.Sprintf("the proxy cannot tell which relation %q names: this session changed its search_path, or its open transaction changed relations of that name, in a way the proxy does not follow", e.Name)
}

// Empty is the catalog of a database without the extension.
func Empty() *Catalog {
	return &Catalog{Types: map[uint32]*EncType{}, Relations: map[uint32]*Relation{}, byName: map[string][]*Relation{},
		plainNamed: map[string][]string{}, rights: &rights{}}
}

// New builds a catalog from its parts (tests, and callers that read the
// catalog another way).
func New(extSchema string, types []*EncType, rels []*Relation, searchPath []string) *Catalog {
	c := Empty()
	c.ExtSchema, c.SearchPath = extSchema, searchPath
	for _, t := range types {
		c.Types[t.OID] = t
	}
	for _, r := range rels {
		c.Relations[r.OID] = r
		c.byName[r.Name] = append(c.byName[r.Name], r)
		c.names = append(c.names, strings.ToLower(r.Name))
	}
	return c
}

// HasEncryption reports whether any relation has an encrypted column.
func (c *Catalog) HasEncryption() bool { return len(c.Relations) > 0 }

// Mentions is the proxy's cheap test before parsing: whether sql may name
// an encrypted relation or the pgcipher schema.  False means the
// statement cannot touch an encrypted column by name.
func (c *Catalog) Mentions(sql string) bool {
	low := strings.ToLower(sql)
	if strings.Contains(low, "pgcipher") {
		return true
	}
	if c.ExtSchema == "" {
		return false
	}
	if strings.Contains(low, "enc_") {
		return true
	}
	for _, n := range c.names {
		if strings.Contains(low, n) {
			return true
		}
	}
	return false
}

// TypeNamed reports whether name is one of the extension's encrypted
// types.
func (c *Catalog) TypeNamed(name string) bool {
	for _, t := range c.Types {
		if t.Name == name {
			return true
		}
	}
	return false
}

// Named reports whether a relation with encrypted columns has this name.
func (c *Catalog) Named(name string) bool { return len(c.byName[name]) > 0 }

// AddPlainNamed records that schema holds a relation without encrypted
// columns named name (tests; Load reads them from the server).
func (c *Catalog) AddPlainNamed(schema, name string) {
	c.plainNamed[name] = append(c.plainNamed[name], schema)
}

// NamesEncryption reports whether sql names one of the extension's
// encrypted types or the pgcipher schema: a statement that may create or
// bind encrypted columns.
func (c *Catalog) NamesEncryption(sql string) bool {
	low := strings.ToLower(sql)
	if strings.Contains(low, "pgcipher") {
		return true
	}
	for _, t := range c.Types {
		if strings.Contains(low, t.Name) {
			return true
		}
	}
	return false
}

// Lookup resolves a relation name as PostgreSQL would through the search
// path (schema "" for an unqualified name); nil means a relation without
// encrypted columns (or none).  An unqualified name that the session may
// resolve otherwise than the proxy can follow returns nil too: Resolve
// says so.
func (c *Catalog) Lookup(schema, name string) *Relation {
	r, _ := c.Resolve(schema, name)
	return r
}

// Resolve is Lookup with the reason it cannot decide: a *NameError.
func (c *Catalog) Resolve(schema, name string) (*Relation, error) {
	r, err := c.resolveIn(&c.Session, schema, name)
	if err != nil || c.Before == nil {
		return r, err
	}
	if schema == "" && c.Temps[name] {
		// a temporary relation: the statement names it pg_temp's, out of
		// reach of the encrypted one whatever the server undoes
		return nil, nil
	}
	// a change the server may still undo: both states must agree
	if b, err := c.resolveIn(c.Before, schema, name); err != nil || b != r {
		return nil, &NameError{Name: name}
	}
	return r, nil
}

func (c *Catalog) resolveIn(sess *Session, schema, name string) (*Relation, error) {
	cands := c.byName[name]
	if len(cands) == 0 {
		return nil, nil
	}
	switch schema {
	case "":
	case "pg_temp":
		return nil, nil // the session's temporary relations: never encrypted ones of the catalog
	default:
		for _, r := range cands {
			if r.Schema == schema {
				return r, nil
			}
		}
		return nil, nil
	}
	if sess.Temps[name] {
		return nil, nil // pg_temp is searched first
	}
	if sess.PathUnknown {
		return nil, &NameError{Name: name}
	}
	for _, s := range sess.SearchPath {
		for _, r := range cands {
			if r.Schema == s {
				return r, nil
			}
		}
		for _, p := range c.plainNamed[name] {
			if p == s {
				return nil, nil // a relation without encrypted columns comes first
			}
		}
	}
	return nil, nil
}

// TypeOf returns the encrypted type of OID oid, or nil.
func (c *Catalog) TypeOf(oid uint32) *EncType { return c.Types[oid] }

// ArrayOf returns the OID of the array type of encrypted type oid, or 0.
func (c *Catalog) ArrayOf(oid uint32) uint32 {
	if t := c.Types[oid]; t != nil {
		return t.ArrayOID
	}
	return 0
}

// ElemOf returns the encrypted type whose array type is oid, or nil.
func (c *Catalog) ElemOf(oid uint32) *EncType {
	for _, t := range c.Types {
		if t.ArrayOID == oid && oid != 0 {
			return t
		}
	}
	return nil
}

// TypeFor returns the encrypted type holding plain type t in the given form.
func (c *Catalog) TypeFor(t colcrypt.Type, ord bool) *EncType {
	for _, et := range c.Types {
		if et.Plain == t && et.Ord == ord {
			return et
		}
	}
	return nil
}

// SetDatabase records the database the catalog was read from in each of
// its bindings (Keys pins a label per database).
func (c *Catalog) SetDatabase(db string) {
	c.database = db
	for _, b := range c.Bindings() {
		b.Database = db
	}
}

// Bindings returns every bound column.
func (c *Catalog) Bindings() []*Binding {
	var out []*Binding
	for _, r := range c.Relations {
		for _, a := range r.Attrs {
			if a.Binding != nil {
				out = append(out, a.Binding)
			}
		}
	}
	return out
}

// ErrNoExtension: the database has no pgcipher_columns extension.
var ErrNoExtension = errors.New("catalog: extension pgcipher_columns is not installed")

// The catalog queries, run on the proxy's own connection: the extension's
// schema first (a database without it gets no more queries), then types,
// relations, bindings, and the relations that share a name with one that
// has encrypted columns.
const extensionQuery = `SELECT n.nspname, e.extversion FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pgcipher_columns'`

const loadQuery = `SELECT t.oid, t.typname, t.typarray FROM pg_catalog.pg_type t JOIN pg_catalog.pg_extension e ON e.extnamespace = t.typnamespace WHERE e.extname = 'pgcipher_columns' AND t.typname ~ '^enc_' AND t.typtype = 'b';
SELECT c.oid, n.nspname, c.relname, a.attnum, a.attname, a.atttypid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND c.oid IN (SELECT x.attrelid FROM pg_catalog.pg_attribute x JOIN pg_catalog.pg_type t ON t.oid = x.atttypid JOIN pg_catalog.pg_extension e ON e.extnamespace = t.typnamespace WHERE e.extname = 'pgcipher_columns' AND t.typname ~ '^enc_' AND x.attnum > 0 AND NOT x.attisdropped) ORDER BY c.oid, a.attnum;
SELECT e.relid::oid, e.attname, e.level, k.key_id, k.key_name, k.cmk_name, pg_catalog.encode(k.wrapped_cek, 'hex'), e.label, e.join_group, ORE_FORMAT, CASE_INSENSITIVE, TENANT_BY FROM pgcipher.encrypted_columns e JOIN pgcipher.column_keys k ON k.key_id = e.key_id;
SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S') AND n.nspname !~ '^pg_(toast_)?temp_' AND c.relname IN (SELECT x.relname FROM pg_catalog.pg_class x JOIN pg_catalog.pg_attribute a ON a.attrelid = x.oid JOIN pg_catalog.pg_type t ON t.oid = a.atttypid JOIN pg_catalog.pg_extension e ON e.extnamespace = t.typnamespace WHERE e.extname = 'pgcipher_columns' AND t.typname ~ '^enc_' AND a.attnum > 0 AND NOT a.attisdropped)`

// Load reads a database's catalog through q.
func Load(q Querier) (*Catalog, error) {
	res, err := q.SimpleQuery(extensionQuery)
	if err != nil {
		return nil, fmt.Errorf("catalog: looking for the extension: %w", err)
	}
	c := Empty()
	if len(res) != 1 || len(res[0].Rows) == 0 {
		return c, nil
	}
	c.ExtSchema = string(res[0].Rows[0][0])
	// version 0.1 of the extension knows order format 1 only, 0.2 no
	// case-insensitive MATCH
	// and 0.3 no rights
	// and 0.4 no tenant keys
	oreFormat, caseInsensitive, hasRights, tenantBy := "e.ore_format", "e.case_insensitive", true, "e.tenant_by"
	if len(res[0].Rows[0]) > 1 {
		switch string(res[0].Rows[0][1]) {
		case "0.1":
			oreFormat, caseInsensitive, hasRights = "CASE e.level WHEN 'ORD' THEN '1' END", "false", false
		case "0.2":
			caseInsensitive, hasRights = "false", false
		case "0.3":
			hasRights = false
		}
		switch string(res[0].Rows[0][1]) {
		case "0.1", "0.2", "0.3", "0.4":
			tenantBy = "NULL"
		}
	}
	res, err = q.SimpleQuery(strings.NewReplacer("ORE_FORMAT", oreFormat, "CASE_INSENSITIVE", caseInsensitive,
		"TENANT_BY", tenantBy).Replace(loadQuery))
	if err != nil {
		return nil, fmt.Errorf("catalog: reading encrypted columns: %w", err)
	}
	if len(res) != 4 {
		return nil, fmt.Errorf("catalog: %d result sets from the catalog queries, want 4", len(res))
	}
	if err := c.load(res); err != nil {
		return nil, err
	}
	if hasRights {
		if res, err = q.SimpleQuery(rightsQuery); err != nil {
			return nil, fmt.Errorf("catalog: reading column rights: %w", err)
		}
		if len(res) != 1 {
			return nil, fmt.Errorf("catalog: %d result sets from the rights query, want 1", len(res))
		}
		if c.grants, err = grantRows(res[0].Rows); err != nil {
			return nil, err
		}
	}
	if tenantBy != "NULL" {
		if res, err = q.SimpleQuery(tenantsQuery); err != nil {
			return nil, fmt.Errorf("catalog: reading tenant keys: %w", err)
		}
		if len(res) != 2 {
			return nil, fmt.Errorf("catalog: %d result sets from the tenant queries, want 2", len(res))
		}
		keys, shredded, err := tenantRows(res[0].Rows, res[1].Rows)
		if err != nil {
			return nil, err
		}
		c.SetTenants(keys, shredded)
	}
	return c, nil
}

const tenantsQuery = `SELECT key_id, tenant, epoch, pg_catalog.encode(wrapped, 'hex') FROM pgcipher.tenant_keys;
SELECT key_id, tenant FROM pgcipher.shredded_tenants`

// hexBytes decodes a bytea the server encoded in hex.
func hexBytes(b []byte) ([]byte, error) { return hex.DecodeString(string(b)) }

const rightsQuery = `SELECT label, role, key_name, access, serial, pg_catalog.encode(mac, 'hex') FROM pgcipher.column_rights`

// grantRows reads pgcipher.column_rights; a row that does not parse is
// kept with an empty MAC, so that it fails verification as a forged one.
func grantRows(rows [][][]byte) ([]GrantRow, error) {
	out := make([]GrantRow, 0, len(rows))
	for _, row := range rows {
		if len(row) != 6 {
			return nil, fmt.Errorf("catalog: rights row of %d fields, want 6", len(row))
		}
		g := GrantRow{Grant: colcrypt.Grant{Label: string(row[0]), Role: string(row[1]), KeyName: string(row[2])}}
		acc, errA := colcrypt.ParseAccess(string(row[3]))
		serial, errS := strconv.ParseInt(string(row[4]), 10, 64)
		mac, errM := hex.DecodeString(string(row[5]))
		if errA == nil && errS == nil && errM == nil {
			g.Access, g.Serial, g.MAC = acc, serial, mac
		}
		out = append(out, g)
	}
	return out, nil
}

func (c *Catalog) load(res []Result) error {
	for _, row := range res[0].Rows {
		oid, err := parseOID(row[0])
		if err != nil {
			return err
		}
		name := string(row[1])
		base := strings.TrimPrefix(name, "enc_")
		ord := strings.HasSuffix(base, "_ord")
		base = strings.TrimSuffix(base, "_ord")
		t, err := colcrypt.ParseType(base)
		if err != nil {
			continue // not one of the value types
		}
		arr, err := parseOID(row[2])
		if err != nil {
			return err
		}
		c.Types[oid] = &EncType{OID: oid, Name: name, Plain: t, Ord: ord, ArrayOID: arr}
	}
	for _, row := range res[1].Rows {
		oid, err := parseOID(row[0])
		if err != nil {
			return err
		}
		r := c.Relations[oid]
		if r == nil {
			r = &Relation{OID: oid, Schema: string(row[1]), Name: string(row[2])}
			c.Relations[oid] = r
			c.byName[r.Name] = append(c.byName[r.Name], r)
			c.names = append(c.names, strings.ToLower(r.Name))
		}
		num, err := strconv.ParseInt(string(row[3]), 10, 16)
		if err != nil {
			return fmt.Errorf("catalog: attribute number %q: %w", row[3], err)
		}
		typ, err := parseOID(row[5])
		if err != nil {
			return err
		}
		r.Attrs = append(r.Attrs, &Attr{Name: string(row[4]), Num: int16(num), TypeOID: typ, Enc: c.Types[typ]})
	}
	for _, row := range res[2].Rows {
		relid, err := parseOID(row[0])
		if err != nil {
			return err
		}
		r := c.Relations[relid]
		if r == nil {
			continue // a binding of a relation we cannot see
		}
		a := r.Attr(string(row[1]))
		if a == nil || a.Enc == nil {
			continue
		}
		level, err := colcrypt.ParseLevel(string(row[2]))
		if err != nil {
			return fmt.Errorf("catalog: column %s.%s: %w", r.Name, a.Name, err)
		}
		kid, err := strconv.ParseUint(string(row[3]), 10, 32)
		if err != nil {
			return fmt.Errorf("catalog: key id %q: %w", row[3], err)
		}
		wrapped, err := hex.DecodeString(string(row[6]))
		if err != nil {
			return fmt.Errorf("catalog: wrapped key of %s: %w", row[4], err)
		}
		a.Binding = &Binding{
			Spec: colcrypt.Spec{KeyID: uint32(kid), Type: a.Enc.Plain, Level: level,
				Label: string(row[7]), Group: string(row[8]), OREFormat: string(row[9]),
				CaseInsensitive: string(row[10]) == "t"},
			KeyName: string(row[4]), CMKName: string(row[5]), WrappedCEK: wrapped,
			TenantBy: string(row[11]),
		}
	}
	for _, row := range res[3].Rows {
		schema, name := string(row[0]), string(row[1])
		if r := c.Lookup(schema, name); r == nil {
			c.AddPlainNamed(schema, name)
		}
	}
	return nil
}

func parseOID(b []byte) (uint32, error) {
	v, err := strconv.ParseUint(string(b), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("catalog: OID %q: %w", b, err)
	}
	return uint32(v), nil
}

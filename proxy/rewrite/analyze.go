// The analysis: scopes of relations, column resolution, and the contexts
// in which an encrypted column is allowed.

package rewrite

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// Analyze decides what to do with sql.  keys may be nil only for
// catalogs without bindings.
func Analyze(sql string, cat *catalog.Catalog, keys *catalog.Keys) (*Plan, error) {
	if !cat.Mentions(sql) {
		p := &Plan{SQL: sql, Reload: changesCatalog(sql)}
		if namesSessionWord(sql) {
			if tree, err := pg.Parse(sql); err == nil {
				p.Names, p.Statements = nameChanges(sql, tree), len(tree.Stmts)
				p.Reload = p.Reload && !onlyTemps(tree)
			}
		}
		return p, nil
	}
	tree, err := pg.Parse(sql)
	if err != nil {
		// Not sent: the server would fail the same way, but log the
		// statement, literals and all, with its error.
		return nil, &Refusal{Code: "42601", Message: "pgcipher: " + err.Error(),
			Hint: "The proxy does not send statements that name encrypted relations and do not parse."}
	}
	a := &analyzer{cat: cat, keys: keys, plan: &Plan{Parsed: true, Cacheable: true}, version: tree.Version}
	encDDL := false // an earlier statement of sql created or bound encrypted columns
	for _, raw := range tree.Stmts {
		a.top = len(tree.Stmts) == 1
		if encDDL && readsOrWrites(raw.Stmt) {
			// analysed with the catalog before the DDL: its relations
			// may have encrypted columns the proxy does not know yet
			return nil, refuse("Send the statements that use new encrypted columns after the statements that create them, as a query of their own.",
				"pgcipher: a query that creates or binds encrypted columns cannot also read or write rows")
		}
		reload := a.plan.Reload
		a.plan.Reload = false
		if err := a.statement(raw.Stmt); err != nil {
			return nil, err
		}
		if a.plan.Reload && cat.NamesEncryption(stmtText(sql, raw)) {
			encDDL = true
		}
		a.plan.Reload = a.plan.Reload || reload
		if a.plan.Copy != nil && len(tree.Stmts) > 1 {
			return nil, refuse("Send COPY as a query of its own.",
				"pgcipher: COPY of a relation with encrypted columns must be the only statement of its query")
		}
	}
	if a.err != nil {
		return nil, a.err
	}
	a.plan.Names, a.plan.Statements = nameChanges(sql, tree), len(tree.Stmts)
	if a.plan.Statements > 1 && changesTenant(a.plan.Names) && usesTenantKeys(a.plan.Uses) {
		// planned under the tenant before the change, run after it
		return nil, &Refusal{Code: CodeTenant,
			Message: "pgcipher: a query that changes pgcipher.tenant cannot also use a tenant-keyed column",
			Hint:    "Send SET pgcipher.tenant as a statement of its own, then the statements that use it."}
	}
	if a.plan.Reload && onlyTemps(tree) {
		a.plan.Reload = false // temporary relations are the session's, not the catalog's
	}
	a.plan.SQL = sql
	if a.changed {
		if a.plan.SQL, err = pg.Deparse(tree); err != nil {
			return nil, fmt.Errorf("rewrite: deparsing: %w", err)
		}
	}
	return a.plan, nil
}

// stmtText is one statement's text within sql.
func stmtText(sql string, raw *pg.RawStmt) string {
	start := int(raw.StmtLocation)
	if start < 0 || start > len(sql) {
		return sql
	}
	if raw.StmtLen == 0 || start+int(raw.StmtLen) > len(sql) {
		return sql[start:]
	}
	return sql[start : start+int(raw.StmtLen)]
}

// readsOrWrites: a statement that reads or writes rows of relations.
func readsOrWrites(n *pg.Node) bool {
	switch {
	case n.GetInsertStmt() != nil, n.GetUpdateStmt() != nil, n.GetDeleteStmt() != nil,
		n.GetMergeStmt() != nil, n.GetCopyStmt() != nil, n.GetExplainStmt() != nil:
		return true
	case n.GetSelectStmt() != nil:
		s := n.GetSelectStmt()
		return len(s.FromClause) > 0 || len(s.ValuesLists) > 0 || s.Op != pg.SetOperation_SETOP_NONE && s.Op != pg.SetOperation_SET_OPERATION_UNDEFINED
	}
	return false
}

// onlyTemps: every statement creates a temporary relation.
func onlyTemps(tree *pg.ParseResult) bool {
	for _, raw := range tree.Stmts {
		ch := stmtNameChanges(raw.Stmt)
		if len(ch) != 1 || ch[0].Kind != CreateTemp {
			return false
		}
	}
	return len(tree.Stmts) > 0
}

type analyzer struct {
	cat     *catalog.Catalog
	keys    *catalog.Keys
	plan    *Plan
	changed bool
	top     bool // a single statement: result post-processing is possible
	// cur: the top-level query whose WHERE is being analysed, when
	// LIKE rechecks may add hidden columns to it
	cur *pg.SelectStmt
	// returning: the derived relation of the last RETURNING list
	returning *catalog.Relation
	// computing: the query whose select list the proxy computes
	computing *pg.SelectStmt
	// insertRow: the VALUES row being analysed, where a column bound
	// tenant_by a column finds its row's tenant (13.13); tenantParam:
	// the parameter carrying it, for the next param() to record
	insertRow   *insertRow
	tenantParam *insertRowTenant
	// negated: the predicate being analysed is under this many NOTs
	negated int
	version int32 // of the parse tree, for deparsing queries the proxy makes
	// an UPDATE with computed assignments, between its SET and WHERE
	pendingSets   []*pg.ResTarget
	updateAlias   string
	updateTargets []*pg.Node
	// err: a name the proxy cannot resolve for sure (reported once the
	// statement has been walked)
	err error
}

// rel is one entry of a FROM list: a catalog relation, or a derived one
// (subquery, CTE) whose attributes carry the bindings of the columns they
// pass through.  Relations without encrypted columns have r == nil.
type rel struct {
	alias string
	name  string
	r     *catalog.Relation
	// full: r is a catalog relation, every column of it in order (what
	// its * expands into); derived relations carry their encrypted
	// outputs only
	full bool
	// feed: VALUES or UNNEST, whose columns are values the client wrote
	feed *feed
}

type scope struct {
	rels   []rel
	ctes   map[string]*catalog.Relation
	parent *scope
	// merged: a JOIN USING or NATURAL JOIN, whose * merges columns
	merged bool
}

func (s *scope) cte(name string) (*catalog.Relation, bool) {
	for ; s != nil; s = s.parent {
		if r, ok := s.ctes[name]; ok {
			return r, true
		}
	}
	return nil, false
}

// col is a resolved reference to an encrypted column.
type col struct {
	attr   *catalog.Attr
	rel    *catalog.Relation
	name   string   // as written
	fields []string // the reference's names, as written
}

func (c *col) qualifier() []string { return c.fields }

func (c *col) binding() *catalog.Binding { return c.attr.Binding }

// resolve finds the encrypted column a ColumnRef names, if any.  A
// reference to a whole row or to t.* of a relation with encrypted columns
// is returned with attr == nil.
func (a *analyzer) resolve(sc *scope, cr *pg.ColumnRef) (*col, error) {
	var names []string
	star := false
	for _, f := range cr.Fields {
		switch {
		case f.GetString_() != nil:
			names = append(names, f.GetString_().Sval)
		case f.GetAStar() != nil:
			star = true
		}
	}
	if star {
		for s := sc; s != nil; s = s.parent {
			for _, r := range s.rels {
				if r.r == nil || !hasEncrypted(r.r) {
					continue
				}
				if len(names) == 0 || names[len(names)-1] == r.alias {
					return &col{rel: r.r, name: strings.Join(append(names, "*"), ".")}, nil
				}
			}
		}
		return nil, nil
	}
	colName := names[len(names)-1]
	qual := names[:len(names)-1]
	for s := sc; s != nil; s = s.parent {
		for _, r := range s.rels {
			if len(qual) > 0 && qual[len(qual)-1] != r.alias {
				continue
			}
			if r.r == nil {
				continue
			}
			if at := r.r.Attr(colName); at != nil {
				if at.Enc == nil {
					return nil, nil
				}
				return &col{attr: at, rel: r.r, name: strings.Join(names, "."), fields: names}, nil
			}
			// a whole-row reference: SELECT t FROM t
			if len(qual) == 0 && colName == r.alias && hasEncrypted(r.r) {
				return &col{rel: r.r, name: colName}, nil
			}
		}
	}
	return nil, nil
}

// isTemp: a relation created temporary.
func isTemp(rv *pg.RangeVar) bool {
	return rv != nil && (rv.Relpersistence == "t" || rv.Schemaname == "pg_temp")
}

// The proxy learns encrypted columns from its catalog connection, which
// cannot see another session's temporary relations: a temporary relation
// with encrypted columns would take plaintext.
func refuseTempEncrypted(name string) error {
	return refuse("Use a permanent table for encrypted columns, or a temporary one of plaintext columns.",
		"pgcipher: temporary relation %q would have encrypted columns, which the proxy cannot follow", name)
}

// intoChecked refuses a temporary relation made from encrypted columns
// (CREATE TEMP TABLE … AS, SELECT … INTO TEMP).
func (a *analyzer) intoChecked(rv *pg.RangeVar, out *catalog.Relation) error {
	if isTemp(rv) && out != nil && hasEncrypted(out) {
		return refuseTempEncrypted(rv.Relname)
	}
	return nil
}

// tempTable refuses a temporary table with a column of an encrypted type
// or LIKE a relation with encrypted columns.
func (a *analyzer) tempTable(s *pg.CreateStmt) error {
	for _, e := range s.TableElts {
		if cd := e.GetColumnDef(); cd != nil && cd.TypeName != nil && len(cd.TypeName.Names) > 0 {
			t := cd.TypeName.Names[len(cd.TypeName.Names)-1].GetString_()
			if t != nil && a.cat.TypeNamed(t.Sval) {
				return refuseTempEncrypted(s.Relation.Relname)
			}
		}
		if lc := e.GetTableLikeClause(); lc != nil {
			if r := a.relation(lc.Relation); r != nil && hasEncrypted(r) {
				return refuseTempEncrypted(s.Relation.Relname)
			}
		}
	}
	for _, inh := range s.InhRelations {
		if r := a.relation(inh.GetRangeVar()); r != nil && hasEncrypted(r) {
			return refuseTempEncrypted(s.Relation.Relname)
		}
	}
	return nil
}

func hasEncrypted(r *catalog.Relation) bool {
	for _, at := range r.Attrs {
		if at.Enc != nil {
			return true
		}
	}
	return false
}

// encCol returns the encrypted column n is a plain reference to (nil if
// n is something else or a plaintext column); whole-row references are
// refused.
//
// A cast of an encrypted column to its own plain type (col::text,
// CAST(col AS varchar), col::numeric of a numeric column: what ORMs write
// and believe a no-op) is the column itself: the cast is dropped from
// the statement, which the server could not run on ciphertext.
func (a *analyzer) encCol(sc *scope, n *pg.Node) (*col, error) {
	if n == nil {
		return nil, nil
	}
	if tc := n.GetTypeCast(); tc != nil && tc.Arg.GetColumnRef() != nil {
		c, err := a.encCol(sc, tc.Arg)
		if err != nil || c == nil || !noopCast(c.attr.Enc.Plain, tc.TypeName) {
			if c != nil && err == nil {
				err = refuse("Compare the column itself (a cast to its own plain type is allowed), or compute it in the select list.",
					"pgcipher: encrypted column %q cannot be cast to %s: the cast would change its values", c.name, typeNameOf(tc.TypeName))
			}
			return nil, err
		}
		n.Node = tc.Arg.Node
		a.changed = true
		return c, nil
	}
	cr := n.GetColumnRef()
	if cr == nil {
		return nil, nil
	}
	c, err := a.resolve(sc, cr)
	if err != nil || c == nil {
		return nil, err
	}
	if c.attr == nil {
		return nil, refuse("Name the columns you need.",
			"pgcipher: a whole-row reference %q to a relation with encrypted columns cannot be used here", c.name)
	}
	return c, nil
}

// noopCasts: the type names (pg_query's, as the last part of the name)
// whose cast leaves a value of each plain type as it is.  varchar with a
// length, bpchar (blank-padded comparison) and casts to other types
// (int4::text compares text) are not no-ops.
var noopCasts = map[colcrypt.Type][]string{
	colcrypt.Text: {"text", "varchar"}, colcrypt.Int4: {"int4"}, colcrypt.Int8: {"int8"},
	colcrypt.Float8: {"float8"}, colcrypt.Numeric: {"numeric"}, colcrypt.Bytea: {"bytea"},
	colcrypt.Date: {"date"}, colcrypt.Timestamptz: {"timestamptz"}, colcrypt.Bool: {"bool"},
}

// castMod reads a cast to plain type t with a modifier the proxy applies
// (varchar(n) of text, numeric(p[, s]) of numeric): what ORMs cast the
// values they write to (Django: ::varchar(40), ::numeric(12, 2)).  An
// array type's element modifier counts too (::varchar(40)[]).
func castMod(t colcrypt.Type, tn *pg.TypeName) (*CastMod, bool) {
	if tn == nil || len(tn.Typmods) == 0 || tn.Setof {
		return nil, false
	}
	var mods []int32
	for _, m := range tn.Typmods {
		k := m.GetAConst()
		if k == nil || k.GetIval() == nil {
			return nil, false
		}
		mods = append(mods, k.GetIval().Ival)
	}
	name := strings.ToLower(typeNameOf(tn))
	switch {
	case t == colcrypt.Text && name == "varchar" && len(mods) == 1 && mods[0] > 0:
		return &CastMod{Len: mods[0]}, true
	case t == colcrypt.Numeric && name == "numeric" && len(mods) <= 2 && mods[0] > 0:
		m := &CastMod{Prec: mods[0]}
		if len(mods) == 2 {
			m.Scale = mods[1]
		}
		return m, m.Scale >= 0 && m.Scale <= m.Prec
	}
	return nil, false
}

func noopCast(t colcrypt.Type, tn *pg.TypeName) bool {
	if tn == nil || len(tn.Names) == 0 || len(tn.Typmods) > 0 || len(tn.ArrayBounds) > 0 || tn.Setof {
		return false
	}
	name := strings.ToLower(typeNameOf(tn))
	for _, n := range noopCasts[t] {
		if name == n {
			return true
		}
	}
	return false
}

// typeNameOf is the last part of a type's name.
func typeNameOf(tn *pg.TypeName) string {
	if tn == nil || len(tn.Names) == 0 || tn.Names[len(tn.Names)-1].GetString_() == nil {
		return "this type"
	}
	return tn.Names[len(tn.Names)-1].GetString_().Sval
}

// crypt returns the crypto of a bound column, or a refusal, and records
// what the statement uses it for: acc write to encrypt values it stores,
// read to compare, decrypt or compute.
func (a *analyzer) crypt(c *col, acc colcrypt.Access) (*colcrypt.Column, error) {
	b := c.binding()
	if b == nil {
		return nil, refuse("Bind it with pgcipher.encrypt_column(table, column, key, level).",
			"pgcipher: column %q has an encrypted type but no key binding", c.name)
	}
	if b.TenantBy != "" {
		cc, err := a.tenantColumn(b, acc)
		if err != nil {
			return nil, err
		}
		a.plan.use(b, acc)
		return cc, nil
	}
	cc, err := a.keys.Column(b)
	if err != nil {
		return nil, &Refusal{Code: CodeKey, Message: "pgcipher: " + err.Error(),
			Hint: "Check pgcipher.column_keys and pgcipher.encrypted_columns; restart the proxy to accept a new binding."}
	}
	a.plan.use(b, acc)
	return cc, nil
}

// insertRow is an INSERT's VALUES row: its items and the columns they go to.
type insertRow struct {
	items   []*pg.Node
	targets []*catalog.Attr
}

// insertRowTenant: the row's tenant is parameter param, of type oid.
type insertRowTenant struct {
	param int
	oid   uint32
}

// rowTenant finds the tenant of a column bound tenant_by column name in
// the VALUES row being analysed: a literal (its text), or a parameter.
func (a *analyzer) rowTenant(b *catalog.Binding) (string, *insertRowTenant, error) {
	refusal := func(why string) error {
		return &Refusal{Code: CodeTenant,
			Message: fmt.Sprintf("pgcipher: column %s takes its tenant from column %q of the row, %s", b.Spec.Label, b.TenantBy, why),
			Hint:    fmt.Sprintf("Give %s in the INSERT as a literal or a parameter; elsewhere, SET pgcipher.tenant to compare.", b.TenantBy)}
	}
	if a.insertRow == nil {
		return "", nil, refusal("which the proxy takes from an INSERT's VALUES only")
	}
	for i, at := range a.insertRow.targets {
		if at == nil || at.Name != b.TenantBy || i >= len(a.insertRow.items) {
			continue
		}
		// as the server will store it: no cast (it could change the
		// value: char(2), a number's leading zeros), the type's own text
		v := a.insertRow.items[i]
		switch {
		case v.GetParamRef() != nil:
			return "", &insertRowTenant{param: int(v.GetParamRef().Number), oid: at.TypeOID}, nil
		case v.GetAConst() != nil && !v.GetAConst().Isnull:
			if s, ok := constText(v.GetAConst()); ok && s != "" {
				t, err := TenantText(at.TypeOID, s)
				if err != nil {
					return "", nil, refusal(err.Error())
				}
				return t, nil, nil
			}
		}
		return "", nil, refusal("which this row gives as neither a literal nor a parameter (without a cast)")
	}
	return "", nil, refusal("which this INSERT does not give")
}

// tenantColumn is the crypto of a tenant-keyed column (design 13.13) under
// the session's tenant, or the row's for a column bound tenant_by a column
// (in an INSERT's VALUES; comparisons elsewhere take the session's), or a
// refusal: no tenant, one the proxy does not follow, one without a key
// (PC007), one whose key was destroyed (PC003).
func (a *analyzer) tenantColumn(b *catalog.Binding, acc colcrypt.Access) (*colcrypt.Column, error) {
	if b.TenantBy != "session" && (a.insertRow != nil || acc == colcrypt.AccessWrite) {
		name, param, err := a.rowTenant(b)
		if err != nil {
			return nil, err
		}
		if param != nil {
			// encrypted at Bind under the parameter's tenant: the
			// column key's crypto stands for the binding meanwhile
			a.tenantParam = param
			cc, err := a.keys.Column(b)
			if err != nil {
				return nil, &Refusal{Code: CodeKey, Message: "pgcipher: " + err.Error()}
			}
			return cc, nil
		}
		return a.tenantKeyColumn(b, name)
	}
	switch {
	case a.cat.TenantUnknown:
		return nil, &Refusal{Code: CodeTenant,
			Message: fmt.Sprintf("pgcipher: column %s is tenant-keyed, and the session's pgcipher.tenant changed in a way the proxy does not follow", b.Spec.Label),
			Hint:    "SET pgcipher.tenant = '...' again (a rollback, or set_config with a computed value, leaves it unknown)."}
	case a.cat.Tenant == "":
		return nil, &Refusal{Code: CodeTenant,
			Message: fmt.Sprintf("pgcipher: column %s is tenant-keyed and the session has no tenant", b.Spec.Label),
			Hint:    "SET pgcipher.tenant = '...' first: values are encrypted, and compared, under the key of one tenant."}
	}
	cc, err := a.tenantKeyColumn(b, a.cat.Tenant)
	if err == nil {
		a.plan.Tenant = a.cat.Tenant
	}
	return cc, err
}

// tenantKeyColumn is the column of binding b under tenant name's key.
func (a *analyzer) tenantKeyColumn(b *catalog.Binding, name string) (*colcrypt.Column, error) {
	cc, err := a.keys.TenantColumn(a.cat, b, name)
	if err != nil {
		return nil, TenantRefusal(err)
	}
	return cc, nil
}

// TenantRefusal is the client's error for a tenant key that cannot be
// used (design 13.13): a tenant without a key PC007, one shredded (its
// key destroyed: not a corrupt value) and any other PC003.
func TenantRefusal(err error) *Refusal {
	var te *catalog.TenantError
	switch {
	case errors.As(err, &te):
		return &Refusal{Code: CodeTenant, Message: "pgcipher: " + err.Error(),
			Hint: "Add the tenant's key (pgcipher-keys add-tenant), or SET pgcipher.tenant to a tenant that has one."}
	case errors.Is(err, catalog.ErrTenantShredded):
		return &Refusal{Code: CodeKey, Message: "pgcipher: " + err.Error(),
			Hint: "The tenant was shredded (pgcipher-keys shred-tenant): its values can no longer be read or written, anywhere."}
	}
	return &Refusal{Code: CodeKey, Message: "pgcipher: " + err.Error(),
		Hint: "Check pgcipher.tenant_keys and the proxy's tenant keyring (--tenant-keyring, reloaded on SIGHUP)."}
}

// level returns a column's level; unbound columns count as RND.
func level(c *col) colcrypt.Level {
	if b := c.binding(); b != nil {
		return b.Spec.Level
	}
	return colcrypt.RND
}

// prefixOrder: ORD order of these types covers a 16-byte prefix only.
func prefixOrder(t colcrypt.Type) bool {
	return t == colcrypt.Text || t == colcrypt.Bytea || t == colcrypt.Numeric
}

// statement analyses one top-level statement.
func (a *analyzer) statement(n *pg.Node) error {
	switch {
	case n.GetSelectStmt() != nil:
		a.plan.Touches = true
		s := n.GetSelectStmt()
		if f := a.keyFunction(s); f != "" {
			return a.keyCall(s, f)
		}
		out, err := a.selectStmt(nil, s, true)
		if err == nil && s.IntoClause != nil {
			err = a.intoChecked(s.IntoClause.Rel, out)
		}
		a.readsOut(out)
		return err
	case n.GetInsertStmt() != nil:
		a.plan.Touches = true
		a.writesCatalog(n.GetInsertStmt().Relation)
		return a.readsReturning(a.insertStmt(nil, n.GetInsertStmt()))
	case n.GetUpdateStmt() != nil:
		a.plan.Touches = true
		a.writesCatalog(n.GetUpdateStmt().Relation)
		return a.readsReturning(a.updateStmt(nil, n.GetUpdateStmt()))
	case n.GetDeleteStmt() != nil:
		a.plan.Touches = true
		a.writesCatalog(n.GetDeleteStmt().Relation)
		return a.readsReturning(a.deleteStmt(nil, n.GetDeleteStmt()))
	case n.GetCopyStmt() != nil:
		a.plan.Touches = true
		return a.copyStmt(n.GetCopyStmt())
	case n.GetMergeStmt() != nil:
		a.plan.Touches = true
		if a.namesEncrypted(n) {
			return refuse("Use INSERT … ON CONFLICT, UPDATE and DELETE.",
				"pgcipher: MERGE is not supported on relations with encrypted columns")
		}
		return nil
	case n.GetExplainStmt() != nil:
		// EXPLAIN shows plans, whose constants are ciphertext; EXPLAIN
		// ANALYZE runs the statement: rewrite it like the statement.
		a.top = false
		return a.statement(n.GetExplainStmt().Query)
	case n.GetDeclareCursorStmt() != nil:
		a.plan.Touches = true
		a.top = false
		out, err := a.selectStmt(nil, n.GetDeclareCursorStmt().Query.GetSelectStmt(), false)
		a.readsOut(out)
		return err
	case n.GetPrepareStmt() != nil, n.GetDoStmt() != nil, n.GetCreateFunctionStmt() != nil:
		return refuse("Use the extended query protocol (your driver's prepared statements), or run this without the proxy on tables without encrypted columns.",
			"pgcipher: PREPARE, DO and function bodies that mention encrypted relations cannot be checked by the proxy")
	case n.GetVariableSetStmt() != nil:
		if strings.EqualFold(n.GetVariableSetStmt().Name, "search_path") {
			a.plan.Reload = true
		}
		return nil
	case n.GetTransactionStmt() != nil, n.GetVariableShowStmt() != nil, n.GetListenStmt() != nil,
		n.GetUnlistenStmt() != nil, n.GetNotifyStmt() != nil, n.GetVacuumStmt() != nil,
		n.GetTruncateStmt() != nil, n.GetLockStmt() != nil, n.GetClosePortalStmt() != nil,
		n.GetFetchStmt() != nil, n.GetDeallocateStmt() != nil, n.GetDiscardStmt() != nil,
		n.GetExecuteStmt() != nil, n.GetCheckPointStmt() != nil:
		if n.GetFetchStmt() != nil {
			a.plan.Touches = true
		}
		return nil
	case n.GetCreateTableAsStmt() != nil:
		a.plan.Reload, a.plan.Touches = true, true
		q := n.GetCreateTableAsStmt().Query
		if q.GetSelectStmt() != nil {
			out, err := a.selectStmt(nil, q.GetSelectStmt(), false)
			if err == nil && n.GetCreateTableAsStmt().Into != nil {
				err = a.intoChecked(n.GetCreateTableAsStmt().Into.Rel, out)
			}
			return err
		}
		return nil
	case n.GetCreateStmt() != nil && isTemp(n.GetCreateStmt().Relation):
		a.plan.Reload = true
		return a.tempTable(n.GetCreateStmt())
	case n.GetAlterTableStmt() != nil:
		a.plan.Reload = true
		return a.alterTable(n.GetAlterTableStmt())
	case n.GetRenameStmt() != nil && n.GetRenameStmt().Relation != nil:
		// a column's values are encrypted under a label of its schema,
		// table and column names: renamed, none of them would decrypt
		a.plan.Reload = true
		rs := n.GetRenameStmt()
		r := a.relation(rs.Relation)
		if r == nil {
			return nil
		}
		if rs.RenameType == pg.ObjectType_OBJECT_COLUMN {
			if at := r.Attr(rs.Subname); at == nil || at.Enc == nil {
				return nil
			}
		} else if rs.RenameType != pg.ObjectType_OBJECT_TABLE || !hasEncrypted(r) {
			return nil
		}
		name := rs.Relation.Relname
		if rs.Subname != "" {
			name += "." + rs.Subname
		}
		return refuse("Add a new column under the name you want, bind it, copy the values through the proxy (UPDATE t SET new = old) and drop the old one.",
			"pgcipher: renaming %q is refused: its encrypted values are bound to their schema, table and column names, and would no longer decrypt", name)
	case n.GetAlterObjectSchemaStmt() != nil && n.GetAlterObjectSchemaStmt().Relation != nil:
		a.plan.Reload = true
		if r := a.relation(n.GetAlterObjectSchemaStmt().Relation); r != nil && hasEncrypted(r) {
			return refuse("Create the table in the other schema, bind its columns and copy the rows through the proxy.",
				"pgcipher: moving %q to another schema is refused: its encrypted values are bound to their schema, table and column names", r.Name)
		}
		return nil
	case n.GetViewStmt() != nil:
		a.plan.Reload = true
		q := n.GetViewStmt().Query
		if q.GetSelectStmt() != nil {
			_, err := a.selectStmt(nil, q.GetSelectStmt(), false)
			return err
		}
		return nil
	}
	// other utility statements (CREATE, DROP, GRANT, COMMENT, ...) do not
	// read or write values
	a.plan.Reload = true
	return nil
}

// alterTable refuses changing the type of an encrypted column (its
// ciphertext would become data of another type) and defaults that are
// plaintext expressions.
func (a *analyzer) alterTable(s *pg.AlterTableStmt) error {
	r := a.relation(s.Relation)
	if r == nil {
		return nil
	}
	for _, c := range s.Cmds {
		cmd := c.GetAlterTableCmd()
		if cmd == nil {
			continue
		}
		at := r.Attr(cmd.Name)
		if at == nil || at.Enc == nil {
			continue
		}
		switch cmd.Subtype {
		case pg.AlterTableType_AT_AlterColumnType, pg.AlterTableType_AT_ColumnDefault:
			return refuse("Create a new column of the type you want and copy the values through the proxy.",
				"pgcipher: the type or default of encrypted column %q cannot be changed through the proxy", cmd.Name)
		}
	}
	return nil
}

// relation looks a RangeVar up in the catalog.
func (a *analyzer) relation(rv *pg.RangeVar) *catalog.Relation {
	if rv == nil {
		return nil
	}
	r, err := a.cat.Resolve(rv.Schemaname, rv.Relname)
	if err != nil && a.err == nil {
		a.err = &Refusal{Code: CodeRefused, Message: "pgcipher: " + err.Error(),
			Hint: "Qualify the relation with its schema, or set search_path with SET or RESET."}
	}
	if rv.Schemaname == "" && a.cat.Temps[rv.Relname] && a.cat.Named(rv.Relname) {
		// the session's temporary relation hides one with encrypted
		// columns: name it so, so that the statement as sent cannot
		// reach the other, whatever the proxy believes
		rv.Schemaname = "pg_temp"
		a.changed = true
	}
	return r
}

// fromItem adds a FROM-list item to sc.
func (a *analyzer) fromItem(sc *scope, n *pg.Node) error {
	switch {
	case n.GetRangeVar() != nil:
		rv := n.GetRangeVar()
		alias := rv.Relname
		if rv.Alias != nil {
			alias = rv.Alias.Aliasname
		}
		if rv.Schemaname == "" {
			if r, ok := sc.cte(rv.Relname); ok {
				sc.rels = append(sc.rels, rel{alias: alias, name: rv.Relname, r: r})
				return nil
			}
		}
		r := a.relation(rv)
		sc.rels = append(sc.rels, rel{alias: alias, name: rv.Relname, r: r, full: r != nil})
		return nil
	case n.GetJoinExpr() != nil:
		j := n.GetJoinExpr()
		if j.IsNatural || len(j.UsingClause) > 0 {
			sc.merged = true // * no longer lists each side's columns
		}
		if err := a.fromItem(sc, j.Larg); err != nil {
			return err
		}
		if err := a.fromItem(sc, j.Rarg); err != nil {
			return err
		}
		if j.IsNatural {
			return a.checkUsing(sc, nil, true)
		}
		if len(j.UsingClause) > 0 {
			var names []string
			for _, u := range j.UsingClause {
				names = append(names, u.GetString_().Sval)
			}
			if err := a.checkUsing(sc, names, false); err != nil {
				return err
			}
		}
		if j.Quals != nil {
			return a.predicate(sc, j.Quals, false)
		}
		return nil
	case n.GetRangeSubselect() != nil:
		rs := n.GetRangeSubselect()
		sub := &scope{parent: sc}
		if !rs.Lateral {
			sub.parent = &scope{ctes: ctesOf(sc)}
		}
		r, err := a.selectStmt(sub.parent, rs.Subquery.GetSelectStmt(), false)
		if err != nil {
			return err
		}
		alias := ""
		if rs.Alias != nil {
			alias = rs.Alias.Aliasname
			if r != nil {
				renameAttrs(r, rs.Alias.Colnames)
			}
		}
		sc.rels = append(sc.rels, rel{alias: alias, name: alias, r: r, feed: valuesFeed(rs)})
		return nil
	case n.GetRangeFunction() != nil:
		// functions in FROM: their arguments must not be encrypted columns
		if err := a.generic(sc, n, "a function in FROM"); err != nil {
			return err
		}
		rf := n.GetRangeFunction()
		alias := ""
		if rf.Alias != nil {
			alias = rf.Alias.Aliasname
		}
		f := unnestFeed(rf)
		if f != nil && alias == "" {
			alias = "unnest"
		}
		sc.rels = append(sc.rels, rel{alias: alias, name: alias, feed: f})
		return nil
	}
	// an item whose columns the proxy does not know (* cannot be expanded)
	sc.rels = append(sc.rels, rel{})
	return a.generic(sc, n, "this FROM item")
}

// namesEncrypted: a relation with encrypted columns appears anywhere in n.
func (a *analyzer) namesEncrypted(n *pg.Node) bool {
	return hasMessage(n, func(m protoreflect.Message) bool {
		rv, ok := m.Interface().(*pg.RangeVar)
		if !ok {
			return false
		}
		r := a.relation(rv)
		return r != nil && hasEncrypted(r)
	})
}

// ctesOf collects the CTEs visible from sc (a non-lateral subquery sees
// the CTEs but not the FROM items of its parents).
func ctesOf(sc *scope) map[string]*catalog.Relation {
	out := map[string]*catalog.Relation{}
	var chain []*scope
	for s := sc; s != nil; s = s.parent {
		chain = append(chain, s)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		for k, v := range chain[i].ctes {
			out[k] = v
		}
	}
	return out
}

func renameAttrs(r *catalog.Relation, names []*pg.Node) {
	for i, n := range names {
		if i < len(r.Attrs) && n.GetString_() != nil {
			r.Attrs[i].Name = n.GetString_().Sval
		}
	}
}

// checkUsing: JOIN USING / NATURAL compares same-named columns with "=".
func (a *analyzer) checkUsing(sc *scope, names []string, natural bool) error {
	if len(sc.rels) < 2 {
		return nil
	}
	l, r := sc.rels[len(sc.rels)-2], sc.rels[len(sc.rels)-1]
	if natural {
		if l.r != nil && hasEncrypted(l.r) || r.r != nil && hasEncrypted(r.r) {
			return refuse("Join with ON or USING and name the columns.",
				"pgcipher: NATURAL JOIN of relations with encrypted columns is not supported")
		}
		return nil
	}
	for _, n := range names {
		var x, y *catalog.Attr
		if l.r != nil {
			x = l.r.Attr(n)
		}
		if r.r != nil {
			y = r.r.Attr(n)
		}
		if (x == nil || x.Enc == nil) && (y == nil || y.Enc == nil) {
			continue
		}
		if err := a.joinable(&col{attr: x, name: n}, &col{attr: y, name: n}); err != nil {
			return err
		}
	}
	return nil
}

// joinable: two encrypted columns compared with "=" need one type, key
// and join group and levels with equality tokens.
func (a *analyzer) joinable(x, y *col) error {
	if x.attr == nil || y.attr == nil || x.attr.Enc == nil || y.attr.Enc == nil {
		return refuse("Compare encrypted columns only with columns of the same join group.",
			"pgcipher: column %q is compared with a column that is not encrypted the same way", x.name)
	}
	bx, by := x.binding(), y.binding()
	if bx == nil || by == nil || x.attr.Enc != y.attr.Enc || bx.Spec.KeyID != by.Spec.KeyID ||
		bx.Spec.Group != by.Spec.Group || !bx.Spec.Level.HasToken() || !by.Spec.Level.HasToken() {
		return refuse("Bind both columns with one key and join group (pgcipher.encrypt_column's join_group) at level EQ or ORD.",
			"pgcipher: columns %q and %q are not in one join group, so the server cannot compare them", x.name, y.name)
	}
	if _, err := a.crypt(x, colcrypt.AccessRead); err != nil {
		return err
	}
	_, err := a.crypt(y, colcrypt.AccessRead)
	return err
}

// readsOut records that the proxy decrypts the bound columns a statement
// returns (its select list, RETURNING): the session's role must be able
// to read them before the statement is sent (design 13.12), not only
// when the first row arrives, after a write has happened.
func (a *analyzer) readsOut(out *catalog.Relation) {
	if out == nil {
		return
	}
	for _, at := range out.Attrs {
		if at.Binding != nil && at.Enc != nil {
			a.plan.use(at.Binding, colcrypt.AccessRead)
		}
	}
}

// readsReturning is readsOut of a write's RETURNING list.
func (a *analyzer) readsReturning(err error) error {
	if err == nil {
		a.readsOut(a.returning)
	}
	return err
}

// writesCatalog: a write to a table of the extension's schema (keys,
// bindings, rights) changes what the proxy must read: reload after it.
func (a *analyzer) writesCatalog(rv *pg.RangeVar) {
	if rv != nil && rv.Schemaname == "pgcipher" {
		a.plan.Reload = true
	}
}

// TenantText is a tenant column's value as the server stores and prints
// it, the name of its tenant key: text and varchar as given, integers and
// UUIDs in their canonical form (042 is tenant 42).  Other types are
// refused (pgcipher.encrypt_column refuses them as tenant columns).
func TenantText(oid uint32, s string) (string, error) {
	switch oid {
	case pgtype.TextOID, pgtype.VarcharOID:
		return s, nil
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return "", fmt.Errorf("whose value %q is not an integer", s)
		}
		return strconv.FormatInt(n, 10), nil
	case pgtype.UUIDOID:
		var u pgtype.UUID
		if err := u.Scan(strings.TrimSpace(s)); err != nil {
			return "", fmt.Errorf("whose value %q is not a UUID", s)
		}
		v, _ := u.Value()
		return v.(string), nil
	}
	return "", fmt.Errorf("of type OID %d: a tenant column is text, varchar, an integer or a UUID", oid)
}

// changesTenant: changes holds a change of pgcipher.tenant.
func changesTenant(changes []NameChange) bool {
	for _, c := range changes {
		if c.Kind == SetTenant || c.Kind == UnknownTenant {
			return true
		}
	}
	return false
}

// usesTenantKeys: a plan uses a tenant-keyed column.
func usesTenantKeys(uses []Use) bool {
	for _, u := range uses {
		if u.Binding != nil && u.Binding.TenantBy != "" {
			return true
		}
	}
	return false
}

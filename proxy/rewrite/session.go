// What a statement leaves on its server connection after its transaction
// (design 15.14): the proxy's transaction mode replays session-level SETs
// on each transaction's connection and refuses the rest.

package rewrite

import (
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// SessionEffect is what one SQL string does to its session beyond its
// transaction.
type SessionEffect struct {
	// Set: a session-level SET or RESET of this setting (lower case);
	// Reset: back to its default; ResetAll: RESET ALL (or DISCARD ALL)
	Set      string
	Reset    bool
	ResetAll bool
	// DeallocateAll: DISCARD ALL, which also drops every prepared statement
	DeallocateAll bool
	// Refused names what cannot outlive a transaction on a shared
	// connection ("LISTEN", "a WITH HOLD cursor", ...)
	Refused    string
	Statements int
}

// sessionKeywords are the first keywords of statements that may leave
// state on the session.
var sessionKeywords = []string{"set", "reset", "listen", "prepare", "declare", "create", "discard"}

// SessionEffects reports what sql leaves on the session, nil for nothing
// (most statements, told by their first keyword without parsing).
func SessionEffects(sql string) (*SessionEffect, error) {
	kw := firstKeyword(sql)
	multi := moreThanOne(sql)
	advisory := strings.Contains(sql, "advisory_lock") || strings.Contains(strings.ToLower(sql), "advisory_lock")
	known := false
	for _, k := range sessionKeywords {
		if kw == k {
			known = true
		}
	}
	if !known && !multi && !advisory {
		return nil, nil
	}
	tree, err := pg.Parse(sql)
	if err != nil {
		return nil, err
	}
	e := &SessionEffect{Statements: len(tree.Stmts)}
	if advisory && sessionAdvisoryLock(strings.ToLower(sql)) {
		e.Refused = "a session-level advisory lock (pg_advisory_lock)"
		return e, nil
	}
	for _, raw := range tree.Stmts {
		n := raw.Stmt
		switch {
		case n.GetVariableSetStmt() != nil:
			v := n.GetVariableSetStmt()
			if v.IsLocal || strings.EqualFold(v.Name, "transaction") {
				continue
			}
			switch v.Kind {
			case pg.VariableSetKind_VAR_RESET_ALL:
				e.ResetAll = true
			case pg.VariableSetKind_VAR_RESET, pg.VariableSetKind_VAR_SET_DEFAULT:
				e.Set, e.Reset = strings.ToLower(v.Name), true
			default:
				e.Set = strings.ToLower(v.Name)
			}
		case n.GetDiscardStmt() != nil:
			if n.GetDiscardStmt().Target == pg.DiscardMode_DISCARD_ALL {
				e.ResetAll, e.DeallocateAll = true, true
			}
		case n.GetListenStmt() != nil:
			e.Refused = "LISTEN"
		case n.GetPrepareStmt() != nil:
			e.Refused = "PREPARE (SQL)"
		case n.GetDeclareCursorStmt() != nil && n.GetDeclareCursorStmt().Options&cursorOptHold != 0:
			e.Refused = "a WITH HOLD cursor"
		case n.GetCreateStmt() != nil && isTemp(n.GetCreateStmt().Relation) &&
			n.GetCreateStmt().Oncommit != pg.OnCommitAction_ONCOMMIT_DROP,
			n.GetCreateTableAsStmt() != nil && n.GetCreateTableAsStmt().Into != nil &&
				isTemp(n.GetCreateTableAsStmt().Into.Rel) && n.GetCreateTableAsStmt().Into.OnCommit != pg.OnCommitAction_ONCOMMIT_DROP,
			n.GetViewStmt() != nil && isTemp(n.GetViewStmt().View),
			n.GetCreateSeqStmt() != nil && isTemp(n.GetCreateSeqStmt().Sequence):
			e.Refused = "a temporary relation that outlives its transaction"
		case tempObject(n):
			e.Refused = "an object in pg_temp (type, domain, function) that outlives its transaction"
		}
	}
	if e.Refused == "" && e.Set == "" && !e.ResetAll {
		return nil, nil
	}
	return e, nil
}

// tempObject: n creates a type, domain, function, procedure, aggregate
// or operator in pg_temp, which lives as long as the server connection's
// temporary schema (pgx's suite: CREATE TYPE pg_temp.text_range AS
// RANGE; on the next transaction's connection it does not exist).
func tempObject(n *pg.Node) bool {
	var name []*pg.Node
	switch {
	case n.GetCompositeTypeStmt() != nil:
		return isTemp(n.GetCompositeTypeStmt().Typevar)
	case n.GetCreateEnumStmt() != nil:
		name = n.GetCreateEnumStmt().TypeName
	case n.GetCreateRangeStmt() != nil:
		name = n.GetCreateRangeStmt().TypeName
	case n.GetCreateDomainStmt() != nil:
		name = n.GetCreateDomainStmt().Domainname
	case n.GetDefineStmt() != nil:
		name = n.GetDefineStmt().Defnames
	case n.GetCreateFunctionStmt() != nil:
		name = n.GetCreateFunctionStmt().Funcname
	}
	return len(name) > 1 && strings.HasPrefix(name[0].GetString_().GetSval(), "pg_temp")
}

// cursorOptHold is PostgreSQL's CURSOR_OPT_HOLD.
const cursorOptHold = 0x0020

// sessionAdvisoryLock: sql takes a session-level advisory lock (the
// transaction-level ones are pg_advisory_xact_lock and its kin).
func sessionAdvisoryLock(lower string) bool {
	return strings.Contains(lower, "pg_advisory_lock") || strings.Contains(lower, "pg_try_advisory_lock")
}

// Deallocate reads DEALLOCATE [PREPARE] name | ALL.
func Deallocate(sql string) (name string, all, ok bool) {
	if firstKeyword(sql) != "deallocate" {
		return "", false, false
	}
	tree, err := pg.Parse(sql)
	if err != nil || len(tree.Stmts) != 1 || tree.Stmts[0].Stmt.GetDeallocateStmt() == nil {
		return "", false, false
	}
	d := tree.Stmts[0].Stmt.GetDeallocateStmt()
	return d.Name, d.Isall, true
}

// firstKeyword is sql's first word in lower case, after blanks, comments
// and opening parentheses.
func firstKeyword(sql string) string {
	i := 0
	for i < len(sql) {
		switch c := sql[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '(':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case strings.HasPrefix(sql[i:], "/*"):
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return ""
			}
			i += end + 4
		default:
			j := i
			for j < len(sql) && (sql[j] >= 'a' && sql[j] <= 'z' || sql[j] >= 'A' && sql[j] <= 'Z' || sql[j] == '_') {
				j++
			}
			return strings.ToLower(sql[i:j])
		}
	}
	return ""
}

// moreThanOne: sql may hold more than one statement (a semicolon with
// something after it).
func moreThanOne(sql string) bool {
	i := strings.IndexByte(sql, ';')
	return i >= 0 && strings.TrimSpace(sql[i+1:]) != ""
}

// What a statement does to the session's name resolution: its search
// path, its role (which "$user" in the path names) and its temporary
// relations.  The wire package keeps that state per session (design
// 15.10); the analysis only reports the changes it finds.

package rewrite

import (
	"regexp"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// NameChangeKind says what a NameChange does.
type NameChangeKind int

const (
	// SetPath: search_path is set to Value (Local: until the end of
	// the transaction).
	SetPath NameChangeKind = iota + 1
	// ResetPath: search_path returns to the session's default.
	ResetPath
	// UnknownPath: search_path changed in a way the proxy does not
	// follow (SET ... FROM CURRENT, set_config with a computed value).
	UnknownPath
	// SetRole: the current user is Value ("" for the session user).
	SetRole
	// CreateTemp: a temporary relation named Value was created
	// (OnCommitDrop: it goes at the end of the transaction).
	CreateTemp
	// DropName: relations named Value were dropped by an unqualified
	// name (a temporary one first).
	DropName
	// DiscardTemp: every temporary relation was dropped.
	DiscardTemp
	// DiscardAll: DISCARD ALL (temporary relations, search path, role).
	DiscardAll
	// SetTenant: the setting pgcipher.tenant is Value (Local: until the
	// end of the transaction; Value "" for RESET or DEFAULT); design 13.13
	SetTenant
	// UnknownTenant: pgcipher.tenant changed in a way the proxy does not
	// follow (set_config with a computed value, SET ... FROM CURRENT)
	UnknownTenant
)

// TenantSetting is the session setting that chooses the tenant of
// tenant-keyed columns bound tenant_by 'session'.
const TenantSetting = "pgcipher.tenant"

// NameChange is one change of the session's name resolution.
type NameChange struct {
	Kind         NameChangeKind
	Value        string
	Local        bool
	OnCommitDrop bool
	// Func: made by set_config() (SetTenant, UnknownTenant), which the
	// pooler cannot replay as it replays SET
	Func bool
}

// setConfigPath matches set_config('search_path', '<value>', true|false).
var setConfigPath = regexp.MustCompile(`(?is)^set_config\s*\(\s*'search_path'\s*,\s*'((?:[^']|'')*)'\s*,\s*(true|false)\s*\)`)

// setConfigName matches set_config( and its first argument when that is
// a literal.
var setConfigName = regexp.MustCompile(`(?is)set_config\s*\(\s*(?:'((?:[^']|'')*)'\s*,)?`)

// setConfigTenant finds set_config('pgcipher.tenant', anywhere: in a
// comment or a string too, to be counted against the calls followed.
var setConfigTenant = regexp.MustCompile(`(?is)set_config\s*\(\s*'pgcipher\.tenant'`)

// tenantSetConfigs: the statements SELECT [pg_catalog.]set_config(
// 'pgcipher.tenant', 'value', true|false) alone (no FROM, WHERE or other
// column: a call that may not run, or run several times, is not one the
// proxy can follow) set the tenant; any other mention of such a call in
// sql, a comment's or a string's included, makes it unknown: the proxy
// never guesses the tenant it encrypts for (design 13.13).
func tenantSetConfigs(sql string, tree *pg.ParseResult) []NameChange {
	mentions := len(setConfigTenant.FindAllStringIndex(sql, -1))
	if mentions == 0 {
		return nil
	}
	var out []NameChange
	for _, raw := range tree.Stmts {
		sel := raw.Stmt.GetSelectStmt()
		if sel == nil || len(sel.TargetList) != 1 || len(sel.FromClause) > 0 || sel.WhereClause != nil ||
			sel.GroupClause != nil || sel.HavingClause != nil || sel.Op != pg.SetOperation_SETOP_NONE ||
			sel.LimitCount != nil || len(sel.ValuesLists) > 0 {
			continue
		}
		rt := sel.TargetList[0].GetResTarget()
		f := rt.GetVal().GetFuncCall()
		if f == nil || !strings.EqualFold(lastName(f.Funcname), "set_config") || len(f.Args) != 3 {
			continue
		}
		name, ok1 := constString(f.Args[0])
		value, ok2 := constString(f.Args[1])
		local, ok3 := constBool(f.Args[2])
		if !ok1 || name != TenantSetting || !ok2 || !ok3 {
			continue
		}
		out = append(out, NameChange{Kind: SetTenant, Value: value, Local: local, Func: true})
	}
	if len(out) != mentions {
		return []NameChange{{Kind: UnknownTenant, Func: true}}
	}
	return out
}

// lastName is the last part of a qualified name.
func lastName(names []*pg.Node) string {
	if len(names) == 0 || names[len(names)-1].GetString_() == nil {
		return ""
	}
	return names[len(names)-1].GetString_().Sval
}

func constString(n *pg.Node) (string, bool) {
	if c := n.GetAConst(); c != nil && c.GetSval() != nil {
		return c.GetSval().Sval, true
	}
	return "", false
}

// constBool: true, false, or their string forms ('true', 'on', ...).
func constBool(n *pg.Node) (bool, bool) {
	c := n.GetAConst()
	if c == nil {
		if tc := n.GetTypeCast(); tc != nil {
			return constBool(tc.Arg)
		}
		return false, false
	}
	if c.GetBoolval() != nil {
		return c.GetBoolval().Boolval, true
	}
	if c.GetSval() != nil {
		switch strings.ToLower(c.GetSval().Sval) {
		case "t", "true", "on", "yes", "1":
			return true, true
		case "f", "false", "off", "no", "0":
			return false, true
		}
	}
	return false, false
}

// setConfigChanges: set_config('search_path' or 'pgcipher.tenant',
// '<literal>', bool) is followed; one whose setting is not a literal,
// or whose value is not a literal, makes the path (and the tenant)
// unknown.
func setConfigChanges(sql string) []NameChange {
	calls := setConfigName.FindAllStringSubmatchIndex(sql, -1)
	var out []NameChange
	for _, c := range calls {
		if c[2] < 0 {
			return []NameChange{{Kind: UnknownPath}, {Kind: UnknownTenant}} // a computed setting name
		}
		name := strings.ToLower(strings.TrimSpace(sql[c[2]:c[3]]))
		if strings.ReplaceAll(name, "-", "_") != "search_path" {
			continue
		}
		m := setConfigPath.FindStringSubmatch(sql[c[0]:])
		if m == nil {
			return []NameChange{{Kind: UnknownPath}}
		}
		out = append(out, NameChange{Kind: SetPath, Value: strings.ReplaceAll(m[1], "''", "'"),
			Local: strings.EqualFold(m[2], "true")})
	}
	return out
}

// nameChanges lists what the statements of tree do to name resolution.
func nameChanges(sql string, tree *pg.ParseResult) []NameChange {
	var out []NameChange
	if strings.Contains(strings.ToLower(sql), "set_config") {
		out = append(out, setConfigChanges(sql)...)
		out = append(out, tenantSetConfigs(sql, tree)...)
	}
	for _, raw := range tree.Stmts {
		out = append(out, stmtNameChanges(raw.Stmt)...)
	}
	return out
}

func stmtNameChanges(n *pg.Node) []NameChange {
	temp := func(rv *pg.RangeVar, onCommit pg.OnCommitAction) []NameChange {
		if rv == nil || (rv.Relpersistence != "t" && rv.Schemaname != "pg_temp") {
			return nil
		}
		return []NameChange{{Kind: CreateTemp, Value: rv.Relname, OnCommitDrop: onCommit == pg.OnCommitAction_ONCOMMIT_DROP}}
	}
	switch {
	case n.GetVariableSetStmt() != nil:
		return variableSet(n.GetVariableSetStmt())
	case n.GetCreateStmt() != nil:
		return temp(n.GetCreateStmt().Relation, n.GetCreateStmt().Oncommit)
	case n.GetCreateTableAsStmt() != nil && n.GetCreateTableAsStmt().Into != nil:
		into := n.GetCreateTableAsStmt().Into
		return temp(into.Rel, into.OnCommit)
	case n.GetSelectStmt() != nil && n.GetSelectStmt().IntoClause != nil:
		into := n.GetSelectStmt().IntoClause
		return temp(into.Rel, into.OnCommit)
	case n.GetViewStmt() != nil:
		return temp(n.GetViewStmt().View, pg.OnCommitAction_ONCOMMIT_NOOP)
	case n.GetCreateSeqStmt() != nil:
		return temp(n.GetCreateSeqStmt().Sequence, pg.OnCommitAction_ONCOMMIT_NOOP)
	case n.GetDropStmt() != nil:
		var out []NameChange
		for _, o := range n.GetDropStmt().Objects {
			items := o.GetList().GetItems()
			if len(items) == 1 && items[0].GetString_() != nil {
				out = append(out, NameChange{Kind: DropName, Value: items[0].GetString_().Sval})
			}
		}
		return out
	case n.GetDiscardStmt() != nil:
		switch n.GetDiscardStmt().Target {
		case pg.DiscardMode_DISCARD_ALL:
			return []NameChange{{Kind: DiscardAll}}
		case pg.DiscardMode_DISCARD_TEMP:
			return []NameChange{{Kind: DiscardTemp}}
		}
	case n.GetExplainStmt() != nil:
		return stmtNameChanges(n.GetExplainStmt().Query)
	}
	return nil
}

func variableSet(v *pg.VariableSetStmt) []NameChange {
	name := strings.ToLower(v.Name)
	switch {
	case v.Kind == pg.VariableSetKind_VAR_RESET_ALL:
		// role is not reset by RESET ALL
		return []NameChange{{Kind: ResetPath}, {Kind: SetTenant}}
	case name == TenantSetting:
		switch v.Kind {
		case pg.VariableSetKind_VAR_SET_VALUE:
			if len(v.Args) == 1 && v.Args[0].GetAConst() != nil {
				c := v.Args[0].GetAConst()
				switch {
				case c.GetSval() != nil:
					return []NameChange{{Kind: SetTenant, Value: c.GetSval().Sval, Local: v.IsLocal}}
				case c.GetIval() != nil:
					return []NameChange{{Kind: SetTenant, Value: strconv.Itoa(int(c.GetIval().Ival)), Local: v.IsLocal}}
				case c.GetFval() != nil:
					return []NameChange{{Kind: SetTenant, Value: c.GetFval().Fval, Local: v.IsLocal}}
				}
			}
		case pg.VariableSetKind_VAR_SET_DEFAULT, pg.VariableSetKind_VAR_RESET:
			return []NameChange{{Kind: SetTenant, Local: v.IsLocal}}
		}
		return []NameChange{{Kind: UnknownTenant}}
	case name == "search_path":
		switch v.Kind {
		case pg.VariableSetKind_VAR_SET_VALUE:
			var items []string
			for _, a := range v.Args {
				c := a.GetAConst()
				if c == nil || c.GetSval() == nil {
					return []NameChange{{Kind: UnknownPath}}
				}
				items = append(items, quoteIdent(c.GetSval().Sval))
			}
			return []NameChange{{Kind: SetPath, Value: strings.Join(items, ", "), Local: v.IsLocal}}
		case pg.VariableSetKind_VAR_SET_DEFAULT, pg.VariableSetKind_VAR_RESET:
			if v.IsLocal {
				return []NameChange{{Kind: UnknownPath}}
			}
			return []NameChange{{Kind: ResetPath}}
		}
		return []NameChange{{Kind: UnknownPath}}
	case name == "role" || name == "session_authorization":
		role := ""
		if v.Kind == pg.VariableSetKind_VAR_SET_VALUE && len(v.Args) == 1 {
			c := v.Args[0].GetAConst()
			if c == nil || c.GetSval() == nil {
				return []NameChange{{Kind: UnknownPath}}
			}
			role = c.GetSval().Sval
			if strings.EqualFold(role, "none") && name == "role" {
				role = ""
			}
		}
		return []NameChange{{Kind: SetRole, Value: role, Local: v.IsLocal}}
	}
	return nil
}

// quoteIdent quotes a name as search_path's setting writes it.
func quoteIdent(s string) string {
	if s == "$user" || s == "" {
		return `"` + s + `"`
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
		}
	}
	return s
}

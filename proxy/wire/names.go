// A session's name resolution as the proxy follows it: the search path
// (with SET, SET LOCAL, RESET, set_config and DISCARD ALL), the current
// role that "$user" names, and the temporary relations the session
// created; changes made inside a transaction block are undone when it
// rolls back (design 15.10).

package wire

import (
	"maps"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
)

// nameState is what a transaction may undo.
type nameState struct {
	path    string // the search_path setting as written ("$user" unexpanded)
	role    string // the current role ("" for the session user)
	temps   map[string]bool
	unknown bool
	// the session's pgcipher.tenant (design 13.13), and whether it
	// changed in a way the proxy does not follow
	tenant        string
	tenantUnknown bool
}

func (n nameState) clone() nameState {
	n.temps = maps.Clone(n.temps)
	return n
}

type names struct {
	user string // the session user
	base string // the default search_path setting
	// unusable: schemas the session user has no USAGE on
	unusable map[string]bool
	cur      nameState
	// committed: the state before an unsettled change (a transaction
	// block, a batch, a statement not yet answered); nil: none
	committed *nameState
	// localPath: SET LOCAL search_path in the open transaction, which the
	// proxy does not follow (unknown until the transaction ends)
	localPath bool
	// ddl: uncommitted DDL named an encrypted relation's name: names
	// are unknown until it settles
	ddl      bool
	onCommit []string // temporary relations that go when it ends
	// localTenant: SET LOCAL pgcipher.tenant in the open transaction block
	// (the tenant until the block ends); nil: none
	localTenant *string
}

// uncommittedDDL records DDL inside a transaction that names an
// encrypted relation's name; it reports whether anything changed.
func (n *names) uncommittedDDL() bool {
	changed := !n.ddl
	n.ddl = true
	return changed
}

// reset starts the session's state with its default search path setting.
func (n *names) reset(user, setting string, unusable map[string]bool) {
	n.user, n.base, n.unusable = user, setting, unusable
	n.cur = nameState{temps: map[string]bool{}}
	n.committed, n.localPath, n.ddl, n.onCommit, n.localTenant = nil, false, false, nil, nil
}

// session is the state as catalog resolution wants it: with changes
// the server has not confirmed, the state before them too.
func (n *names) session() catalog.Session {
	s := n.sessionOf(n.cur)
	s.PathUnknown = s.PathUnknown || n.localPath || n.ddl
	if n.localTenant != nil {
		s.Tenant = *n.localTenant
	}
	if n.committed != nil {
		b := n.sessionOf(*n.committed)
		s.Before = &b
	}
	return s
}

func (n *names) sessionOf(st nameState) catalog.Session {
	setting := n.base
	if st.path != "" {
		setting = st.path
	}
	role := st.role
	if role == "" {
		role = n.user
	}
	var path []string
	for _, p := range expandSearchPath(setting, role) {
		// PostgreSQL skips schemas the role cannot use; another role's
		// privileges are not known: its path stays as written
		if st.role == "" && n.unusable[p] {
			continue
		}
		path = append(path, p)
	}
	return catalog.Session{Temps: st.temps, PathUnknown: st.unknown, SearchPath: path,
		Tenant: st.tenant, TenantUnknown: st.tenantUnknown}
}

// rolledBackInBlock: inside a transaction block something was rolled
// back (to a savepoint, or an error): changes made since the block began
// may be gone; those names are unknown until it ends.
func (n *names) rolledBackInBlock() (changed, tenantOnly bool) {
	if n.committed == nil {
		return false, false
	}
	// a SET (LOCAL) pgcipher.tenant since the block began may be undone
	if !n.cur.tenantUnknown && (n.cur.tenant != n.committed.tenant || n.localTenant != nil) {
		n.cur.tenantUnknown, n.localTenant, changed, tenantOnly = true, nil, true, true
	}
	if n.cur.unknown {
		return changed, tenantOnly
	}
	if n.cur.path != n.committed.path || n.cur.role != n.committed.role {
		n.cur.unknown, changed, tenantOnly = true, true, false
	}
	for t := range n.committed.temps {
		if !n.cur.temps[t] {
			n.cur.temps[t], changed, tenantOnly = true, true, false
		}
	}
	return changed, tenantOnly
}

// apply records a statement's changes, provisionally until settle: the
// statement may still fail, or its transaction roll back.  inBlock: it
// runs inside a transaction block.  It reports whether name resolution
// changed, and whether only the tenant did (plans of other tenants'
// columns are made again, the others stay).
func (n *names) apply(changes []rewrite.NameChange, inBlock bool) (changed, tenantOnly bool) {
	if len(changes) == 0 {
		return false, false
	}
	tenantOnly = true
	for _, c := range changes {
		if c.Kind != rewrite.SetTenant && c.Kind != rewrite.UnknownTenant {
			tenantOnly = false
		}
	}
	if n.committed == nil {
		c := n.cur.clone()
		n.committed = &c
	}
	for _, c := range changes {
		switch c.Kind {
		case rewrite.SetPath:
			if c.Local {
				n.localPath = n.localPath || inBlock // outside a block SET LOCAL does nothing
				continue
			}
			n.cur.path, n.cur.unknown = c.Value, false
			if c.Value == "" {
				n.cur.path = `""` // an empty path, not the default
			}
		case rewrite.ResetPath:
			n.cur.path, n.cur.unknown = "", false
		case rewrite.UnknownPath:
			n.cur.unknown = true
		case rewrite.SetRole:
			if c.Local {
				n.localPath = n.localPath || inBlock
				continue
			}
			n.cur.role = c.Value
		case rewrite.CreateTemp:
			n.cur.temps[c.Value] = true
			if c.OnCommitDrop {
				n.onCommit = append(n.onCommit, c.Value)
			}
		case rewrite.DropName:
			delete(n.cur.temps, c.Value)
		case rewrite.DiscardTemp:
			n.cur.temps = map[string]bool{}
		case rewrite.DiscardAll:
			n.cur = nameState{temps: map[string]bool{}}
			n.localPath, n.localTenant = false, nil
		case rewrite.SetTenant:
			if c.Local {
				if inBlock {
					v := c.Value
					n.localTenant = &v
				} else {
					// outside a block SET LOCAL does nothing, unless the
					// statement is part of an implicit transaction (a
					// pipeline, a multi-statement query): not followed
					n.cur.tenantUnknown, n.localTenant = true, nil
				}
				continue
			}
			n.cur.tenant, n.cur.tenantUnknown = c.Value, false
			n.localTenant = nil // a session SET after SET LOCAL in a block wins
		case rewrite.UnknownTenant:
			n.cur.tenantUnknown, n.localTenant = true, nil
		}
	}
	return true, tenantOnly
}

// settle is called once nothing is pending outside a transaction block:
// rolledBack says whether anything was rolled back since the last time
// (an error, or a ROLLBACK).  Changes that may have been undone leave
// both possibilities open: temporary relations are kept (a name that
// may be one is sent as pg_temp's), and a search path that may have
// changed becomes unknown.  It reports whether anything changed.
func (n *names) settle(rolledBack bool) (changed, tenantOnly bool) {
	if n.committed == nil && !n.localPath && !n.ddl && len(n.onCommit) == 0 && n.localTenant == nil {
		return false, false
	}
	// only the tenant was unsettled: the rest of name resolution stands
	tenantOnly = !n.localPath && !n.ddl && len(n.onCommit) == 0 &&
		(n.committed == nil || (n.cur.path == n.committed.path && n.cur.role == n.committed.role &&
			n.cur.unknown == n.committed.unknown && maps.Equal(n.cur.temps, n.committed.temps)))
	if rolledBack && n.committed != nil {
		for t := range n.committed.temps {
			n.cur.temps[t] = true
		}
		if n.cur.path != n.committed.path || n.cur.role != n.committed.role || n.committed.unknown {
			n.cur.unknown = true
		}
		if n.cur.tenant != n.committed.tenant || n.committed.tenantUnknown {
			n.cur.tenantUnknown = true
		}
	}
	for _, t := range n.onCommit {
		delete(n.cur.temps, t)
	}
	n.committed, n.localPath, n.ddl, n.onCommit, n.localTenant = nil, false, false, nil, nil
	return true, tenantOnly
}

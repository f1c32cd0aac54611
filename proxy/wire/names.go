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
	n.committed, n.localPath, n.ddl, n.onCommit = nil, false, false, nil
}

// session is the state as catalog resolution wants it: with changes
// the server has not confirmed, the state before them too.
func (n *names) session() catalog.Session {
	s := n.sessionOf(n.cur)
	s.PathUnknown = s.PathUnknown || n.localPath || n.ddl
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
	return catalog.Session{Temps: st.temps, PathUnknown: st.unknown, SearchPath: path}
}

// rolledBackInBlock: inside a transaction block something was rolled
// back (to a savepoint, or an error): changes made since the block began
// may be gone; those names are unknown until it ends.
func (n *names) rolledBackInBlock() bool {
	if n.committed == nil || n.cur.unknown {
		return false
	}
	changed := false
	if n.cur.path != n.committed.path || n.cur.role != n.committed.role {
		n.cur.unknown, changed = true, true
	}
	for t := range n.committed.temps {
		if !n.cur.temps[t] {
			n.cur.temps[t], changed = true, true
		}
	}
	return changed
}

// apply records a statement's changes, provisionally until settle: the
// statement may still fail, or its transaction roll back.  inBlock: it
// runs inside a transaction block.  It reports whether anything changed.
func (n *names) apply(changes []rewrite.NameChange, inBlock bool) bool {
	if len(changes) == 0 {
		return false
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
			n.localPath = false
		}
	}
	return true
}

// settle is called once nothing is pending outside a transaction block:
// rolledBack says whether anything was rolled back since the last time
// (an error, or a ROLLBACK).  Changes that may have been undone leave
// both possibilities open: temporary relations are kept (a name that
// may be one is sent as pg_temp's), and a search path that may have
// changed becomes unknown.  It reports whether anything changed.
func (n *names) settle(rolledBack bool) bool {
	if n.committed == nil && !n.localPath && !n.ddl && len(n.onCommit) == 0 {
		return false
	}
	if rolledBack && n.committed != nil {
		for t := range n.committed.temps {
			n.cur.temps[t] = true
		}
		if n.cur.path != n.committed.path || n.cur.role != n.committed.role || n.committed.unknown {
			n.cur.unknown = true
		}
	}
	for _, t := range n.onCommit {
		delete(n.cur.temps, t)
	}
	n.committed, n.localPath, n.ddl, n.onCommit = nil, false, false, nil
	return true
}

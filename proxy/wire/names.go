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
	cur  nameState
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
func (n *names) reset(user, setting string) {
	n.user, n.base = user, setting
	n.cur = nameState{temps: map[string]bool{}}
	n.committed, n.localPath, n.ddl, n.onCommit = nil, false, false, nil
}

// session is the state as catalog resolution wants it.
func (n *names) session() catalog.Session {
	setting := n.base
	if n.cur.path != "" {
		setting = n.cur.path
	}
	role := n.cur.role
	if role == "" {
		role = n.user
	}
	return catalog.Session{Temps: n.cur.temps, PathUnknown: n.cur.unknown || n.localPath || n.ddl,
		SearchPath: expandSearchPath(setting, role)}
}

// apply records a statement's changes; settled: nothing is pending and
// the statement runs alone outside a transaction block (its changes
// cannot be undone).  It reports whether anything changed.
func (n *names) apply(changes []rewrite.NameChange, settled bool) bool {
	if len(changes) == 0 {
		return false
	}
	if !settled && n.committed == nil {
		c := n.cur.clone()
		n.committed = &c
	}
	for _, c := range changes {
		switch c.Kind {
		case rewrite.SetPath:
			if c.Local {
				n.localPath = n.localPath || !settled // outside a block SET LOCAL does nothing
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
				n.localPath = n.localPath || !settled
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

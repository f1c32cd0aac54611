// Decryption rights (design 13.12): the grants of pgcipher.column_rights
// as the server returns them, verified with the key derived from the
// column master key, and the decision for one role and column.

package catalog

import (
	"errors"
	"fmt"
	"sync"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// GrantRow is one row of pgcipher.column_rights: a grant and its MAC.
type GrantRow struct {
	colcrypt.Grant
	MAC []byte
}

// Ungranted is what roles may do with a column that has no grant at all:
// every role everything (the behaviour before rights, the default), or
// nothing.
type Ungranted uint8

const (
	UngrantedAll Ungranted = iota
	UngrantedNone
)

// ParseUngranted reads "all" or "none".
func ParseUngranted(s string) (Ungranted, error) {
	switch s {
	case "all":
		return UngrantedAll, nil
	case "none":
		return UngrantedNone, nil
	}
	return 0, fmt.Errorf("ungranted-columns: %q is neither all nor none", s)
}

// ErrRightForged: a grant the server returned does not verify, or is
// older than one the proxy has seen (an old grant put back).
var ErrRightForged = errors.New("a right the server returned does not verify")

// RightError: the role lacks the access a statement needs on a column.
type RightError struct {
	Label, Role string
	Need, Have  colcrypt.Access
}

func (e *RightError) Error() string {
	verb := "decrypt or compare values of"
	if e.Need == colcrypt.AccessWrite {
		verb = "encrypt values for"
	}
	return fmt.Sprintf("role %q may not %s encrypted column %s (it has right %q, the statement needs %q)",
		e.Role, verb, e.Label, e.Have, e.Need)
}

// rights is one catalog's grants, verified once, by column label and role,
// and its bound labels that had grants before (pinned: none now means
// nobody's), read without the keys' lock on every check.
type rights struct {
	once    sync.Once
	byLabel map[string]map[string]grantState
	had     map[string]bool
}

type grantState struct {
	access  colcrypt.Access
	keyName string // the key the grant was signed for
	bad     error  // does not verify, or rolled back
}

// SetGrants records the grants the server returned (Load does).
func (c *Catalog) SetGrants(rows []GrantRow) { c.grants = rows }

// Access says what role may do with the column of binding b, or why the
// proxy cannot tell (ErrRightForged).  Rights are verified once per
// catalog, with the keys' MAC key.
func (k *Keys) Access(c *Catalog, b *Binding, role string) (colcrypt.Access, error) {
	c.rights.once.Do(func() { c.rights.byLabel, c.rights.had = k.verify(c.database, c.grants, c.wrappedByLabel()) })
	per := c.rights.byLabel[b.Spec.Label]
	if per == nil {
		if c.rights.had[b.Spec.Label] {
			return colcrypt.AccessNone, nil // its grants were removed: nobody's
		}
		if Ungranted(k.ungranted.Load()) == UngrantedNone {
			return colcrypt.AccessNone, nil
		}
		return colcrypt.AccessRead, nil
	}
	g, ok := per[role]
	switch {
	case !ok:
		return colcrypt.AccessNone, nil
	case g.bad != nil:
		return colcrypt.AccessNone, g.bad
	case g.keyName != b.KeyName:
		return colcrypt.AccessNone, nil // signed for the column under another key
	}
	return g.access, nil
}

// Allow returns a *RightError where role may not do need with b's column.
func (k *Keys) Allow(c *Catalog, b *Binding, role string, need colcrypt.Access) error {
	have, err := k.Access(c, b, role)
	if err != nil {
		return err
	}
	if have < need {
		return &RightError{Label: b.Spec.Label, Role: role, Need: need, Have: have}
	}
	return nil
}

// verify checks every grant's MAC and serial, pinning the newest serial
// of each column and role, and that each column had grants, for the
// life of the proxy: a grant the server later returns older, or a
// column whose grants all disappear, cannot widen a right.
func (k *Keys) verify(db string, rows []GrantRow, wrapped map[string][]byte) (map[string]map[string]grantState, map[string]bool) {
	out, had := map[string]map[string]grantState{}, map[string]bool{}
	k.mu.Lock()
	defer k.mu.Unlock()
	for label := range wrapped {
		if k.granted[pinKey{db, label}] {
			had[label] = true
		}
	}
	for _, r := range rows {
		w, bound := wrapped[r.Label]
		if !bound {
			continue // no column of this catalog has the label: nothing to allow
		}
		r.WrappedCEK = w
		per := out[r.Label]
		if per == nil {
			per = map[string]grantState{}
			out[r.Label] = per
		}
		st := grantState{access: r.Access, keyName: r.KeyName}
		rk := rightKey{db, r.Label, r.Role}
		switch {
		case k.rightsKey == nil || !r.Verify(k.rightsKey, r.MAC):
			st = grantState{bad: fmt.Errorf("the right of role %q on column %s: %w", r.Role, r.Label, ErrRightForged)}
		case r.Serial < k.serials[rk]:
			st = grantState{bad: fmt.Errorf("the right of role %q on column %s is older (serial %d) than one the proxy has seen (%d): %w",
				r.Role, r.Label, r.Serial, k.serials[rk], ErrRightForged)}
		default:
			k.serials[rk] = r.Serial
			k.granted[pinKey{db, r.Label}] = true
		}
		per[r.Role] = st
	}
	return out, had
}

// rightKey: a role's right on a column of a database.
type rightKey struct{ database, label, role string }

// SetUngranted sets what a column without grants allows (a SIGHUP may
// change it while sessions run).
func (k *Keys) SetUngranted(u Ungranted) { k.ungranted.Store(uint32(u)) }

// wrappedByLabel is each bound column's wrapped CEK, by label.
func (c *Catalog) wrappedByLabel() map[string][]byte {
	out := map[string][]byte{}
	for _, b := range c.Bindings() {
		out[b.Spec.Label] = b.WrappedCEK
	}
	return out
}

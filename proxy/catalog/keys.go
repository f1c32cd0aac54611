// Column keys: unwrapped with the column master key on first use, kept in
// memory only, and pinned.

package catalog

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// ErrPinMismatch: the server reports, for a column label the proxy has
// already used, another key, type, level or join group.
var ErrPinMismatch = errors.New("the server changed the encryption of a column since the proxy first used it")

// ErrForeignCMK: a column key is wrapped under another column master key.
var ErrForeignCMK = errors.New("column key is wrapped under another column master key")

// Keys holds the column master key and everything derived from it.  It is
// shared by all connections and safe for concurrent use.
type Keys struct {
	cmk     []byte
	cmkName string

	mu      sync.RWMutex
	ceks    map[string][]byte           // cmk name + key name + wrapped → CEK
	columns map[pinKey]*colcrypt.Column // the column of each database and label
	pins    map[pinKey]*Binding         // the binding first used of each database and label

	// rights (design 13.12): the grants' MAC key, the newest serial seen
	// of each right, the columns seen with grants, and what a column
	// without grants allows (an Ungranted)
	rightsKey []byte
	serials   map[rightKey]int64
	granted   map[pinKey]bool
	ungranted atomic.Uint32

	// tenant keys (design 13.13): the keyring and the derived columns
	tenantMu   sync.RWMutex
	keyring    *colcrypt.Keyring
	tenantCols *tenantCache
}

// pinKey: a label is a column's within one database.
type pinKey struct{ database, label string }

// NewKeys keeps the CMK (32 bytes) of the given name.
func NewKeys(cmk []byte, cmkName string) *Keys {
	rk, _ := colcrypt.RightsKey(cmk, cmkName) // nil for a CMK of another size: no grant verifies
	return &Keys{cmk: cmk, cmkName: cmkName, ceks: map[string][]byte{},
		columns: map[pinKey]*colcrypt.Column{}, pins: map[pinKey]*Binding{},
		rightsKey: rk, serials: map[rightKey]int64{}, granted: map[pinKey]bool{},
		tenantCols: newTenantCache(DefaultTenantCache)}
}

// CMKName is the name under which the proxy wraps new keys.
func (k *Keys) CMKName() string { return k.cmkName }

// NewWrappedKey draws a column key and wraps it for key name name.
func (k *Keys) NewWrappedKey(name string) ([]byte, error) {
	cek, err := colcrypt.NewCEK(rand.Reader)
	if err != nil {
		return nil, err
	}
	return colcrypt.WrapCEK(k.cmk, cek, k.cmkName, name, rand.Reader)
}

// Column returns the crypto of a bound column, checking its pin.
func (k *Keys) Column(b *Binding) (*colcrypt.Column, error) {
	label := b.Spec.Label
	key := pinKey{b.Database, label}
	// the common case, a column already pinned, under the read lock
	k.mu.RLock()
	c, pinned, err := k.pinned(b)
	k.mu.RUnlock()
	if pinned {
		return c, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if c, pinned, err := k.pinned(b); pinned {
		return c, err
	}
	if b.CMKName != k.cmkName {
		return nil, fmt.Errorf("column %s: key %q under CMK %q, the proxy holds %q: %w",
			label, b.KeyName, b.CMKName, k.cmkName, ErrForeignCMK)
	}
	ck := b.CMKName + "\x00" + b.KeyName + "\x00" + string(b.WrappedCEK)
	cek := k.ceks[ck]
	if cek == nil {
		var err error
		if cek, err = colcrypt.UnwrapCEK(k.cmk, b.WrappedCEK, b.CMKName, b.KeyName); err != nil {
			return nil, fmt.Errorf("column %s: %w", label, err)
		}
		k.ceks[ck] = cek
	}
	c, err = colcrypt.NewColumn(cek, b.Spec)
	if err != nil {
		return nil, err
	}
	pin := *b
	k.pins[key] = &pin
	k.columns[key] = c
	return c, nil
}

// pinned returns the column of a label already pinned, checking that b
// is the binding pinned (caller holds k.mu).
func (k *Keys) pinned(b *Binding) (*colcrypt.Column, bool, error) {
	key := pinKey{b.Database, b.Spec.Label}
	p := k.pins[key]
	if p == nil {
		return nil, false, nil
	}
	// the order format may change (a column moved to format 2, design
	// 13.5b): not part of the pin, the column is made again for it
	if p.Spec.Binding() != b.Spec.Binding() || p.KeyName != b.KeyName || p.CMKName != b.CMKName ||
		!bytes.Equal(p.WrappedCEK, b.WrappedCEK) || p.TenantBy != b.TenantBy {
		return nil, true, fmt.Errorf("column %s: %w", b.Spec.Label, ErrPinMismatch)
	}
	if c := k.columns[key]; c.Spec().OREFormat == b.Spec.OREFormat || b.Spec.Level != colcrypt.ORD {
		return c, true, nil
	}
	return nil, false, nil
}

// Decryption rights (design 13.12): a grant says what one database role
// may do with one encrypted column, and carries an HMAC under a key
// derived from the column master key, so that the server, which stores
// grants, cannot forge or alter one.

package colcrypt

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Access is what a grant allows on a column; each level includes the
// ones before it.
type Access uint8

const (
	// AccessNone: nothing; the grant revokes an earlier one.
	AccessNone Access = iota
	// AccessWrite: encrypt values to store them (INSERT, UPDATE … SET c =
	// value, COPY FROM), never decrypt, compare or compute.
	AccessWrite
	// AccessRead: also decrypt results, compare (WHERE c = value, LIKE,
	// ranges, joins) and compute (aggregates, SET c = c + 1): a
	// comparison tells whether a value is there, so it is a read.
	AccessRead
)

var accessNames = [...]string{"none", "write", "read"}

func (a Access) String() string {
	if int(a) < len(accessNames) {
		return accessNames[a]
	}
	return fmt.Sprintf("access(%d)", a)
}

// ParseAccess reads none, write or read.
func ParseAccess(s string) (Access, error) {
	for i, n := range accessNames {
		if s == n {
			return Access(i), nil
		}
	}
	return 0, fmt.Errorf("colcrypt: unknown access %q (none, write or read)", s)
}

// MACSize is the length of a grant's MAC.
const MACSize = sha256.Size

// Grant is one row of pgcipher.column_rights: role Role may do Access
// with the column labelled Label, bound to key KeyName, whose wrapped CEK
// is WrappedCEK (not stored in the row: the binding's, so that a grant
// holds only for a column under that very key, in whatever database).
// Serial orders the grants of one column and role: the highest counts.
type Grant struct {
	Label      string
	KeyName    string
	Role       string
	Access     Access
	Serial     int64
	WrappedCEK []byte
}

// RightsKey derives the grants' MAC key from the CMK:
// HKDF-SHA-256(CMK, no salt, info = "pgcipher rights v1\0" ‖ CMK name).
func RightsKey(cmk []byte, cmkName string) ([]byte, error) {
	if len(cmk) != CMKSize {
		return nil, fmt.Errorf("colcrypt: CMK of %d bytes, want %d", len(cmk), CMKSize)
	}
	return hkdf.Key(sha256.New, cmk, nil, "pgcipher rights v1\x00"+cmkName, 32)
}

// MAC is HMAC-SHA-256(key, "pgcipher grant v1\0" ‖ each field with its
// length: label, key name, role, access name, the wrapped CEK, then the
// serial (8 bytes, big-endian)).  Lengths keep "a" + "bc" apart from
// "ab" + "c".
func (g Grant) MAC(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("pgcipher grant v1\x00"))
	var n [8]byte
	for _, f := range []string{g.Label, g.KeyName, g.Role, g.Access.String(), string(g.WrappedCEK)} {
		binary.BigEndian.PutUint32(n[:4], uint32(len(f)))
		m.Write(n[:4])
		m.Write([]byte(f))
	}
	binary.BigEndian.PutUint64(n[:], uint64(g.Serial))
	m.Write(n[:])
	return m.Sum(nil)
}

// Verify reports whether mac is g's MAC under key (constant time).
func (g Grant) Verify(key, mac []byte) bool {
	return hmac.Equal(g.MAC(key), mac)
}

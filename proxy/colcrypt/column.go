// A Column encrypts and decrypts the values of one encrypted column: it is
// bound to a CEK, key id, type, level, label and join group, and writes
// and reads the ciphertext format of design 13.3.

package colcrypt

import (
	"bytes"
	"cmp"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/pgcipher/pgcipher/proxy/ore"
)

// Spec says what a column is: its key id, plain type, level, label
// (schema.table.column at binding time) and join group.
type Spec struct {
	KeyID uint32
	Type  Type
	Level Level
	Label string
	Group string // empty: the label
	// OREFormat (ORD): the order format(s) the column holds, as
	// pgcipher.encrypted_columns.ore_format says: "1", "1+2" (moving to
	// 2: values written carry both), "12" (every value carries both),
	// "2+1" (moving, second pass) or "2"; empty is "1" (design 13.5b)
	OREFormat string
	// CaseInsensitive (MATCH): the Bloom filters are of the case-folded
	// text (Fold), so that ILIKE, upper() and lower() searches find
	// their candidates; pgcipher.encrypted_columns.case_insensitive
	CaseInsensitive bool
	// Tenant: KeyID is a tenant key's, and the column's keys derive from
	// it (TenantColumnKey); every value carries FlagTenant (design 13.13)
	Tenant bool
}

// Binding is the spec without its order format: what a column's values
// are bound to, which a move to order format 2 does not change.
func (s Spec) Binding() Spec {
	s.OREFormat = ""
	return s
}

// Family is Binding without a tenant column's key id: the same for the
// columns of every tenant of one tenant-keyed binding (design 13.13).
func (s Spec) Family() Spec {
	s = s.Binding()
	if s.Tenant {
		s.KeyID = 0
	}
	return s
}

// OREFormats lists the order formats of a column, in the order a column
// moves through them.
var OREFormats = []string{"1", "1+2", "12", "2+1", "2"}

// Column holds a column's derived keys.  It is safe for concurrent use.
type Column struct {
	spec     Spec
	header   Header
	aead     cipher.AEAD
	eqKey    []byte
	ore      *ore.Key  // ORD only: order format 1
	ore2     *ore.Key2 // ORD only: order format 2
	matchKey []byte    // MATCH only
}

// GroupTag is the join-group tag of the header: the first 4 bytes of
// SHA-256("pgcipher group v1\0" ‖ group).
func GroupTag(group string) [4]byte {
	sum := sha256.Sum256([]byte("pgcipher group v1\x00" + group))
	return [4]byte(sum[:4])
}

// NewColumn derives the keys of a column from its (unwrapped) CEK.
func NewColumn(cek []byte, s Spec) (*Column, error) {
	if !s.Type.Valid() {
		return nil, fmt.Errorf("colcrypt: column %q: unknown type %d", s.Label, s.Type)
	}
	if !s.Level.Valid() {
		return nil, fmt.Errorf("colcrypt: column %q: unknown level %d", s.Label, s.Level)
	}
	if !s.Type.HasLevel(s.Level) {
		return nil, fmt.Errorf("colcrypt: column %q: level %s exists for text only, not %s", s.Label, s.Level, s.Type)
	}
	if s.Group == "" {
		s.Group = s.Label
	}
	if s.Level == ORD && s.OREFormat == "" {
		s.OREFormat = "1"
	}
	if s.Level == ORD && !slices.Contains(OREFormats, s.OREFormat) {
		return nil, fmt.Errorf("colcrypt: column %q: unknown order format %q", s.Label, s.OREFormat)
	}
	if s.Level != ORD {
		s.OREFormat = ""
	}
	if s.CaseInsensitive && s.Level != MATCH {
		return nil, fmt.Errorf("colcrypt: column %q: only level MATCH can be case-insensitive, not %s", s.Label, s.Level)
	}
	c := &Column{spec: s, header: Header{
		Version: Version, Type: s.Type, Level: s.Level,
		KeyID: s.KeyID, GroupTag: GroupTag(s.Group),
	}}
	switch s.OREFormat {
	case "1+2", "12":
		c.header.Version, c.header.Flags = Version2, FlagORE1
	case "2+1", "2":
		c.header.Version = Version2
	}
	if s.CaseInsensitive {
		c.header.Flags = FlagFolded
	}
	if s.Tenant {
		c.header.Flags |= FlagTenant
	}
	pk, err := SubKey(cek, PurposePayload, "")
	if err != nil {
		return nil, fmt.Errorf("colcrypt: column %q: %w", s.Label, err)
	}
	if c.aead, err = newGCM(pk); err != nil {
		return nil, fmt.Errorf("colcrypt: column %q: %w", s.Label, err)
	}
	if s.Level.HasToken() {
		if c.eqKey, err = SubKey(cek, PurposeEq, s.Group); err != nil {
			return nil, fmt.Errorf("colcrypt: column %q: %w", s.Label, err)
		}
	}
	if s.Level == ORD {
		prf, err := SubKey(cek, PurposeOREPRF, s.Group)
		if err != nil {
			return nil, fmt.Errorf("colcrypt: column %q: %w", s.Label, err)
		}
		perm, err := SubKey(cek, PurposeOREPerm, s.Group)
		if err != nil {
			return nil, fmt.Errorf("colcrypt: column %q: %w", s.Label, err)
		}
		if c.ore, err = ore.NewKey(prf, perm); err != nil {
			return nil, fmt.Errorf("colcrypt: column %q: %w", s.Label, err)
		}
		if prf, err = SubKey(cek, PurposeORE2PRF, s.Group); err != nil {
			return nil, fmt.Errorf("colcrypt: column %q: %w", s.Label, err)
		}
		if perm, err = SubKey(cek, PurposeORE2Perm, s.Group); err != nil {
			return nil, fmt.Errorf("colcrypt: column %q: %w", s.Label, err)
		}
		if c.ore2, err = ore.NewKey2(prf, perm); err != nil {
			return nil, fmt.Errorf("colcrypt: column %q: %w", s.Label, err)
		}
	}
	if s.Level == MATCH {
		if c.matchKey, err = SubKey(cek, PurposeMatch, s.Group); err != nil {
			return nil, fmt.Errorf("colcrypt: column %q: %w", s.Label, err)
		}
	}
	return c, nil
}

// Spec returns the column's description, its group filled in.
func (c *Column) Spec() Spec { return c.spec }

// Header returns the header every ciphertext of the column carries.
func (c *Column) Header() Header { return c.header }

// ad is the payload's associated data: header ‖ label.
func (c *Column) ad(header []byte) []byte {
	return append(bytes.Clone(header[:HeaderSize]), c.spec.Label...)
}

// Token returns the 16-byte equality token of a payload:
// HMAC-SHA-256(eq key, canonical input)[0:16].
func (c *Column) Token(payload []byte) ([]byte, error) {
	if c.eqKey == nil {
		return nil, fmt.Errorf("colcrypt: column %q: level %s has no equality token", c.spec.Label, c.spec.Level)
	}
	in, err := TokenInput(c.spec.Type, payload)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, c.eqKey)
	m.Write(in)
	return m.Sum(nil)[:TokenSize], nil
}

// Encrypt encrypts the PostgreSQL text form of a value; randomness (the
// GCM nonce and, at ORD, the ORE's r) comes from rand.  At MATCH this
// encrypts a stored value; EncryptPattern encrypts a query.
func (c *Column) Encrypt(plaintext string, rand io.Reader) ([]byte, error) {
	p, err := Encode(c.spec.Type, plaintext)
	if err != nil {
		return nil, err
	}
	return c.EncryptPayload(p, rand)
}

// EncryptPayload encrypts an encoded payload (see Encode).
func (c *Column) EncryptPayload(p []byte, rand io.Reader) ([]byte, error) {
	if m := c.spec.Type.PayloadSize(); m > 0 && len(p) != m {
		return nil, fmt.Errorf("colcrypt: %s payload of %d bytes, want %d", c.spec.Type, len(p), m)
	}
	var bloom *[BloomSize]byte
	if c.spec.Level == MATCH {
		bloom = c.valueBloom(p)
	}
	return c.seal(c.header, p, bloom, rand)
}

// seal writes a ciphertext with header h: the token of p (EQ, ORD,
// MATCH), the ORE part of p (ORD), the Bloom filter (MATCH) and the
// payload p.
func (c *Column) seal(h Header, p []byte, bloom *[BloomSize]byte, rand io.Reader) ([]byte, error) {
	out := make([]byte, 0, Size(c.spec.Type, c.spec.Level, len(p))+ore.Size(c.spec.Type.OrderInputSize()))
	out = h.Append(out)
	if c.spec.Level.HasToken() {
		tok, err := c.Token(p)
		if err != nil {
			return nil, err
		}
		out = append(out, tok...)
	}
	if c.spec.Level == ORD {
		in, err := OrderInput(c.spec.Type, p)
		if err != nil {
			return nil, err
		}
		// format 2's part first, then format 1's where the value carries it
		if h.Version == Version2 {
			if out, err = appendORE(out, c.ore2.Encrypt, in, rand); err != nil {
				return nil, fmt.Errorf("colcrypt: column %q: %w", c.spec.Label, err)
			}
		}
		if h.Version == Version || h.Flags&^FlagTenant == FlagORE1 {
			if out, err = appendORE(out, c.ore.Encrypt, in, rand); err != nil {
				return nil, fmt.Errorf("colcrypt: column %q: %w", c.spec.Label, err)
			}
		}
	}
	if c.spec.Level == MATCH {
		out = append(out, bloom[:]...)
	}
	nonce := out[len(out) : len(out)+NonceSize]
	if _, err := io.ReadFull(rand, nonce); err != nil {
		return nil, fmt.Errorf("colcrypt: column %q: reading randomness: %w", c.spec.Label, err)
	}
	out = out[:len(out)+NonceSize]
	return c.aead.Seal(out, nonce, p, c.ad(out)), nil
}

// appendORE appends the ORE part enc makes of order input in.
func appendORE(out []byte, enc func([]byte, io.Reader) ([]byte, error), in []byte, rand io.Reader) ([]byte, error) {
	o, err := enc(in, rand)
	if err != nil {
		return out, err
	}
	return append(out, o...), nil
}

// EncryptOperand encrypts an encoded payload as the operand of a
// comparison (=, <, BETWEEN, ...) with the column's stored values.  At
// order format 2 that is a query: the equality token and the left part of
// the ORE only, no payload, so that it costs a few AES blocks rather than
// the right part's 16 per block, and cannot be stored or decrypted.
// Otherwise it is a value (EncryptPayload).
func (c *Column) EncryptOperand(p []byte, rand io.Reader) ([]byte, error) {
	if c.spec.Level != ORD || (c.spec.OREFormat != "2+1" && c.spec.OREFormat != "2") {
		return c.EncryptPayload(p, rand)
	}
	if m := c.spec.Type.PayloadSize(); m > 0 && len(p) != m {
		return nil, fmt.Errorf("colcrypt: %s payload of %d bytes, want %d", c.spec.Type, len(p), m)
	}
	tok, err := c.Token(p)
	if err != nil {
		return nil, err
	}
	in, err := OrderInput(c.spec.Type, p)
	if err != nil {
		return nil, err
	}
	left, err := c.ore2.EncryptLeft(in)
	if err != nil {
		return nil, fmt.Errorf("colcrypt: column %q: %w", c.spec.Label, err)
	}
	h := c.header
	h.Flags = FlagQuery | h.Flags&FlagTenant
	out := make([]byte, 0, HeaderSize+TokenSize+len(left))
	out = h.Append(out)
	out = append(out, tok...)
	return append(out, left...), nil
}

// EncryptBound returns the operand of one side of a range comparison on
// a prefix-ordered ORD column (text, bytea, numeric), for a query the
// proxy rechecks: EncryptOperand with its equality token set to the
// lowest bytes (low: a lower bound) or the highest.  The server orders
// values with equal order prefixes by their tokens; such a bound lets
// every value that shares its prefix through, so that the server's
// answer is a superset of the exact one.  Never stored, and never an
// operand of equality (its token matches no value).
func (c *Column) EncryptBound(p []byte, rand io.Reader, low bool) ([]byte, error) {
	ct, err := c.EncryptOperand(p, rand)
	if err != nil {
		return nil, err
	}
	if c.spec.Level != ORD || len(ct) < HeaderSize+TokenSize {
		return nil, fmt.Errorf("colcrypt: column %q: a range bound needs level ORD", c.spec.Label)
	}
	fill := byte(0xff)
	if low {
		fill = 0
	}
	for i := HeaderSize; i < HeaderSize+TokenSize; i++ {
		ct[i] = fill
	}
	return ct, nil
}

// Decrypt checks that ct is well formed and belongs to this column, and
// returns the PostgreSQL text form of its value (of a MATCH query: the
// pattern).
func (c *Column) Decrypt(ct []byte) (string, error) {
	p, err := c.DecryptPayload(ct)
	if err != nil {
		return "", err
	}
	return Decode(c.spec.Type, p)
}

// DecryptPayload is Decrypt without the decoding.
func (c *Column) DecryptPayload(ct []byte) ([]byte, error) {
	x, err := Parse(ct)
	if err != nil {
		return nil, err
	}
	h := x.Header
	switch {
	case h.Type != c.header.Type:
		return nil, fmt.Errorf("colcrypt: column %q: ciphertext of type %s, want %s", c.spec.Label, h.Type, c.header.Type)
	case h.Level != c.header.Level:
		return nil, fmt.Errorf("colcrypt: column %q: ciphertext of level %s, want %s", c.spec.Label, h.Level, c.header.Level)
	case h.KeyID != c.header.KeyID:
		return nil, fmt.Errorf("colcrypt: column %q: ciphertext of key %d, want %d", c.spec.Label, h.KeyID, c.header.KeyID)
	case h.GroupTag != c.header.GroupTag:
		return nil, fmt.Errorf("colcrypt: column %q: ciphertext of another join group", c.spec.Label)
	}
	if x.IsLeftQuery() {
		return nil, fmt.Errorf("colcrypt: column %q: an order query operand has no value to decrypt", c.spec.Label)
	}
	p, err := c.aead.Open(nil, x.Nonce, x.Sealed, c.ad(ct))
	if err != nil {
		return nil, fmt.Errorf("colcrypt: column %q: ciphertext does not authenticate (another column or key, or damaged): %w", c.spec.Label, err)
	}
	return p, nil
}

// EncryptText is Encrypt returning the text form (standard base64).
func (c *Column) EncryptText(plaintext string, rand io.Reader) (string, error) {
	ct, err := c.Encrypt(plaintext, rand)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(ct), nil
}

// DecryptText is Decrypt of the text form.
func (c *Column) DecryptText(s string) (string, error) {
	ct, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("colcrypt: column %q: ciphertext is not base64: %w", c.spec.Label, err)
	}
	return c.Decrypt(ct)
}

// EncryptExtreme returns an order query of the column's own key that
// compares above (high) or below every value of the key: the order input
// all ones (or zeros) and the token likewise.  A tenant-keyed column's
// half-open range c > x is sent as c > x AND c <= the high extreme, so
// that the values of tenants with a higher key id, which the server
// orders after this tenant's, stay out (design 13.13).  Order formats 2
// and 2+1 only: their queries carry no payload.
func (c *Column) EncryptExtreme(high bool) ([]byte, error) {
	if c.spec.Level != ORD || (c.spec.OREFormat != "2+1" && c.spec.OREFormat != "2") {
		return nil, fmt.Errorf("colcrypt: column %q: an extreme bound needs level ORD at order format 2", c.spec.Label)
	}
	fill := byte(0)
	if high {
		fill = 0xff
	}
	left, err := c.ore2.EncryptLeft(bytes.Repeat([]byte{fill}, c.spec.Type.OrderInputSize()))
	if err != nil {
		return nil, fmt.Errorf("colcrypt: column %q: %w", c.spec.Label, err)
	}
	h := c.header
	h.Flags = FlagQuery | h.Flags&FlagTenant
	out := h.Append(make([]byte, 0, HeaderSize+TokenSize+len(left)))
	out = append(out, bytes.Repeat([]byte{fill}, TokenSize)...)
	return append(out, left...), nil
}

// comparable parses two ciphertexts that the server may compare: same
// type, key and group, both with what level need has (EQ: an equality
// token, so EQ, ORD or MATCH; ORD: an ORE part, so ORD; MATCH: a Bloom
// filter, so MATCH).
func comparable(a, b []byte, need Level) (*Ciphertext, *Ciphertext, error) {
	x, err := Parse(a)
	if err != nil {
		return nil, nil, err
	}
	y, err := Parse(b)
	if err != nil {
		return nil, nil, err
	}
	hx, hy := x.Header, y.Header
	switch {
	case hx.Type != hy.Type:
		return nil, nil, fmt.Errorf("colcrypt: comparing %s with %s", hx.Type, hy.Type)
	case hx.IsTenant() != hy.IsTenant() || (hx.KeyID != hy.KeyID && !hx.IsTenant()) || hx.GroupTag != hy.GroupTag:
		return nil, nil, errors.New("colcrypt: comparing values of different keys or join groups")
	case !has(hx.Level, need) || !has(hy.Level, need):
		return nil, nil, fmt.Errorf("colcrypt: comparing %s with %s values needs level %s", hx.Level, hy.Level, need)
	}
	return x, y, nil
}

// has reports whether values of level l support what level need does.
func has(l, need Level) bool {
	switch need {
	case EQ:
		return l.HasToken()
	case MATCH:
		return l == MATCH
	}
	return l == need
}

// Equal is the server's equality: the equality tokens of two EQ, ORD or
// MATCH ciphertexts of one type, key and join group.
func Equal(a, b []byte) (bool, error) {
	x, y, err := comparable(a, b, EQ)
	if err != nil {
		return false, err
	}
	// two tenants' values are never equal (design 13.13)
	return x.Header.KeyID == y.Header.KeyID && bytes.Equal(x.Token, y.Token), nil
}

// Compare is the server's order on ORD ciphertexts of one type, key and
// join group: the ORE comparison, then, where the ORE parts are equal, the
// byte order of the equality tokens.
func Compare(a, b []byte) (int, error) {
	x, y, err := comparable(a, b, ORD)
	if err != nil {
		return 0, err
	}
	// two tenants' values order by key id (design 13.13)
	if x.Header.KeyID != y.Header.KeyID {
		return cmp.Compare(x.Header.KeyID, y.Header.KeyID), nil
	}
	var r int
	switch {
	case x.Header.Version == Version2 && y.Header.Version == Version2:
		switch {
		case x.IsLeftQuery() && y.IsLeftQuery():
			return 0, errors.New("colcrypt: cannot compare two order query operands")
		case y.IsLeftQuery():
			r, err = ore.Compare2(y.ORE, x.ORE)
			r = -r
		default:
			r, err = ore.Compare2(x.ORE, y.ORE)
		}
	case x.ORE1 != nil && y.ORE1 != nil:
		r, err = ore.Compare(x.ORE1, y.ORE1)
	default:
		return 0, errors.New("colcrypt: cannot compare values of order formats 1 and 2")
	}
	if err != nil {
		return 0, fmt.Errorf("colcrypt: %w", err)
	}
	if r != 0 {
		return r, nil
	}
	return bytes.Compare(x.Token, y.Token), nil
}

// Ciphertext format version 1 (design 13.3): the header, the type and level
// codes, and parsing and validation of a whole ciphertext as the server
// does it.

package colcrypt

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/pgcipher/pgcipher/proxy/ore"
)

// Version is the ciphertext format version of every level; Version2 is
// level ORD's second (design 13.5b): its ORE is built on AES, a query
// operand may carry the left part alone, and a value of a column being
// moved may carry version 1's ORE part as well.
const (
	Version  = 1
	Version2 = 2
)

// Field sizes of design 13.3.
const (
	HeaderSize = 12
	TokenSize  = 16
	NonceSize  = 12
	TagSize    = 16
	BloomSize  = 32 // MATCH: the 256-bit Bloom filter of trigrams (13.5a)
)

// Flags (header byte 3).  FlagQuery: the ciphertext is a query, not a
// value: at level MATCH a LIKE pattern, at ORD (version 2) a left-only ORE
// operand with no payload.  FlagORE1 (version 2): version 1's ORE part
// follows version 2's.  FlagFolded (version 1, MATCH, with or without
// FlagQuery): the Bloom filter is of the case-folded text, for a column
// bound case-insensitive (design 13.5a).
const (
	FlagQuery  = 0x01
	FlagORE1   = 0x02
	FlagFolded = 0x04
	// FlagTenant (versions 1 and 2, with any other): the key id is a
	// tenant key's (design 13.13)
	FlagTenant = 0x08
)

// Type is the plaintext type of an encrypted column.
type Type uint8

// Type codes, byte 1 of the header.
const (
	Int4        Type = 1
	Int8        Type = 2
	Float8      Type = 3
	Numeric     Type = 4
	Text        Type = 5
	Bytea       Type = 6
	Date        Type = 7
	Timestamptz Type = 8
	Bool        Type = 9
)

var typeNames = [...]string{
	Int4: "int4", Int8: "int8", Float8: "float8", Numeric: "numeric",
	Text: "text", Bytea: "bytea", Date: "date", Timestamptz: "timestamptz",
	Bool: "bool",
}

// Types lists every type in code order.
var Types = []Type{Int4, Int8, Float8, Numeric, Text, Bytea, Date, Timestamptz, Bool}

// Valid reports whether t is a known type code.
func (t Type) Valid() bool { return t >= Int4 && t <= Bool }

// String returns PostgreSQL's name of the plain type ("int4").
func (t Type) String() string {
	if t.Valid() {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// ParseType parses a type name as String writes it (case-insensitive).
func ParseType(s string) (Type, error) {
	for _, t := range Types {
		if strings.EqualFold(s, typeNames[t]) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("colcrypt: unknown type %q", s)
}

// PayloadSize is the plaintext size of a fixed-size type, 0 for the
// variable-size ones (numeric, text, bytea).
func (t Type) PayloadSize() int {
	switch t {
	case Int4, Date:
		return 4
	case Int8, Timestamptz, Float8:
		return 8
	case Bool:
		return 1
	}
	return 0
}

// OrderInputSize is the length of the ORE order input of the type.
func (t Type) OrderInputSize() int {
	if n := t.PayloadSize(); n > 0 {
		return n
	}
	return 16
}

// Level is what the server can compute on a column's values.
type Level uint8

// Level codes, byte 2 of the header.
const (
	RND   Level = 1 // randomized: nothing
	EQ    Level = 2 // equality token
	ORD   Level = 3 // equality token and ORE
	MATCH Level = 4 // text only: equality token and Bloom filter of trigrams
)

var levelNames = [...]string{RND: "RND", EQ: "EQ", ORD: "ORD", MATCH: "MATCH"}

// Levels lists every level in code order.  MATCH exists for text only
// (see Type.HasLevel).
var Levels = []Level{RND, EQ, ORD, MATCH}

// Valid reports whether l is a known level code.
func (l Level) Valid() bool { return l >= RND && l <= MATCH }

// HasToken reports whether values of the level carry an equality token
// (EQ, ORD, MATCH).
func (l Level) HasToken() bool { return l == EQ || l == ORD || l == MATCH }

// HasLevel reports whether a column of type t may have level l: every
// known level for every known type, except MATCH, which is text only.
func (t Type) HasLevel(l Level) bool {
	return t.Valid() && l.Valid() && (l != MATCH || t == Text)
}

// String returns "RND", "EQ", "ORD" or "MATCH".
func (l Level) String() string {
	if l.Valid() {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// ParseLevel parses a level name (case-insensitive).
func ParseLevel(s string) (Level, error) {
	for _, l := range Levels {
		if strings.EqualFold(s, levelNames[l]) {
			return l, nil
		}
	}
	return 0, fmt.Errorf("colcrypt: unknown level %q", s)
}

// Header is bytes 0–11 of a ciphertext.
type Header struct {
	Version  uint8
	Type     Type
	Level    Level
	Flags    uint8
	KeyID    uint32
	GroupTag [4]byte
}

// Identity is what names a column's values in h: type, level, key and
// join group, without the version and flags, which differ between the
// values of one column (order formats, queries).  A tenant-keyed value's
// identity is its column's, whatever the tenant: key id 0 and FlagTenant.
func (h Header) Identity() Header {
	if h.Flags&FlagTenant != 0 {
		h.Version, h.Flags, h.KeyID = 0, FlagTenant, 0
		return h
	}
	h.Version, h.Flags = 0, 0
	return h
}

// IsTenant reports whether the key id is a tenant key's (FlagTenant).
func (h Header) IsTenant() bool { return h.Flags&FlagTenant != 0 }

// Append appends the 12-byte encoding of h to b.
func (h Header) Append(b []byte) []byte {
	b = append(b, h.Version, byte(h.Type), byte(h.Level), h.Flags)
	b = binary.BigEndian.AppendUint32(b, h.KeyID)
	return append(b, h.GroupTag[:]...)
}

// Ciphertext is a parsed ciphertext; its slices alias the parsed bytes.
type Ciphertext struct {
	Header Header
	Token  []byte // EQ, ORD and MATCH: 16 bytes; RND: nil
	ORE    []byte // ORD: the ORE part of the header's version (version 2 query: left part only); else nil
	ORE1   []byte // ORD: version 1's ORE part (version 1, or version 2 with FlagORE1); else nil
	Bloom  []byte // MATCH: BloomSize bytes; else nil
	Nonce  []byte // 12 bytes
	Sealed []byte // GCM ciphertext of the payload followed by the tag
}

// IsQuery reports whether the ciphertext is a MATCH query (FlagQuery).
func (c *Ciphertext) IsQuery() bool { return c.Header.Flags&FlagQuery != 0 }

// IsFolded reports whether a MATCH ciphertext's Bloom filter is of the
// case-folded text (FlagFolded).
func (c *Ciphertext) IsFolded() bool { return c.Header.Flags&FlagFolded != 0 }

// PayloadLen is the length m of the encrypted plaintext.
func (c *Ciphertext) PayloadLen() int { return len(c.Sealed) - TagSize }

// Size returns the length of a ciphertext of the given type and level
// whose payload is m bytes (a MATCH query has the size of a value whose
// payload is the pattern).
func Size(t Type, l Level, m int) int {
	n := HeaderSize + NonceSize + m + TagSize
	if l.HasToken() {
		n += TokenSize
	}
	if l == ORD {
		n += ore.Size(t.OrderInputSize())
	}
	if l == MATCH {
		n += BloomSize
	}
	return n
}

// Parse splits ct into its parts and checks everything the server checks:
// version, type, level (MATCH only for text), flags (FlagQuery and
// FlagFolded only with MATCH, FlagQuery and FlagORE1 only with version
// 2), the lengths of the token, ORE and Bloom parts and,
// for fixed-size types, the exact payload length.  It does not decrypt.
func Parse(ct []byte) (*Ciphertext, error) {
	if len(ct) < HeaderSize {
		return nil, fmt.Errorf("colcrypt: malformed ciphertext: %d bytes, shorter than the header", len(ct))
	}
	h := Header{
		Version: ct[0],
		Type:    Type(ct[1]),
		Level:   Level(ct[2]),
		Flags:   ct[3],
		KeyID:   binary.BigEndian.Uint32(ct[4:8]),
	}
	copy(h.GroupTag[:], ct[8:12])
	f := h.Flags &^ FlagTenant // the tenant flag goes with any other
	switch {
	case h.Version != Version && h.Version != Version2:
		return nil, fmt.Errorf("colcrypt: malformed ciphertext: version %d, want %d or %d", h.Version, Version, Version2)
	case h.Version == Version2 && h.Level != ORD:
		return nil, fmt.Errorf("colcrypt: malformed ciphertext: version 2 at level %s", h.Level)
	case !h.Type.Valid():
		return nil, fmt.Errorf("colcrypt: malformed ciphertext: unknown type %d", ct[1])
	case !h.Level.Valid():
		return nil, fmt.Errorf("colcrypt: malformed ciphertext: unknown level %d", ct[2])
	case !h.Type.HasLevel(h.Level):
		return nil, fmt.Errorf("colcrypt: malformed ciphertext: level %s for type %s", h.Level, h.Type)
	case h.Version == Version && f != 0 && !(f&^(FlagQuery|FlagFolded) == 0 && h.Level == MATCH),
		h.Version == Version2 && f != 0 && f != FlagQuery && f != FlagORE1:
		return nil, fmt.Errorf("colcrypt: malformed ciphertext: flags %#x at level %s", h.Flags, h.Level)
	}
	if h.Version == Version2 && f == FlagQuery {
		return parseLeftQuery(ct, h)
	}
	c := &Ciphertext{Header: h}
	rest := ct[HeaderSize:]
	take := func(n int) []byte {
		b := rest[:n:n]
		rest = rest[n:]
		return b
	}
	minRest := NonceSize + TagSize
	if h.Level.HasToken() {
		minRest += TokenSize
	}
	if h.Level == MATCH {
		minRest += BloomSize
	}
	oreLen := 0
	if h.Level == ORD {
		oreLen = ore.Size(h.Type.OrderInputSize())
		minRest += oreLen
		if f == FlagORE1 {
			minRest += oreLen
		}
	}
	if len(rest) < minRest {
		return nil, fmt.Errorf("colcrypt: malformed ciphertext: %d bytes, too short for %s %s", len(ct), h.Type, h.Level)
	}
	if h.Level.HasToken() {
		c.Token = take(TokenSize)
	}
	if h.Level == ORD {
		c.ORE = take(oreLen)
		switch {
		case h.Version == Version:
			c.ORE1 = c.ORE
		case f == FlagORE1:
			c.ORE1 = take(oreLen)
		}
	}
	if h.Level == MATCH {
		c.Bloom = take(BloomSize)
	}
	c.Nonce = take(NonceSize)
	c.Sealed = rest
	if m := h.Type.PayloadSize(); m > 0 && c.PayloadLen() != m {
		return nil, fmt.Errorf("colcrypt: malformed ciphertext: %s payload of %d bytes, want %d", h.Type, c.PayloadLen(), m)
	}
	return c, nil
}

// parseLeftQuery parses a version-2 ORD query: the header, the token and
// the left part of the ORE, nothing else.
func parseLeftQuery(ct []byte, h Header) (*Ciphertext, error) {
	left := ore.LeftSize2(h.Type.OrderInputSize())
	if len(ct) != HeaderSize+TokenSize+left {
		return nil, fmt.Errorf("colcrypt: malformed ciphertext: %d bytes, want %d for a %s order query", len(ct), HeaderSize+TokenSize+left, h.Type)
	}
	return &Ciphertext{Header: h, Token: ct[HeaderSize : HeaderSize+TokenSize : HeaderSize+TokenSize],
		ORE: ct[HeaderSize+TokenSize:]}, nil
}

// IsLeftQuery reports whether the ciphertext is a version-2 order query.
func (c *Ciphertext) IsLeftQuery() bool {
	return c.Header.Version == Version2 && c.Header.Flags&^FlagTenant == FlagQuery
}

// TTLV: KMIP's tag-type-length-value encoding (KMIP 1.4, section 9.1),
// just what the client in kmip.go sends and reads.

package kms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ttlvType is the type byte of a TTLV item.
type ttlvType byte

const (
	ttlvStructure ttlvType = 0x01
	ttlvInteger   ttlvType = 0x02
	ttlvLong      ttlvType = 0x03
	ttlvBigInt    ttlvType = 0x04
	ttlvEnum      ttlvType = 0x05
	ttlvBool      ttlvType = 0x06
	ttlvText      ttlvType = 0x07
	ttlvBytes     ttlvType = 0x08
	ttlvDateTime  ttlvType = 0x09
	ttlvInterval  ttlvType = 0x0a
)

// KMIP tags (KMIP 1.4, section 9.1.3.1).
const (
	tagAttribute          = 0x420008
	tagAttributeName      = 0x42000a
	tagAttributeValue     = 0x42000b
	tagBatchCount         = 0x42000d
	tagBatchItem          = 0x42000f
	tagBlockCipherMode    = 0x420011
	tagCryptoAlgorithm    = 0x420028
	tagCryptoLength       = 0x42002a
	tagCryptoParameters   = 0x42002b
	tagCryptoUsageMask    = 0x42002c
	tagIVCounterNonce     = 0x42003d
	tagObjectType         = 0x420057
	tagOperation          = 0x42005c
	tagProtocolVersion    = 0x420069
	tagProtocolMajor      = 0x42006a
	tagProtocolMinor      = 0x42006b
	tagRequestHeader      = 0x420077
	tagRequestMessage     = 0x420078
	tagRequestPayload     = 0x420079
	tagResponseMessage    = 0x42007b
	tagResponsePayload    = 0x42007c
	tagResultMessage      = 0x42007d
	tagResultReason       = 0x42007e
	tagResultStatus       = 0x42007f
	tagTemplateAttribute  = 0x420091
	tagUniqueIdentifier   = 0x420094
	tagData               = 0x4200c2
	tagTagLength          = 0x4200ce
	tagAuthAdditionalData = 0x4200fe
	tagAuthTag            = 0x4200ff
)

// maxMessage bounds a KMIP response: the answers read here are a few
// hundred bytes.
const maxMessage = 1 << 20

// ttlv is one item: a primitive value (val, its encoded bytes without
// padding) or a structure (kids).
type ttlv struct {
	tag  uint32
	typ  ttlvType
	val  []byte
	kids []ttlv
}

func tStruct(tag uint32, kids ...ttlv) ttlv { return ttlv{tag: tag, typ: ttlvStructure, kids: kids} }

func tEnum(tag, v uint32) ttlv {
	return ttlv{tag: tag, typ: ttlvEnum, val: binary.BigEndian.AppendUint32(nil, v)}
}

func tInt(tag uint32, v int32) ttlv {
	return ttlv{tag: tag, typ: ttlvInteger, val: binary.BigEndian.AppendUint32(nil, uint32(v))}
}

func tText(tag uint32, s string) ttlv { return ttlv{tag: tag, typ: ttlvText, val: []byte(s)} }

func tBytes(tag uint32, b []byte) ttlv { return ttlv{tag: tag, typ: ttlvBytes, val: b} }

// tAttr is a KMIP 1.x Attribute: a name and a value.
func tAttr(name string, v ttlv) ttlv {
	v.tag = tagAttributeValue
	return tStruct(tagAttribute, tText(tagAttributeName, name), v)
}

// encode appends t's encoding to b.
func (t ttlv) encode(b []byte) []byte {
	b = append(b, byte(t.tag>>16), byte(t.tag>>8), byte(t.tag), byte(t.typ))
	if t.typ == ttlvStructure {
		lenAt := len(b)
		b = append(b, 0, 0, 0, 0)
		for _, k := range t.kids {
			b = k.encode(b)
		}
		binary.BigEndian.PutUint32(b[lenAt:], uint32(len(b)-lenAt-4))
		return b
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(t.val)))
	b = append(b, t.val...)
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

var errTTLV = errors.New("malformed KMIP message")

// decodeTTLV reads one item from b and returns it and the rest of b.
// The values of the result alias b.
func decodeTTLV(b []byte, depth int) (ttlv, []byte, error) {
	if depth > 16 {
		return ttlv{}, nil, fmt.Errorf("%w: nested too deep", errTTLV)
	}
	if len(b) < 8 {
		return ttlv{}, nil, fmt.Errorf("%w: truncated", errTTLV)
	}
	t := ttlv{tag: uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]), typ: ttlvType(b[3])}
	n32 := binary.BigEndian.Uint32(b[4:8])
	b = b[8:]
	// checked in 64 bits: n + 7 would overflow a 32-bit int
	if (uint64(n32)+7)&^7 > uint64(len(b)) {
		return ttlv{}, nil, fmt.Errorf("%w: item %06x longer than its message", errTTLV, t.tag)
	}
	n := int(n32)
	padded := (n + 7) &^ 7
	body, rest := b[:n], b[padded:]
	if t.typ == ttlvStructure {
		if n != padded {
			return ttlv{}, nil, fmt.Errorf("%w: structure %06x of %d bytes", errTTLV, t.tag, n)
		}
		for len(body) > 0 {
			k, more, err := decodeTTLV(body, depth+1)
			if err != nil {
				return ttlv{}, nil, err
			}
			t.kids = append(t.kids, k)
			body = more
		}
		return t, rest, nil
	}
	t.val = body
	return t, rest, nil
}

// child is t's first child with tag.
func (t ttlv) child(tag uint32) (ttlv, bool) {
	for _, k := range t.kids {
		if k.tag == tag {
			return k, true
		}
	}
	return ttlv{}, false
}

// path follows tags down from t.
func (t ttlv) path(tags ...uint32) (ttlv, bool) {
	for _, tag := range tags {
		var ok bool
		if t, ok = t.child(tag); !ok {
			return ttlv{}, false
		}
	}
	return t, true
}

// enum is t's value as an Enumeration or Integer.
func (t ttlv) enum() (uint32, bool) {
	if (t.typ != ttlvEnum && t.typ != ttlvInteger) || len(t.val) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(t.val), true
}

// readMessage reads one TTLV message from r.
func readMessage(r io.Reader) (ttlv, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return ttlv{}, err
	}
	n := binary.BigEndian.Uint32(hdr[4:])
	if ttlvType(hdr[3]) != ttlvStructure || n > maxMessage || n%8 != 0 {
		return ttlv{}, fmt.Errorf("%w: the answer does not start with a KMIP message", errTTLV)
	}
	msg := make([]byte, 8+n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[8:]); err != nil {
		return ttlv{}, err
	}
	t, rest, err := decodeTTLV(msg, 0)
	if err != nil {
		return ttlv{}, err
	}
	if len(rest) != 0 {
		return ttlv{}, fmt.Errorf("%w: trailing bytes", errTTLV)
	}
	return t, nil
}

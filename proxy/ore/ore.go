package ore

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
)

const (
	blockValues = 16 // d: 4-bit blocks
	keyLen      = 16 // bytes of F's output kept
	nonceLen    = 16 // r
	// MaxInput is the longest order input: block indices are single bytes.
	MaxInput = 127
)

// Key holds the two HMAC keys.  It is immutable and safe for concurrent use.
type Key struct {
	prf  []byte
	perm []byte
}

// NewKey returns a key from the PRF key (F) and the permutation key (π),
// 32 bytes each (the HKDF sub-keys ore-prf and ore-perm of design 13.6).
func NewKey(prfKey, permKey []byte) (*Key, error) {
	if len(prfKey) != 32 || len(permKey) != 32 {
		return nil, fmt.Errorf("ore: keys must be 32 bytes, got %d and %d", len(prfKey), len(permKey))
	}
	return &Key{prf: bytes.Clone(prfKey), perm: bytes.Clone(permKey)}, nil
}

// Size is the length of the ciphertext of an inputLen-byte order input:
// 20.5·n + 16 bytes for n = 2·inputLen blocks.
func Size(inputLen int) int {
	return 41*inputLen + 16
}

// blocksOf returns n for a ciphertext of size bytes, or 0 if no n fits.
func blocksOf(size int) int {
	if size <= 16 || (size-16)%41 != 0 || (size-16)/41 > MaxInput {
		return 0
	}
	return 2 * ((size - 16) / 41)
}

// encrypter carries the per-call HMAC states and scratch buffers so that
// the per-block work allocates nothing.
type encrypter struct {
	prf, perm hash.Hash
	msg       []byte // 0x01|0x02 ‖ i ‖ prefix ‖ j|c
	sum       [sha256.Size]byte
	prefix    []byte // the earlier nibbles of the input, one byte each
}

// f computes F(i, prefix, j) into out (16 bytes).
func (e *encrypter) f(i int, j byte, out []byte) {
	e.msg = append(e.msg[:0], 0x01, byte(i))
	e.msg = append(e.msg, e.prefix...)
	e.msg = append(e.msg, j)
	e.prf.Reset()
	e.prf.Write(e.msg)
	copy(out, e.prf.Sum(e.sum[:0])[:keyLen])
}

// block brings the prefix up to block i of input and returns π_{i,prefix}:
// Fisher–Yates (fisherYates) over the stream HMAC(k_perm, 0x02 ‖ i ‖
// prefix ‖ c), c = 0, 1, ….
func (e *encrypter) block(input []byte, i int) ([blockValues]byte, error) {
	for len(e.prefix) < i {
		e.prefix = append(e.prefix, nibble(input, len(e.prefix)))
	}
	var c byte
	return fisherYates(func() ([]byte, error) {
		e.msg = append(e.msg[:0], 0x02, byte(i))
		e.msg = append(e.msg, e.prefix...)
		e.msg = append(e.msg, c)
		c++
		e.perm.Reset()
		e.perm.Write(e.msg)
		return e.perm.Sum(e.sum[:0]), nil
	})
}

// hash is H of version 1 (h).
func (e *encrypter) hash(k, r []byte) (byte, error) { return h(k, r), nil }

// fisherYates returns a permutation π of 0…15: start from the identity
// array a and, for m from 15 down to 1, swap a[m] with a uniform draw in
// 0…m taken from the bytes more returns, one chunk after another, a byte
// rejected when ≥ 256 − 256 mod (m+1) and otherwise giving byte mod
// (m+1); π(v) = a[v].  Both versions draw so; they differ in the stream.
func fisherYates(more func() ([]byte, error)) (pi [blockValues]byte, err error) {
	for v := range pi {
		pi[v] = byte(v)
	}
	var stream []byte
	for m := blockValues - 1; m >= 1; m-- {
		limit := 256 - 256%(m+1)
		for {
			if len(stream) == 0 {
				if stream, err = more(); err != nil {
					return pi, err
				}
			}
			b := int(stream[0])
			stream = stream[1:]
			if b < limit {
				j := b % (m + 1)
				pi[m], pi[j] = pi[j], pi[m]
				break
			}
		}
	}
	return pi, nil
}

// blockScheme is what a version computes for one block of an order input:
// block(input, i) prepares block i (its prefix x<i) and returns π_{i,x<i};
// f(i, j, out) writes F(i, x<i, j); hash(k, r) is H.  The block loop
// (encryptBlocks) and the comparison (compareBlocks) are shared.
type blockScheme interface {
	block(input []byte, i int) ([blockValues]byte, error)
	f(i int, j byte, out []byte)
	hash(k, r []byte) (byte, error)
}

// encryptBlocks writes the left part of input into out, in the layout of
// design 13.5 (n keys k′ᵢ = F(i, x<i, x̃ᵢ), then the n nibbles x̃ᵢ = π(xᵢ)
// packed two per byte) and, when r is not nil, the right part after r:
// per block the 16 entries zᵢⱼ = (cmp(π⁻¹(j), xᵢ) + H(F(i, x<i, j), r))
// mod 3, entry j in byte 4i + j/4 at bits 2(j mod 4).
func encryptBlocks(s blockScheme, input, out, r []byte) error {
	n := 2 * len(input)
	keys := out[:keyLen*n]
	nibbles := out[keyLen*n : keyLen*n+n/2]
	var z []byte
	if r != nil {
		z = out[keyLen*n+n/2+nonceLen:]
	}
	var fj [keyLen]byte
	for i := range n {
		x := nibble(input, i)
		pi, err := s.block(input, i)
		if err != nil {
			return err
		}
		xt := pi[x]
		s.f(i, xt, keys[keyLen*i:keyLen*(i+1)])
		if i%2 == 0 {
			nibbles[i/2] |= xt << 4
		} else {
			nibbles[i/2] |= xt
		}
		if r == nil {
			continue
		}
		var inv [blockValues]byte
		for v, p := range pi {
			inv[p] = byte(v)
		}
		for j := range blockValues {
			s.f(i, byte(j), fj[:])
			hv, err := s.hash(fj[:], r)
			if err != nil {
				return err
			}
			z[4*i+j/4] |= (cmp(inv[j], x) + hv) % 3 << (2 * (j % 4))
		}
	}
	return nil
}

// h is H(k, r): the first 8 bytes of SHA-256(k ‖ r), big-endian, mod 3.
func h(k, r []byte) byte {
	var buf [keyLen + nonceLen]byte
	copy(buf[:keyLen], k)
	copy(buf[keyLen:], r)
	sum := sha256.Sum256(buf[:])
	return byte(binary.BigEndian.Uint64(sum[:8]) % 3)
}

// cmp is the paper's comparison encoded mod 3: 0 equal, 1 greater, 2 less.
func cmp(a, b byte) byte {
	switch {
	case a == b:
		return 0
	case a > b:
		return 1
	default:
		return 2
	}
}

// Encrypt returns the left and right ciphertexts of input (n = 2·len(input)
// blocks, high nibble first) in the layout of design 13.5: n keys k′, the n
// permuted nibbles packed two per byte, r, then n × 4 bytes of z.  The 16
// bytes of r are read from rand.
func (k *Key) Encrypt(input []byte, rand io.Reader) ([]byte, error) {
	if len(input) == 0 || len(input) > MaxInput {
		return nil, fmt.Errorf("ore: input must be 1 to %d bytes, got %d", MaxInput, len(input))
	}
	n := 2 * len(input)
	out := make([]byte, Size(len(input)))
	r := out[keyLen*n+n/2 : keyLen*n+n/2+nonceLen]
	if _, err := io.ReadFull(rand, r); err != nil {
		return nil, fmt.Errorf("ore: reading randomness: %w", err)
	}

	e := &encrypter{
		prf:    hmac.New(sha256.New, k.prf),
		perm:   hmac.New(sha256.New, k.perm),
		msg:    make([]byte, 0, 3+n),
		prefix: make([]byte, 0, n),
	}
	if err := encryptBlocks(e, input, out, r); err != nil {
		return nil, err
	}
	return out, nil
}

// ErrCorrupt reports a comparison that found the impossible value 0 (or a
// z entry of 3, which is no residue mod 3) in the right ciphertext: at least one of the two ciphertexts is damaged or
// they were made under different keys.
var ErrCorrupt = errors.New("ore: corrupted ciphertext (comparison value 0)")

// Compare compares two ORE ciphertexts the way the server does: find the
// first block whose (k′, x̃) differs; none means the ORE parts are equal
// (0); otherwise v = z_b[i][x̃_a,i] − H(k′_a,i, r_b) mod 3 gives +1 (a > b)
// or −1 (a < b).  It does one SHA-256 and allocates nothing.
func Compare(a, b []byte) (int, error) {
	if len(a) != len(b) {
		return 0, fmt.Errorf("ore: ciphertext lengths differ (%d and %d)", len(a), len(b))
	}
	n := blocksOf(len(a))
	if n == 0 {
		return 0, fmt.Errorf("ore: bad ciphertext length %d", len(a))
	}
	return compareBlocks(a, b, n, (*encrypter)(nil).hash)
}

// compareBlocks is the comparison of both versions, on the layout they
// share (n blocks): the first block whose (k′, x̃) differs, then
// v = z_b[i][x̃_a,i] − H(k′_a,i, r_b) mod 3 with the version's H.  a may be
// a left part alone.
func compareBlocks(a, b []byte, n int, hash func(k, r []byte) (byte, error)) (int, error) {
	nibOff := keyLen * n
	rOff := nibOff + n/2
	zOff := rOff + nonceLen
	for i := range n {
		xa, xb := nibble(a[nibOff:], i), nibble(b[nibOff:], i)
		ka := a[keyLen*i : keyLen*(i+1)]
		if xa == xb && bytes.Equal(ka, b[keyLen*i:keyLen*(i+1)]) {
			continue
		}
		zb := (b[zOff+4*i+int(xa)/4] >> (2 * (xa % 4))) & 3
		if zb == 3 { // entries are residues mod 3
			return 0, ErrCorrupt
		}
		hv, err := hash(ka, b[rOff:rOff+nonceLen])
		if err != nil {
			return 0, err
		}
		switch (zb + 3 - hv) % 3 {
		case 1:
			return 1, nil
		case 2:
			return -1, nil
		default:
			return 0, ErrCorrupt
		}
	}
	return 0, nil
}

// nibble returns block i of the packed x̃ nibbles.
func nibble(packed []byte, i int) byte {
	if i%2 == 0 {
		return packed[i/2] >> 4
	}
	return packed[i/2] & 0x0f
}

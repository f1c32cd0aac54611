// Lewi–Wu block ORE, version 2 (design 13.5b): AES as the PRF, the
// permutation's draws and the hash, and left-only ciphertexts for query
// parameters.  4-bit blocks and version 1's layout.

package ore

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"io"
)

const (
	// MaxInput2 is the longest order input of version 2: a block's prefix
	// and value, one nibble each, fill at most one AES block.
	MaxInput2  = 16
	maxBlocks2 = 2 * MaxInput2
)

// Size2 is the length of a version-2 ciphertext: the layout of version 1
// (Size), only the functions differ.
func Size2(inputLen int) int { return Size(inputLen) }

// LeftSize2 is the length of a version-2 left-only ciphertext (a query
// parameter): the n keys and the n packed nibbles, 16.5·n bytes for
// n = 2·inputLen blocks.
func LeftSize2(inputLen int) int { return 2*inputLen*keyLen + inputLen }

// Key2 holds the per-block AES keys of version 2.  It is immutable and safe
// for concurrent use.
type Key2 struct {
	prf  [maxBlocks2]cipher.Block // F: K_i
	perm [maxBlocks2]cipher.Block // π's draws: K′_i
}

// NewKey2 returns a version-2 key from the PRF key and the permutation
// key, 32 bytes each (the HKDF sub-keys ore2-prf and ore2-perm of design
// 13.6).  Each block index i gets its own AES-256 keys,
// K_i = AES_prf(i ‖ 0 ‖ 0¹⁴) ‖ AES_prf(i ‖ 1 ‖ 0¹⁴) and K′_i the same
// under the permutation key, so that every AES input below has a fixed
// layout per key.
func NewKey2(prfKey, permKey []byte) (*Key2, error) {
	if len(prfKey) != 32 || len(permKey) != 32 {
		return nil, fmt.Errorf("ore: keys must be 32 bytes, got %d and %d", len(prfKey), len(permKey))
	}
	k := &Key2{}
	for _, m := range []struct {
		master []byte
		out    *[maxBlocks2]cipher.Block
	}{{prfKey, &k.prf}, {permKey, &k.perm}} {
		b, err := aes.NewCipher(m.master)
		if err != nil {
			return nil, fmt.Errorf("ore: %w", err)
		}
		for i := range maxBlocks2 {
			var in [aes.BlockSize]byte
			var sub [32]byte
			in[0] = byte(i)
			b.Encrypt(sub[:16], in[:])
			in[1] = 1
			b.Encrypt(sub[16:], in[:])
			if m.out[i], err = aes.NewCipher(sub[:]); err != nil {
				return nil, fmt.Errorf("ore: %w", err)
			}
		}
	}
	return k, nil
}

// prefixBlock returns the AES input holding the first i nibbles of the
// input (the prefix x<i), packed high nibble first; the rest is zero.
func prefixBlock(input []byte, i int) (b [aes.BlockSize]byte) {
	copy(b[:], input[:i/2])
	if i%2 == 1 {
		b[i/2] = input[i/2] & 0xf0
	}
	return b
}

// setNibble sets nibble position pos (0–31, high first) of b to v.
func setNibble(b *[aes.BlockSize]byte, pos int, v byte) {
	if pos%2 == 0 {
		b[pos/2] = b[pos/2]&0x0f | v<<4
	} else {
		b[pos/2] = b[pos/2]&0xf0 | v&0x0f
	}
}

// encrypter2 is version 2's blockScheme for one encryption; its AES
// inputs and outputs live in it because a block passed to cipher.Block
// escapes: allocated once per call, not per block.
type encrypter2 struct {
	k                     *Key2
	prefix, in, stream, h [aes.BlockSize]byte
}

// block sets the prefix to the first i nibbles of input and returns
// π_{i,x<i}: Fisher–Yates (fisherYates) over the bytes of
// AES_{K′_i}(x<i ‖ 0… ‖ c), c = 0, 1, … in the last nibble.
func (e *encrypter2) block(input []byte, i int) ([blockValues]byte, error) {
	e.prefix = prefixBlock(input, i)
	c := byte(0)
	return fisherYates(func() ([]byte, error) {
		if c == 16 {
			return nil, fmt.Errorf("ore: permutation draws exhausted")
		}
		e.in = e.prefix
		setNibble(&e.in, 2*aes.BlockSize-1, c)
		c++
		e.k.perm[i].Encrypt(e.stream[:], e.in[:])
		return e.stream[:], nil
	})
}

// f computes F(i, x<i, j) = AES_{K_i}(x<i ‖ j ‖ 0…) into out: the prefix's
// i nibbles, then j at nibble position i.
func (e *encrypter2) f(i int, j byte, out []byte) {
	e.in = e.prefix
	setNibble(&e.in, i, j)
	e.k.prf[i].Encrypt(out, e.in[:])
}

// hash is H(k, r) (h2) with the encryption's own scratch block.
func (e *encrypter2) hash(k, r []byte) (byte, error) { return h2(k, r, e.h[:]) }

// h2 is H(k, r): the first 8 bytes of AES-128_k(r), big-endian, mod 3;
// out is scratch space of one AES block.
func h2(k, r, out []byte) (byte, error) {
	c, err := aes.NewCipher(k)
	if err != nil {
		return 0, fmt.Errorf("ore: %w", err)
	}
	c.Encrypt(out, r)
	return byte(binary.BigEndian.Uint64(out[:8]) % 3), nil
}

func checkInput2(input []byte) error {
	if len(input) == 0 || len(input) > MaxInput2 {
		return fmt.Errorf("ore: input must be 1 to %d bytes, got %d", MaxInput2, len(input))
	}
	return nil
}

// EncryptLeft returns the left-only ciphertext of input: what a query
// parameter needs to be compared with stored values, and nothing that can
// be compared with another left-only ciphertext.
func (k *Key2) EncryptLeft(input []byte) ([]byte, error) {
	if err := checkInput2(input); err != nil {
		return nil, err
	}
	out := make([]byte, LeftSize2(len(input)))
	if err := encryptBlocks(&encrypter2{k: k}, input, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// Encrypt returns the left and right parts of input in version 1's layout
// (Key.Encrypt): n keys k′ᵢ = F(i, x<i, x̃ᵢ), the n nibbles x̃ᵢ = π(xᵢ), a
// random 16-byte r read from rand, then per block the 16 entries
// zᵢⱼ = (cmp(π⁻¹(j), xᵢ) + H(F(i, x<i, j), r)) mod 3.
func (k *Key2) Encrypt(input []byte, rand io.Reader) ([]byte, error) {
	if err := checkInput2(input); err != nil {
		return nil, err
	}
	n := 2 * len(input)
	out := make([]byte, Size2(len(input)))
	r := out[keyLen*n+n/2 : keyLen*n+n/2+nonceLen]
	if _, err := io.ReadFull(rand, r); err != nil {
		return nil, fmt.Errorf("ore: reading randomness: %w", err)
	}
	if err := encryptBlocks(&encrypter2{k: k}, input, out, r); err != nil {
		return nil, err
	}
	return out, nil
}

// Compare2 compares a (full or left-only) with b (full) the way the server
// does: the first block whose (k′, x̃) differs is the first differing
// block; none means equal order inputs; otherwise
// v = z_b[i][x̃_a,i] − H(k′_a,i, r_b) mod 3 gives +1 (a > b) or −1 (a < b).
// One AES key schedule and one AES block per comparison.
func Compare2(a, b []byte) (int, error) {
	n := blocksOf(len(b))
	if n == 0 {
		return 0, fmt.Errorf("ore: bad right ciphertext length %d", len(b))
	}
	if len(a) != len(b) && len(a) != LeftSize2(n/2) {
		return 0, fmt.Errorf("ore: ciphertext lengths do not match (%d and %d)", len(a), len(b))
	}
	var out [aes.BlockSize]byte
	return compareBlocks(a, b, n, func(k, r []byte) (byte, error) { return h2(k, r, out[:]) })
}

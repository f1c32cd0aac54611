// Keys (design 13.6): the column master key from a file or a command,
// wrapping and unwrapping of column encryption keys under it with
// AES-256-GCM, and the HKDF sub-keys of a CEK.

package colcrypt

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Key sizes.
const (
	CMKSize        = 32
	CEKSize        = 32
	WrappedCEKSize = 1 + NonceSize + CEKSize + TagSize // 61
	wrapVersion    = 1
)

// CMKCommandTimeout is how long a CMK command may run, as the TDE key
// command's default timeout.
const CMKCommandTimeout = 30 * time.Second

// maxCMKOutput bounds what a CMK file or command may hold, as for the TDE
// key command: 64 hex digits and some white space.
const maxCMKOutput = 1024

// ParseCMK parses a CMK written as 64 hex digits, optionally surrounded by
// white space (the trailing newline of a file or a command).  Errors never
// quote the input: it may be a key.
func ParseCMK(text []byte) ([]byte, error) {
	if len(text) > maxCMKOutput {
		return nil, fmt.Errorf("colcrypt: CMK: more than %d bytes", maxCMKOutput)
	}
	t := bytes.TrimSpace(text)
	if len(t) == 0 {
		return nil, errors.New("colcrypt: CMK: empty")
	}
	if len(t) != 2*CMKSize {
		return nil, fmt.Errorf("colcrypt: CMK: %d characters, want %d hex digits", len(t), 2*CMKSize)
	}
	k := make([]byte, CMKSize)
	if _, err := hex.Decode(k, t); err != nil {
		return nil, errors.New("colcrypt: CMK: not 64 hex digits")
	}
	return k, nil
}

// LoadCMKFile reads a CMK from a file holding 64 hex digits.
func LoadCMKFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("colcrypt: CMK file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCMKOutput+1))
	if err != nil {
		return nil, fmt.Errorf("colcrypt: CMK file %s: %w", path, err)
	}
	k, err := ParseCMK(b)
	if err != nil {
		return nil, fmt.Errorf("CMK file %s: %w", path, err)
	}
	return k, nil
}

// LoadCMKCommand runs command with /bin/sh -c and reads the CMK from what
// it prints on stdout; its stderr goes to ours.  The command must exit
// with status 0 within CMKCommandTimeout (or ctx's deadline, if earlier).
func LoadCMKCommand(ctx context.Context, command string) ([]byte, error) {
	if strings.TrimSpace(command) == "" {
		return nil, errors.New("colcrypt: CMK command is empty")
	}
	ctx, cancel := context.WithTimeout(ctx, CMKCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	var out limitedBuffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	killGroupOnCancel(cmd)
	// Should a child escape the group and hold stdout open, stop waiting
	// for it shortly after the kill.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("colcrypt: CMK command %q did not finish in time: %w", command, ctx.Err())
	case err != nil:
		return nil, fmt.Errorf("colcrypt: CMK command %q failed: %w", command, err)
	case out.over:
		return nil, fmt.Errorf("colcrypt: CMK command %q printed more than %d bytes", command, maxCMKOutput)
	}
	k, err := ParseCMK(out.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("CMK command %q: %w", command, err)
	}
	return k, nil
}

// limitedBuffer keeps the first maxCMKOutput bytes written and notes more.
type limitedBuffer struct {
	buf  bytes.Buffer
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxCMKOutput - b.buf.Len(); len(p) > room {
		b.over = true
		b.buf.Write(p[:room])
		return len(p), nil
	}
	return b.buf.Write(p)
}

// NewCEK draws a column encryption key.
func NewCEK(rand io.Reader) ([]byte, error) {
	k := make([]byte, CEKSize)
	if _, err := io.ReadFull(rand, k); err != nil {
		return nil, fmt.Errorf("colcrypt: drawing a CEK: %w", err)
	}
	return k, nil
}

// wrapAD is the associated data that binds a wrapped CEK to its names.
func wrapAD(cmkName, cekName string) ([]byte, error) {
	if strings.IndexByte(cmkName, 0) >= 0 || strings.IndexByte(cekName, 0) >= 0 {
		return nil, errors.New("colcrypt: key names must not contain NUL")
	}
	ad := []byte("pgcipher cek v1\x00")
	ad = append(ad, cmkName...)
	ad = append(ad, 0)
	return append(ad, cekName...), nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// WrapCEK returns 0x01 ‖ nonce ‖ AES-256-GCM(cmk, cek, AD = "pgcipher cek
// v1\0" ‖ cmkName ‖ 0 ‖ cekName), 61 bytes.
func WrapCEK(cmk, cek []byte, cmkName, cekName string, rand io.Reader) ([]byte, error) {
	if len(cmk) != CMKSize || len(cek) != CEKSize {
		return nil, fmt.Errorf("colcrypt: wrapping: CMK and CEK must be 32 bytes, got %d and %d", len(cmk), len(cek))
	}
	ad, err := wrapAD(cmkName, cekName)
	if err != nil {
		return nil, err
	}
	g, err := newGCM(cmk)
	if err != nil {
		return nil, fmt.Errorf("colcrypt: wrapping: %w", err)
	}
	out := make([]byte, 1+NonceSize, WrappedCEKSize)
	out[0] = wrapVersion
	if _, err := io.ReadFull(rand, out[1:]); err != nil {
		return nil, fmt.Errorf("colcrypt: wrapping: reading randomness: %w", err)
	}
	return g.Seal(out, out[1:], cek, ad), nil
}

// UnwrapCEK reverses WrapCEK; a wrong CMK or names, or a damaged wrapped
// key, fail authentication.
func UnwrapCEK(cmk, wrapped []byte, cmkName, cekName string) ([]byte, error) {
	if len(cmk) != CMKSize {
		return nil, fmt.Errorf("colcrypt: unwrapping: CMK must be 32 bytes, got %d", len(cmk))
	}
	if len(wrapped) != WrappedCEKSize || wrapped[0] != wrapVersion {
		return nil, fmt.Errorf("colcrypt: unwrapping CEK %q: malformed wrapped key (%d bytes)", cekName, len(wrapped))
	}
	ad, err := wrapAD(cmkName, cekName)
	if err != nil {
		return nil, err
	}
	g, err := newGCM(cmk)
	if err != nil {
		return nil, fmt.Errorf("colcrypt: unwrapping: %w", err)
	}
	cek, err := g.Open(nil, wrapped[1:1+NonceSize], wrapped[1+NonceSize:], ad)
	if err != nil {
		return nil, fmt.Errorf("colcrypt: unwrapping CEK %q with CMK %q: wrong CMK, wrong names or damaged key: %w", cekName, cmkName, err)
	}
	return cek, nil
}

// Sub-key purposes.
const (
	PurposePayload = "payload"
	PurposeEq      = "eq"
	PurposeOREPRF  = "ore-prf"
	PurposeOREPerm = "ore-perm"
	// order format 2 (design 13.5b): its own keys, not version 1's
	PurposeORE2PRF  = "ore2-prf"
	PurposeORE2Perm = "ore2-perm"
	PurposeMatch    = "match"
)

// SubKey derives HKDF-SHA-256(cek, no salt, info = "pgcipher columns
// v1\0" ‖ purpose ‖ 0 ‖ context), 32 bytes.  The context is empty for the
// payload key and the join group for the others.
func SubKey(cek []byte, purpose, context string) ([]byte, error) {
	if len(cek) != CEKSize {
		return nil, fmt.Errorf("colcrypt: CEK must be 32 bytes, got %d", len(cek))
	}
	info := "pgcipher columns v1\x00" + purpose + "\x00" + context
	k, err := hkdf.Key(sha256.New, cek, nil, info, 32)
	if err != nil {
		return nil, fmt.Errorf("colcrypt: deriving %s key: %w", purpose, err)
	}
	return k, nil
}

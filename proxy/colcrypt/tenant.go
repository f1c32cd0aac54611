// Tenant keys (design 13.13): a key per tenant, wrapped under the tenant
// keyring key (TKK) of an epoch, which lives in the proxy's keyring file
// and never in the database, so that destroying it (shredding) reaches
// every copy of the wrapped tenant keys: WAL, archives, backups.

package colcrypt

import (
	"bufio"
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// TenantColumnKey derives tenant key tk's key for the columns bound under
// the column key named columnKey: HKDF-SHA-256(tk, no salt, info =
// "pgcipher tenant column v1\0" ‖ column key name).  A Column is made from
// it as from a CEK, with the Spec's KeyID the tenant key's and Tenant set.
func TenantColumnKey(tk []byte, columnKey string) ([]byte, error) {
	if len(tk) != CEKSize {
		return nil, fmt.Errorf("colcrypt: tenant key must be 32 bytes, got %d", len(tk))
	}
	k, err := hkdf.Key(sha256.New, tk, nil, "pgcipher tenant column v1\x00"+columnKey, CEKSize)
	if err != nil {
		return nil, fmt.Errorf("colcrypt: deriving a tenant column key: %w", err)
	}
	return k, nil
}

// tenantAD binds a wrapped tenant key to its tenant, key id and epoch.
func tenantAD(tenant string, keyID uint32, epoch int) ([]byte, error) {
	if tenant == "" || strings.IndexByte(tenant, 0) >= 0 {
		return nil, errors.New("colcrypt: a tenant name is not empty and has no NUL")
	}
	ad := append([]byte("pgcipher tenant v1\x00"), tenant...)
	ad = append(ad, 0)
	ad = binary.BigEndian.AppendUint32(ad, keyID)
	return binary.BigEndian.AppendUint32(ad, uint32(epoch)), nil
}

// WrapTenantKey returns 0x01 ‖ nonce ‖ AES-256-GCM(tkk, tk, AD = "pgcipher
// tenant v1\0" ‖ tenant ‖ 0 ‖ key id ‖ epoch), 61 bytes, as
// pgcipher.tenant_keys.wrapped holds it.
func WrapTenantKey(tkk, tk []byte, tenant string, keyID uint32, epoch int, rand io.Reader) ([]byte, error) {
	if len(tkk) != CMKSize || len(tk) != CEKSize {
		return nil, fmt.Errorf("colcrypt: wrapping a tenant key: keys must be 32 bytes, got %d and %d", len(tkk), len(tk))
	}
	ad, err := tenantAD(tenant, keyID, epoch)
	if err != nil {
		return nil, err
	}
	g, err := newGCM(tkk)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 1+NonceSize, WrappedCEKSize)
	out[0] = wrapVersion
	if _, err := io.ReadFull(rand, out[1:]); err != nil {
		return nil, fmt.Errorf("colcrypt: wrapping a tenant key: reading randomness: %w", err)
	}
	return g.Seal(out, out[1:], tk, ad), nil
}

// UnwrapTenantKey reverses WrapTenantKey.
func UnwrapTenantKey(tkk, wrapped []byte, tenant string, keyID uint32, epoch int) ([]byte, error) {
	if len(tkk) != CMKSize {
		return nil, fmt.Errorf("colcrypt: unwrapping a tenant key: keyring key must be 32 bytes, got %d", len(tkk))
	}
	if len(wrapped) != WrappedCEKSize || wrapped[0] != wrapVersion {
		return nil, fmt.Errorf("colcrypt: tenant %q: malformed wrapped key (%d bytes)", tenant, len(wrapped))
	}
	ad, err := tenantAD(tenant, keyID, epoch)
	if err != nil {
		return nil, err
	}
	g, err := newGCM(tkk)
	if err != nil {
		return nil, err
	}
	tk, err := g.Open(nil, wrapped[1:1+NonceSize], wrapped[1+NonceSize:], ad)
	if err != nil {
		return nil, fmt.Errorf("colcrypt: tenant %q: its key does not unwrap under keyring epoch %d (another keyring, or a changed row): %w", tenant, epoch, err)
	}
	return tk, nil
}

// Keyring is the tenant keyring file: the TKK of each epoch it holds, the
// newest the one new tenant keys are wrapped under.  Two epochs are held
// only while a shredding runs (design 13.13).
type Keyring struct {
	keys map[int][]byte // epoch → TKK
}

// keyringHeader is the first line of a keyring file.
const keyringHeader = "# pgcipher tenant keyring v1"

// keyringKeyName is the name a TKK is wrapped under the CMK with.
func keyringKeyName(epoch int) string { return "tenant keyring " + strconv.Itoa(epoch) }

// NewKeyring draws the TKK of epoch 1.
func NewKeyring(rand io.Reader) (*Keyring, error) {
	k, err := NewCEK(rand)
	if err != nil {
		return nil, err
	}
	return &Keyring{keys: map[int][]byte{1: k}}, nil
}

// Epochs lists the epochs held, oldest first.
func (r *Keyring) Epochs() []int {
	out := make([]int, 0, len(r.keys))
	for e := range r.keys {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// Newest is the newest epoch and its TKK.
func (r *Keyring) Newest() (int, []byte) {
	e := slices.Max(r.Epochs())
	return e, r.keys[e]
}

// Key is the TKK of epoch e, nil when the keyring does not hold it.
func (r *Keyring) Key(e int) []byte { return r.keys[e] }

// Advance adds the TKK of the epoch after the newest, drawn from rand.
func (r *Keyring) Advance(rand io.Reader) (int, error) {
	e, _ := r.Newest()
	k, err := NewCEK(rand)
	if err != nil {
		return 0, err
	}
	r.keys[e+1] = k
	return e + 1, nil
}

// Drop removes every epoch older than e: their keys are forgotten (the
// file written next no longer holds them).
func (r *Keyring) Drop(olderThan int) {
	for e := range r.keys {
		if e < olderThan {
			clear(r.keys[e])
			delete(r.keys, e)
		}
	}
}

// LoadKeyring reads a keyring file, unwrapping each TKK with the CMK.
func LoadKeyring(path string, cmk []byte, cmkName string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("colcrypt: tenant keyring: %w", err)
	}
	r := &Keyring{keys: map[int][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if line == 1 && t != keyringHeader {
			return nil, fmt.Errorf("colcrypt: %s is not a tenant keyring (its first line is not %q)", path, keyringHeader)
		}
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Fields(t)
		if len(f) != 3 || f[0] != "epoch" {
			return nil, fmt.Errorf("colcrypt: %s:%d: want \"epoch N HEX\"", path, line)
		}
		e, err := strconv.Atoi(f[1])
		if err != nil || e < 1 {
			return nil, fmt.Errorf("colcrypt: %s:%d: epoch %q", path, line, f[1])
		}
		w, err := hex.DecodeString(f[2])
		if err != nil {
			return nil, fmt.Errorf("colcrypt: %s:%d: %w", path, line, err)
		}
		k, err := UnwrapCEK(cmk, w, cmkName, keyringKeyName(e))
		if err != nil {
			return nil, fmt.Errorf("colcrypt: %s:%d: %w", path, line, err)
		}
		r.keys[e] = k
	}
	if len(r.keys) == 0 {
		return nil, fmt.Errorf("colcrypt: tenant keyring %s holds no epoch", path)
	}
	return r, nil
}

// Write replaces the keyring file at path, crash-safe: a temporary file
// in the same directory, synced, renamed over it, the directory synced.
// Mode 0600 for a new file (it unwraps every tenant's key with the CMK);
// a file replaced keeps its group and its group's read permission (the
// proxy's user reads it), never more.
func (r *Keyring) Write(path string, cmk []byte, cmkName string, rand io.Reader) error {
	var b strings.Builder
	b.WriteString(keyringHeader + "\n")
	for _, e := range r.Epochs() {
		w, err := WrapCEK(cmk, r.keys[e], cmkName, keyringKeyName(e), rand)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "epoch %d %x\n", e, w)
	}
	// the file a symbolic link names is the one replaced (else its old
	// content, the keys of the epochs dropped, would stay)
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	dir := filepath.Dir(path)
	// one temporary name: a run killed before its rename leaves that
	// file, which the next write replaces (never a trail of old keyrings)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("colcrypt: writing the tenant keyring: %w", err)
	}
	defer os.Remove(tmp) // a no-op once renamed
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()&0o640 | 0o600
		if err := keepGroup(f, fi); err != nil {
			f.Close()
			return fmt.Errorf("colcrypt: writing the tenant keyring: keeping its group: %w", err)
		}
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("colcrypt: writing the tenant keyring: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("colcrypt: writing the tenant keyring: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("colcrypt: writing the tenant keyring: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("colcrypt: writing the tenant keyring: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("colcrypt: writing the tenant keyring: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("colcrypt: writing the tenant keyring: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("colcrypt: writing the tenant keyring: %w", err)
	}
	return nil
}

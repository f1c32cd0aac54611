// The unwrap mode (docs/design.md, section 9.4): the server's data keys
// wrapped and unwrapped by a key that never leaves the KMS, so that no
// key-encryption key exists outside it.

package kms

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/openbao/openbao/api/v2"
)

// MaxSealed bounds what Seal is given: a key ring's data keys are at most
// 592 bytes (eight XTS keys of AES-256 and their headers).
const MaxSealed = 4096

// A Sealer wraps bytes under a key that stays in a KMS and unwraps what it
// wrapped.  The wrapped form is one line of printable ASCII, stored by the
// server in its key ring (at most 3072 bytes).
type Sealer interface {
	Seal(ctx context.Context, plaintext []byte) (string, error)
	Unseal(ctx context.Context, wrapped string) ([]byte, error)
}

// TransitSealer seals with Transit key K of OpenBao B: transit/encrypt
// and transit/decrypt.  The wrapped form is Transit's ciphertext,
// "vault:vN:...", which names the Transit key's version, so that a
// rotated Transit key still unseals it.
type TransitSealer struct {
	B *OpenBao
	K TransitKey
}

// Seal has Transit encrypt plaintext.
func (s TransitSealer) Seal(ctx context.Context, plaintext []byte) (string, error) {
	if err := checkSealInput(plaintext); err != nil {
		return "", err
	}
	if err := s.K.check(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, s.B.opts.Timeout)
	defer cancel()
	b64 := base64.StdEncoding.EncodeToString(plaintext)
	path := strings.Trim(s.K.Mount, "/") + "/encrypt/" + s.K.Name
	sec, err := s.B.c.Logical().WriteWithContext(ctx, path, map[string]any{"plaintext": b64})
	if err != nil {
		return "", s.B.transitFail(s.K, "update", path, err)
	}
	ct, _ := dataString(sec, "ciphertext")
	if !strings.HasPrefix(ct, "vault:v") || strings.ContainsAny(ct, " \t\r\n") {
		return "", newError(nil, nil, fmt.Sprintf("%s: Transit answered without a ciphertext", s.K))
	}
	return ct, nil
}

// Unseal has Transit decrypt what Seal returned.
func (s TransitSealer) Unseal(ctx context.Context, wrapped string) ([]byte, error) {
	if err := s.K.check(); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(wrapped, "vault:v") || strings.ContainsAny(wrapped, " \t\r\n") {
		return nil, newError(ErrBadKey, nil, "the wrapped key ring is not a Transit ciphertext (one line vault:vN:...)")
	}
	ctx, cancel := context.WithTimeout(ctx, s.B.opts.Timeout)
	defer cancel()
	path := strings.Trim(s.K.Mount, "/") + "/decrypt/" + s.K.Name
	sec, err := s.B.c.Logical().WriteWithContext(ctx, path, map[string]any{"ciphertext": wrapped})
	var re *api.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest && !hasError(re, "encryption key not found") {
		return nil, newError(ErrBadKey, err, fmt.Sprintf("%s cannot decrypt the wrapped key ring (400 %s): damaged, or wrapped by another key",
			s.K, serverSaid(re)))
	}
	if err != nil {
		return nil, s.B.transitFail(s.K, "update", path, err)
	}
	pt, ok := dataString(sec, "plaintext")
	if !ok {
		return nil, newError(nil, nil, fmt.Sprintf("%s: Transit answered without a plaintext", s.K))
	}
	out, err := base64.StdEncoding.DecodeString(pt)
	if err != nil {
		return nil, newError(ErrBadKey, nil, fmt.Sprintf("%s: Transit's plaintext is not base64", s.K))
	}
	return out, nil
}

// KMIPSealer seals with the KMIP server's key ID (AES-256-GCM, Encrypt and
// Decrypt).  The wrapped form is "kmip:v1:ID:IV:DATA:TAG", the identifier
// base64url-encoded and the rest hex; Unseal refuses a form that names
// another key than ID, so that a key command opens only the key ring its
// own key wrapped (a rotation relies on that: design 9.4).
type KMIPSealer struct {
	K  *KMIP
	ID string
}

// kmipKeyringAAD is the additional data of every seal, so that nothing
// wrapped for another purpose unseals as a key ring.
var kmipKeyringAAD = []byte("pgcipher-kms kmip key ring v1")

const kmipSealedPrefix = "kmip:v1:"

// Seal has the KMIP server encrypt plaintext under ID with a fresh IV.
func (s KMIPSealer) Seal(ctx context.Context, plaintext []byte) (string, error) {
	if err := checkSealInput(plaintext); err != nil {
		return "", err
	}
	if s.ID == "" {
		return "", newError(nil, nil, "no KMIP key identifier (--key-id)")
	}
	ctx, cancel := context.WithTimeout(ctx, s.K.opts.Timeout)
	defer cancel()
	iv := make([]byte, gcmIVSize)
	if _, err := rand.Read(iv); err != nil {
		return "", newError(nil, err, fmt.Sprintf("random bytes: %v", err))
	}
	w, err := s.K.encrypt(ctx, s.ID, plaintext, iv, kmipKeyringAAD)
	if err != nil {
		return "", err
	}
	return kmipSealedPrefix + base64.RawURLEncoding.EncodeToString([]byte(s.ID)) + ":" +
		hex.EncodeToString(w.IV) + ":" + hex.EncodeToString(w.Data) + ":" + hex.EncodeToString(w.Tag), nil
}

// Unseal has the KMIP server decrypt what Seal returned.
func (s KMIPSealer) Unseal(ctx context.Context, wrapped string) ([]byte, error) {
	w, err := parseKMIPSealed(wrapped)
	if err != nil {
		return nil, newError(ErrBadKey, nil, "the wrapped key ring: "+err.Error()+" (made by pgcipher-kms kmip-keyring?)")
	}
	if w.ID != s.ID {
		return nil, newError(ErrBadKey, nil, fmt.Sprintf("the key ring is wrapped by KMIP key %s, not by --key-id %s", w.ID, s.ID))
	}
	ctx, cancel := context.WithTimeout(ctx, s.K.opts.Timeout)
	defer cancel()
	return s.K.decrypt(ctx, w, kmipKeyringAAD)
}

func parseKMIPSealed(text string) (KMIPWrappedKey, error) {
	var w KMIPWrappedKey
	rest, ok := strings.CutPrefix(text, kmipSealedPrefix)
	if !ok {
		return w, fmt.Errorf("it does not start with %q", kmipSealedPrefix)
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 4 {
		return w, errors.New("it does not have the four fields ID:IV:DATA:TAG")
	}
	id, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || len(id) == 0 {
		return w, errors.New("its key identifier is not base64url")
	}
	w.ID = string(id)
	for _, f := range []struct {
		name string
		text string
		dst  *[]byte
	}{{"IV", parts[1], &w.IV}, {"data", parts[2], &w.Data}, {"tag", parts[3], &w.Tag}} {
		v, err := hex.DecodeString(f.text)
		if err != nil || len(v) == 0 {
			return w, fmt.Errorf("its %s is not hex", f.name)
		}
		*f.dst = v
	}
	if len(w.IV) != gcmIVSize || len(w.Tag) != gcmTagSize || len(w.Data) > MaxSealed {
		return w, errors.New("its IV, data or tag has the wrong size")
	}
	return w, nil
}

func checkSealInput(plaintext []byte) error {
	if len(plaintext) == 0 || len(plaintext) > MaxSealed {
		return newError(nil, nil, fmt.Sprintf("%d bytes to wrap: a key ring's data keys are 1 to %d bytes", len(plaintext), MaxSealed))
	}
	return nil
}

// CreateKey has the KMIP server create an AES-256 key for Encrypt and
// Decrypt, makes it Active, and returns its identifier: the key a
// KMIPSealer names.
func (k *KMIP) CreateKey(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, k.opts.Timeout)
	defer cancel()
	id, err := k.create(ctx)
	if err != nil {
		return "", err
	}
	if _, err := k.call(ctx, opActivate, "activate key "+id, tStruct(tagRequestPayload, tText(tagUniqueIdentifier, id))); err != nil {
		return "", err
	}
	return id, nil
}

// Files: secrets read only from files that are the caller's own, key files
// written crash-safely and never over another, and keys as hex.

package kms

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// KeySize is the size of the keys this package fetches: an AES-256 KEK or
// a column master key.
const KeySize = 32

// maxSecretFile bounds a token or private key file.
const maxSecretFile = 64 << 10

// ReadPrivateFile reads a file that holds a secret (what names it in
// messages: "token file", "client key").  Like ssh with a private key, it
// refuses, before reading a byte, a file that is not a regular file, that
// the user running this process does not own, or that its group or
// others may read or write: a secret that others can read is no longer
// the owner's.  The checks are made on the opened file, so a rename
// between check and read cannot slip another file in.
func ReadPrivateFile(path, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, newError(nil, err, fmt.Sprintf("%s %s: %v", what, path, pathErr(err)))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, newError(nil, err, fmt.Sprintf("%s %s: %v", what, path, pathErr(err)))
	}
	if !fi.Mode().IsRegular() {
		return nil, newError(ErrUnsafeFile, nil, fmt.Sprintf("%s %s is not a regular file", what, path))
	}
	if uid, me, ok := fileOwner(fi); ok && uid != me {
		return nil, newError(ErrUnsafeFile, nil, fmt.Sprintf(
			"%s %s is owned by uid %d, not by the user running pgcipher-kms (uid %d): it must be that user's own file (chown it, mode 600)",
			what, path, uid, me))
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, newError(ErrUnsafeFile, nil, fmt.Sprintf(
			"%s %s has permissions %04o: it must not be accessible by group or others (chmod 600 %s)",
			what, path, perm, path))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, newError(nil, err, fmt.Sprintf("%s %s: %v", what, path, pathErr(err)))
	}
	if len(b) > maxSecretFile {
		return nil, newError(nil, nil, fmt.Sprintf("%s %s is larger than %d bytes", what, path, maxSecretFile))
	}
	return b, nil
}

// ReadToken reads a KMS token from a private file (ReadPrivateFile): one
// line, surrounding white space ignored.  Its messages never quote it.
func ReadToken(path string) (string, error) {
	b, err := ReadPrivateFile(path, "token file")
	if err != nil {
		return "", err
	}
	t := bytes.TrimSpace(b)
	switch {
	case len(t) == 0:
		return "", newError(nil, nil, fmt.Sprintf("token file %s is empty", path))
	case bytes.ContainsAny(t, " \t\r\n"):
		return "", newError(nil, nil, fmt.Sprintf("token file %s holds more than one word: it must hold the token alone", path))
	}
	return string(t), nil
}

// WriteNewFile writes data to path crash-safely, and only if path does
// not exist: a key file is never replaced, since the file it would
// replace may be the only way to a cluster's key.  The data goes to a
// temporary file in the same directory (mode 0600), which is fsynced and
// then linked to path — link(2), unlike rename(2), fails when path exists,
// so that two writers cannot both win — and removed; last the directory
// is fsynced.  A crash leaves no path, or a complete one (and perhaps a
// stray temporary file, ".NAME.tmp*", that nothing reads).
func WriteNewFile(path string, data []byte) error {
	if _, err := os.Lstat(path); err == nil {
		return newError(ErrExists, nil, fmt.Sprintf("%s exists: a key file is never overwritten (move it away first, if it is no longer needed)", path))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return newError(nil, err, fmt.Sprintf("%s: %v", path, pathErr(err)))
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return newError(nil, err, fmt.Sprintf("creating a temporary file beside %s: %v", path, pathErr(err)))
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return newError(nil, err, fmt.Sprintf("writing %s: %v", tmp.Name(), pathErr(err)))
	}
	if err := tmp.Sync(); err != nil {
		return newError(nil, err, fmt.Sprintf("fsync of %s: %v", tmp.Name(), pathErr(err)))
	}
	if err := tmp.Close(); err != nil {
		return newError(nil, err, fmt.Sprintf("writing %s: %v", tmp.Name(), pathErr(err)))
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return newError(ErrExists, err, fmt.Sprintf("%s exists: a key file is never overwritten", path))
		}
		return newError(nil, err, fmt.Sprintf("linking %s to %s: %v", tmp.Name(), path, linkErr(err)))
	}
	done = true
	if err := os.Remove(tmp.Name()); err != nil {
		return newError(nil, err, fmt.Sprintf("removing %s: %v", tmp.Name(), pathErr(err)))
	}
	d, err := os.Open(dir)
	if err != nil {
		return newError(nil, err, fmt.Sprintf("opening directory %s: %v", dir, pathErr(err)))
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return newError(nil, err, fmt.Sprintf("fsync of directory %s: %v", dir, pathErr(err)))
	}
	return nil
}

// ParseKey reads a 256-bit key written as 64 hex digits (either case),
// surrounding white space ignored.  what names the value in messages
// (`field "kek" of secret/data/pgcipher/kek`), which never quote it.
func ParseKey(text []byte, what string) ([]byte, error) {
	t := bytes.TrimSpace(text)
	if len(t) != 2*KeySize {
		return nil, newError(ErrBadKey, nil, fmt.Sprintf("%s is not 64 hex digits: it has %d characters", what, len(t)))
	}
	for i, c := range t {
		if !isHex(c) {
			return nil, newError(ErrBadKey, nil, fmt.Sprintf("%s is not 64 hex digits: character %d is not a hexadecimal digit", what, i+1))
		}
	}
	k := make([]byte, KeySize)
	if _, err := hex.Decode(k, t); err != nil {
		return nil, newError(ErrBadKey, nil, fmt.Sprintf("%s is not 64 hex digits", what))
	}
	return k, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// WriteKey writes key to w as one line of lowercase hex digits, the form
// key commands print, and wipes its copy of the text.
func WriteKey(w io.Writer, key []byte) error {
	line := make([]byte, 2*len(key)+1)
	defer clear(line)
	hex.Encode(line, key)
	line[len(line)-1] = '\n'
	if _, err := w.Write(line); err != nil {
		return newError(nil, err, fmt.Sprintf("writing the key: %v", err))
	}
	return nil
}

// pathErr is the cause of a *fs.PathError without the operation and path
// that the message already names.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// linkErr is the cause of an *os.LinkError, likewise.
func linkErr(err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// loadClientCert reads a client certificate and its private key, the key
// only from a private file.
func loadClientCert(certFile, keyFile string) (tls.Certificate, error) {
	key, err := ReadPrivateFile(keyFile, "client key")
	if err != nil {
		return tls.Certificate{}, err
	}
	defer clear(key)
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, newError(nil, err, fmt.Sprintf("client certificate %s: %v", certFile, pathErr(err)))
	}
	cert, err := tls.X509KeyPair(certPEM, key)
	if err != nil {
		return tls.Certificate{}, newError(nil, err, fmt.Sprintf("client certificate %s and key %s: %v", certFile, keyFile, err))
	}
	return cert, nil
}

// loadCAPool reads the CA certificate(s) that must sign a server's.
func loadCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, newError(nil, err, fmt.Sprintf("CA certificate %s: %v", path, pathErr(err)))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, newError(nil, nil, fmt.Sprintf("CA certificate %s holds no PEM certificate", path))
	}
	return pool, nil
}

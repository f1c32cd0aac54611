// KMIP: a client over mutual TLS that has the server create an AES-256
// key and encrypt and decrypt with it, and every failure made one line.

package kms

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// KMIPOptions say how to reach a KMIP server and as whom: KMIP servers
// know their clients by their TLS certificates.
type KMIPOptions struct {
	Addr       string        // HOST:PORT (KMIP's port is 5696)
	CACert     string        // PEM file of the CA(s) that sign the server's certificate; "" trusts the system's
	ClientCert string        // PEM client certificate
	ClientKey  string        // its private key: a private file (ReadPrivateFile)
	Timeout    time.Duration // per call of NewWrappedKey, Unwrap; DefaultTimeout if 0
}

// KMIP is a client of one KMIP server with one client certificate.  Each
// operation is one request on a new TLS connection.
type KMIP struct {
	opts KMIPOptions
	tls  *tls.Config
}

// KMIP enumerations (KMIP 1.4, section 9.1.3.2).
const (
	opCreate   = 0x01
	opActivate = 0x12
	opEncrypt  = 0x1f
	opDecrypt  = 0x20

	objSymmetricKey = 0x02
	algAES          = 0x03
	modeGCM         = 0x09
	usageEncrypt    = 0x04
	usageDecrypt    = 0x08

	statusSuccess        = 0x00
	reasonItemNotFound   = 0x01
	reasonPermission     = 0x0c
	reasonCryptoFailure  = 0x0a
	reasonInvalidField   = 0x07
	reasonInvalidMessage = 0x04
	reasonGeneralFailure = 0x100
)

// kmipVersion is the protocol version of the requests: 1.4, the first
// with Authenticated Encryption Additional Data and Tag (for GCM).
var kmipVersion = [2]int32{1, 4}

// gcmIVSize and gcmTagSize are the sizes of the IV and tag of the
// wrapping's AES-256-GCM.
const (
	gcmIVSize  = 12
	gcmTagSize = 16
)

// kmipAAD is the additional data of every wrapping: a ciphertext made
// for something else does not decrypt as a pgcipher key.
var kmipAAD = []byte("pgcipher-kms kmip wrapped key v1")

// NewKMIP checks opts and reads the CA and the client certificate and
// key; it does not connect yet.
func NewKMIP(opts KMIPOptions) (*KMIP, error) {
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Timeout < 0 {
		return nil, newError(nil, nil, fmt.Sprintf("timeout %s is negative", opts.Timeout))
	}
	host, port, err := net.SplitHostPort(opts.Addr)
	if err != nil || host == "" || port == "" || strings.Contains(opts.Addr, "/") {
		return nil, newError(nil, nil, fmt.Sprintf("address %q is not HOST:PORT", opts.Addr))
	}
	if (opts.ClientCert == "") != (opts.ClientKey == "") {
		return nil, newError(nil, nil, "a client certificate needs its key, and a key its certificate")
	}
	cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if opts.CACert != "" {
		pool, err := loadCAPool(opts.CACert)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if opts.ClientCert != "" {
		cert, err := loadClientCert(opts.ClientCert, opts.ClientKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &KMIP{opts: opts, tls: cfg}, nil
}

// KMIPWrappedKey is a 256-bit key encrypted by a KMIP server under a
// symmetric key that stays in it: what kmip-new writes to its file.
type KMIPWrappedKey struct {
	ID   string // the Unique Identifier of the wrapping key
	IV   []byte // AES-256-GCM's IV
	Data []byte // the encrypted key
	Tag  []byte // GCM's tag
}

const wrappedMagic = "pgcipher-kms kmip wrapped key v1"

// MarshalText writes w as lines "NAME VALUE" under a first line that
// names the format; the values are hex, the identifier as the server
// gave it.
func (w KMIPWrappedKey) MarshalText() ([]byte, error) {
	if w.ID == "" || strings.TrimSpace(w.ID) != w.ID || strings.IndexFunc(w.ID, notPrintable) >= 0 {
		return nil, fmt.Errorf("unique identifier %q cannot be written on one line and read back the same", w.ID)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nunique-identifier %s\nalgorithm AES-256-GCM\niv %x\ndata %x\ntag %x\n",
		wrappedMagic, w.ID, w.IV, w.Data, w.Tag)
	return b.Bytes(), nil
}

// UnmarshalText reads what MarshalText wrote.
func (w *KMIPWrappedKey) UnmarshalText(text []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(text))
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != wrappedMagic {
		return fmt.Errorf("it does not start with %q", wrappedMagic)
	}
	fields := map[string]string{}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			return fmt.Errorf("line %q is not NAME VALUE", name)
		}
		switch name {
		case "unique-identifier", "algorithm", "iv", "data", "tag":
		default:
			return fmt.Errorf("it has an unknown field %q", name)
		}
		if _, dup := fields[name]; dup {
			return fmt.Errorf("%s given twice", name)
		}
		fields[name] = strings.TrimSpace(val)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("it cannot be read: %w", err)
	}
	if fields["algorithm"] != "AES-256-GCM" {
		return fmt.Errorf("algorithm %q is not AES-256-GCM", fields["algorithm"])
	}
	if w.ID = fields["unique-identifier"]; w.ID == "" {
		return errors.New("it has no unique-identifier")
	}
	for _, f := range []struct {
		name string
		dst  *[]byte
		size int
	}{{"iv", &w.IV, gcmIVSize}, {"data", &w.Data, KeySize}, {"tag", &w.Tag, gcmTagSize}} {
		v, err := hex.DecodeString(fields[f.name])
		if err != nil || len(v) != f.size {
			return fmt.Errorf("its %s is not %d bytes in hex", f.name, f.size)
		}
		*f.dst = v
	}
	return nil
}

// NewWrappedKey has the server create a new AES-256 key that may encrypt
// and decrypt (Create), draws a fresh 256-bit key here, and has the
// server encrypt it under the new key, once made Active (Activate),
// with AES-256-GCM (Encrypt).  The
// fresh key is wiped before it returns; only the wrapping is kept.
func (k *KMIP) NewWrappedKey(ctx context.Context) (KMIPWrappedKey, error) {
	ctx, cancel := context.WithTimeout(ctx, k.opts.Timeout)
	defer cancel()
	id, err := k.CreateKey(ctx)
	if err != nil {
		return KMIPWrappedKey{}, err
	}
	key := make([]byte, KeySize)
	defer clear(key)
	iv := make([]byte, gcmIVSize)
	if _, err := rand.Read(key); err != nil {
		return KMIPWrappedKey{}, newError(nil, err, fmt.Sprintf("random bytes: %v", err))
	}
	if _, err := rand.Read(iv); err != nil {
		return KMIPWrappedKey{}, newError(nil, err, fmt.Sprintf("random bytes: %v", err))
	}
	w, err := k.encrypt(ctx, id, key, iv, kmipAAD)
	if err != nil {
		return KMIPWrappedKey{}, err
	}
	if len(w.Data) != KeySize {
		return KMIPWrappedKey{}, newError(nil, nil, fmt.Sprintf("the KMIP server at %s answered Encrypt without a %d-byte ciphertext", k.opts.Addr, KeySize))
	}
	// one round trip before the file is written: it must give the key back
	back, err := k.Unwrap(ctx, w)
	if err != nil {
		return KMIPWrappedKey{}, err
	}
	defer clear(back)
	if !bytes.Equal(back, key) {
		return KMIPWrappedKey{}, newError(nil, nil, fmt.Sprintf("the KMIP server at %s decrypts the new wrapped key to another key", k.opts.Addr))
	}
	return w, nil
}

// Unwrap has the server decrypt w (Decrypt) and returns the key.
func (k *KMIP) Unwrap(ctx context.Context, w KMIPWrappedKey) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, k.opts.Timeout)
	defer cancel()
	key, err := k.decrypt(ctx, w, kmipAAD)
	if err != nil {
		return nil, err
	}
	if len(key) != KeySize {
		clear(key)
		return nil, newError(ErrBadKey, nil, fmt.Sprintf("KMIP key %s at %s decrypted the wrapped key to something that is not %d bytes", w.ID, k.opts.Addr, KeySize))
	}
	return key, nil
}

// encrypt has the server encrypt plaintext under key id with AES-256-GCM,
// the IV given and the additional data aad (Encrypt).
func (k *KMIP) encrypt(ctx context.Context, id string, plaintext, iv, aad []byte) (KMIPWrappedKey, error) {
	resp, err := k.call(ctx, opEncrypt, "encrypt with key "+id, tStruct(tagRequestPayload,
		tText(tagUniqueIdentifier, id),
		gcmParameters(),
		tBytes(tagData, plaintext),
		tBytes(tagIVCounterNonce, iv),
		tBytes(tagAuthAdditionalData, aad)))
	if err != nil {
		return KMIPWrappedKey{}, err
	}
	// a server may choose its own IV and return it: the result would not decrypt
	if got, ok := resp.child(tagIVCounterNonce); ok && !bytes.Equal(got.val, iv) {
		return KMIPWrappedKey{}, newError(nil, nil, fmt.Sprintf("the KMIP server at %s encrypted with an IV of its own, not the one given", k.opts.Addr))
	}
	data, ok1 := resp.child(tagData)
	tag, ok2 := resp.child(tagAuthTag)
	if !ok1 || !ok2 || len(data.val) != len(plaintext) || len(tag.val) != gcmTagSize {
		return KMIPWrappedKey{}, newError(nil, nil, fmt.Sprintf("the KMIP server at %s answered Encrypt without a %d-byte ciphertext and %d-byte tag", k.opts.Addr, len(plaintext), gcmTagSize))
	}
	return KMIPWrappedKey{ID: id, IV: iv, Data: bytes.Clone(data.val), Tag: bytes.Clone(tag.val)}, nil
}

// decrypt has the server decrypt w with the additional data aad (Decrypt)
// and returns the plaintext, cleared from the answer's buffer.
func (k *KMIP) decrypt(ctx context.Context, w KMIPWrappedKey, aad []byte) ([]byte, error) {
	resp, err := k.call(ctx, opDecrypt, "decrypt with key "+w.ID, tStruct(tagRequestPayload,
		tText(tagUniqueIdentifier, w.ID),
		gcmParameters(),
		tBytes(tagData, w.Data),
		tBytes(tagIVCounterNonce, w.IV),
		tBytes(tagAuthAdditionalData, aad),
		tBytes(tagAuthTag, w.Tag)))
	if err != nil {
		return nil, err
	}
	data, ok := resp.child(tagData)
	// the answer's buffer is ours: the plaintext is cleared from it
	defer clear(data.val)
	if !ok {
		return nil, newError(ErrBadKey, nil, fmt.Sprintf("KMIP key %s at %s answered Decrypt without data", w.ID, k.opts.Addr))
	}
	return bytes.Clone(data.val), nil
}

// create has the server make an AES-256 key for Encrypt and Decrypt and
// returns its Unique Identifier.
func (k *KMIP) create(ctx context.Context) (string, error) {
	resp, err := k.call(ctx, opCreate, "create an AES-256 key", tStruct(tagRequestPayload,
		tEnum(tagObjectType, objSymmetricKey),
		tStruct(tagTemplateAttribute,
			tAttr("Cryptographic Algorithm", tEnum(0, algAES)),
			tAttr("Cryptographic Length", tInt(0, 256)),
			tAttr("Cryptographic Usage Mask", tInt(0, usageEncrypt|usageDecrypt)))))
	if err != nil {
		return "", err
	}
	id, ok := resp.child(tagUniqueIdentifier)
	if !ok || id.typ != ttlvText || len(id.val) == 0 {
		return "", newError(nil, nil, fmt.Sprintf("the KMIP server at %s answered Create without a unique identifier", k.opts.Addr))
	}
	return string(id.val), nil
}

func gcmParameters() ttlv {
	return tStruct(tagCryptoParameters,
		tEnum(tagBlockCipherMode, modeGCM),
		tEnum(tagCryptoAlgorithm, algAES),
		tInt(tagTagLength, gcmTagSize))
}

// call sends one request with one batch item (operation op with
// payload; what says what it does, for messages) and returns the
// response payload of a successful answer.
func (k *KMIP) call(ctx context.Context, op uint32, what string, payload ttlv) (ttlv, error) {
	req := tStruct(tagRequestMessage,
		tStruct(tagRequestHeader,
			tStruct(tagProtocolVersion, tInt(tagProtocolMajor, kmipVersion[0]), tInt(tagProtocolMinor, kmipVersion[1])),
			tInt(tagBatchCount, 1)),
		tStruct(tagBatchItem, tEnum(tagOperation, op), payload))
	// room for the whole request: append never leaves a copy of a key behind
	msg := req.encode(make([]byte, 0, 4096))
	defer clear(msg[:cap(msg)])

	d := tls.Dialer{Config: k.tls}
	conn, err := d.DialContext(ctx, "tcp", k.opts.Addr)
	if err != nil {
		return ttlv{}, k.fail(what, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write(msg); err != nil {
		return ttlv{}, k.fail(what, err)
	}
	resp, err := readMessage(conn)
	if err != nil {
		return ttlv{}, k.fail(what, err)
	}
	if resp.tag != tagResponseMessage {
		return ttlv{}, k.fail(what, fmt.Errorf("%w: not a Response Message", errTTLV))
	}
	item, ok := resp.child(tagBatchItem)
	if !ok {
		return ttlv{}, k.fail(what, fmt.Errorf("%w: no Batch Item", errTTLV))
	}
	status, ok := item.path(tagResultStatus)
	if st, isEnum := status.enum(); !ok || !isEnum || st != statusSuccess {
		return ttlv{}, k.resultFail(what, item)
	}
	p, _ := item.child(tagResponsePayload)
	return p, nil
}

// resultFail explains a batch item that did not succeed.
func (k *KMIP) resultFail(what string, item ttlv) error {
	reason := uint32(0)
	if r, ok := item.child(tagResultReason); ok {
		reason, _ = r.enum()
	}
	said := ""
	if m, ok := item.child(tagResultMessage); ok && m.typ == ttlvText {
		said = ": " + serverText(string(m.val))
	}
	addr := k.opts.Addr
	switch reason {
	case reasonItemNotFound:
		return newError(ErrNotFound, nil, fmt.Sprintf("the KMIP server at %s cannot %s: no such object, or not one this client certificate may use (Item Not Found%s)", addr, what, said))
	case reasonPermission:
		return newError(ErrDenied, nil, fmt.Sprintf("the KMIP server at %s refused to %s (Permission Denied%s): is --client-cert the one that made the key (kmip-new)?", addr, what, said))
	case reasonCryptoFailure, reasonGeneralFailure:
		if !strings.HasPrefix(what, "decrypt") {
			break
		}
		return newError(ErrBadKey, nil, fmt.Sprintf("the KMIP server at %s could not %s (%s%s): the wrapped key file is damaged, or was made by another key", addr, what, reasonText(reason), said))
	case reasonInvalidField, reasonInvalidMessage:
		return newError(nil, nil, fmt.Sprintf("the KMIP server at %s did not accept the request to %s (%s%s): does it support KMIP 1.4 and AES-256-GCM?", addr, what, reasonText(reason), said))
	}
	return newError(nil, nil, fmt.Sprintf("the KMIP server at %s failed to %s (%s%s)", addr, what, reasonText(reason), said))
}

// reasonText names a Result Reason.
func reasonText(r uint32) string {
	switch r {
	case reasonCryptoFailure:
		return "Cryptographic Failure"
	case reasonGeneralFailure:
		return "General Failure"
	case reasonInvalidField:
		return "Invalid Field"
	case reasonInvalidMessage:
		return "Invalid Message"
	}
	return fmt.Sprintf("Result Reason %#x", r)
}

// fail turns a connection error into one line saying what went wrong and
// what to check.
func (k *KMIP) fail(what string, err error) error {
	addr := k.opts.Addr
	var (
		netErr net.Error
		dnsErr *net.DNSError
		verErr *tls.CertificateVerificationError
		unkCA  x509.UnknownAuthorityError
		host   x509.HostnameError
		record tls.RecordHeaderError
		opErr  *net.OpError
	)
	ca := "--ca-cert " + k.opts.CACert
	if k.opts.CACert == "" {
		ca = "the system's CAs (no --ca-cert)"
	}
	hint := ": is --client-cert one it accepts, issued by a CA it trusts?"
	if k.opts.ClientCert == "" {
		hint = ": KMIP servers want a client certificate (--client-cert, --client-key)"
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		return newError(ErrTimeout, err, fmt.Sprintf("no answer from the KMIP server at %s within %s (--timeout)", addr, k.opts.Timeout))
	case errors.Is(err, syscall.ECONNREFUSED):
		return newError(ErrUnreachable, err, fmt.Sprintf("cannot connect to the KMIP server at %s: connection refused (is it running, and is --addr right?)", addr))
	case errors.As(err, &dnsErr):
		return newError(ErrUnreachable, err, fmt.Sprintf("cannot connect to the KMIP server at %s: %v", addr, dnsErr))
	case errors.As(err, &unkCA) || errors.As(err, &verErr) && !errors.As(err, &host):
		return newError(ErrTLS, err, fmt.Sprintf("the TLS certificate of the KMIP server at %s is not signed by a CA in %s: %v", addr, ca, innermost(err)))
	case errors.As(err, &host):
		return newError(ErrTLS, err, fmt.Sprintf("the TLS certificate of the KMIP server at %s is not for that host: %v", addr, host.Error()))
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		return newError(ErrTLS, err, fmt.Sprintf("the KMIP server at %s refused the TLS connection (%v)%s", addr, innermost(err), hint))
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET):
		// a server that dislikes the client certificate may close the
		// connection without an alert, or after the handshake
		return newError(ErrTLS, err, fmt.Sprintf("the KMIP server at %s closed the connection (%v)%s", addr, innermost(err), hint))
	case errors.As(err, &record):
		return newError(ErrTLS, err, fmt.Sprintf("the KMIP server at %s does not speak TLS there", addr))
	case errors.Is(err, errTTLV):
		return newError(nil, err, fmt.Sprintf("the KMIP server at %s answered the request to %s with %v", addr, what, err))
	case errors.As(err, &opErr):
		return newError(ErrUnreachable, err, fmt.Sprintf("cannot connect to the KMIP server at %s: %v", addr, innermost(err)))
	}
	return newError(nil, err, fmt.Sprintf("the KMIP server at %s, %s: %v", addr, what, err))
}

// notPrintable is true of a rune that must not go into a file line or a log.
func notPrintable(r rune) bool { return !unicode.IsPrint(r) }

// serverText is a server's message made safe for one log line: printable
// characters only (no terminal escapes), at most 200 bytes.
func serverText(s string) string {
	s = strings.Map(func(r rune) rune {
		if notPrintable(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

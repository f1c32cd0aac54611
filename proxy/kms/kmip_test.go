// Tests against a real PyKMIP server (package kmstest): a key wrapped and
// unwrapped by the server, and every failure one clear line of the right
// kind that holds no key.

package kms

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func kmipOpts() KMIPOptions {
	return KMIPOptions{Addr: kmipSrv.Addr, CACert: kmipSrv.CACert,
		ClientCert: kmipSrv.ClientCert, ClientKey: kmipSrv.ClientKey, Timeout: 5 * time.Second}
}

func TestKMIPWrapUnwrap(t *testing.T) {
	if kmipSrv == nil {
		t.Skip("no PyKMIP server (no pykmip-server)")
	}
	k, err := NewKMIP(kmipOpts())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w1, err := k.NewWrappedKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := k.NewWrappedKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w1.ID == w2.ID {
		t.Errorf("two wrapped keys under one KMIP key %s: each kmip-new creates its own", w1.ID)
	}
	text, err := w1.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	var back KMIPWrappedKey
	if err := back.UnmarshalText(text); err != nil {
		t.Fatalf("reading back\n%s: %v", text, err)
	}
	key1, err := k.Unwrap(ctx, back)
	if err != nil {
		t.Fatal(err)
	}
	again, err := k.Unwrap(ctx, w1)
	if err != nil {
		t.Fatal(err)
	}
	key2, err := k.Unwrap(ctx, w2)
	if err != nil {
		t.Fatal(err)
	}
	if len(key1) != KeySize || !bytes.Equal(key1, again) || bytes.Equal(key1, key2) {
		t.Errorf("keys: %x, again %x, another %x: want 32 bytes, the same twice, another for another file", key1, again, key2)
	}
	if bytes.Contains(text, []byte(hex.EncodeToString(key1))) {
		t.Errorf("the wrapped key file holds the key:\n%s", text)
	}
}

func TestKMIPFailures(t *testing.T) {
	if kmipSrv == nil {
		t.Skip("no PyKMIP server (no pykmip-server)")
	}
	ctx := context.Background()
	good, err := NewKMIP(kmipOpts())
	if err != nil {
		t.Fatal(err)
	}
	w, err := good.NewWrappedKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key, err := good.Unwrap(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	keyHex := hex.EncodeToString(key)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	readable := filepath.Join(t.TempDir(), "client-key.pem")
	b, err := os.ReadFile(kmipSrv.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(readable, b, 0o644); err != nil {
		t.Fatal(err)
	}
	damaged := w
	damaged.Data = bytes.Clone(w.Data)
	damaged.Data[3] ^= 0x40
	missing := w
	missing.ID = "4000000"

	tests := []struct {
		name  string
		opts  func(*KMIPOptions)
		wkey  KMIPWrappedKey
		pause bool
		kind  error
		want  string
	}{
		{name: "server down", opts: func(o *KMIPOptions) { o.Addr = down }, wkey: w, kind: ErrUnreachable,
			want: "cannot connect to the KMIP server at " + down + ": connection refused (is it running, and is --addr right?)"},
		{name: "wrong CA", opts: func(o *KMIPOptions) { o.CACert = kmipSrv.OtherCA }, wkey: w, kind: ErrTLS,
			want: "is not signed by a CA in --ca-cert " + kmipSrv.OtherCA},
		{name: "no client certificate", opts: func(o *KMIPOptions) { o.ClientCert, o.ClientKey = "", "" }, wkey: w, kind: ErrTLS,
			want: "KMIP servers want a client certificate (--client-cert, --client-key)"},
		{name: "unknown client certificate", opts: func(o *KMIPOptions) { o.ClientCert, o.ClientKey = kmipSrv.OtherCert, kmipSrv.OtherKey }, wkey: w, kind: ErrTLS,
			want: "is --client-cert one it accepts, issued by a CA it trusts?"},
		{name: "client key readable by others", opts: func(o *KMIPOptions) { o.ClientKey = readable }, wkey: w, kind: ErrUnsafeFile,
			want: "client key " + readable + " has permissions 0644: it must not be accessible by group or others"},
		{name: "another client's key", opts: func(o *KMIPOptions) { o.ClientCert, o.ClientKey = kmipSrv.SecondCert, kmipSrv.SecondKey }, wkey: w, kind: ErrDenied,
			want: "refused to decrypt with key " + w.ID + " (Permission Denied: Could not locate object: " + w.ID + "): is --client-cert the one that made the key (kmip-new)?"},
		{name: "object missing", wkey: missing, kind: ErrNotFound,
			want: "cannot decrypt with key 4000000: no such object, or not one this client certificate may use"},
		{name: "damaged wrapped key", wkey: damaged, kind: ErrBadKey,
			want: "could not decrypt with key " + w.ID},
		{name: "timeout", opts: func(o *KMIPOptions) { o.Timeout = time.Second }, wkey: w, pause: true, kind: ErrTimeout,
			want: "no answer from the KMIP server at " + kmipSrv.Addr + " within 1s (--timeout)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := kmipOpts()
			if tt.opts != nil {
				tt.opts(&o)
			}
			k, err := NewKMIP(o)
			if err == nil {
				if tt.pause {
					if err := kmipSrv.Pause(); err != nil {
						t.Fatal(err)
					}
					defer func() {
						if err := kmipSrv.Resume(); err != nil {
							t.Fatal(err)
						}
					}()
				}
				var got []byte
				got, err = k.Unwrap(ctx, tt.wkey)
				if err == nil {
					t.Fatalf("got a key %x, want %v", got, tt.kind)
				}
			}
			checkErr(t, err, tt.kind, tt.want, keyHex)
		})
	}
}

// checkErr checks a failure: its kind, one line, its text, and no key in it.
func checkErr(t *testing.T, err error, kind error, want, secret string) {
	t.Helper()
	msg := err.Error()
	t.Logf("%s", msg)
	if !errors.Is(err, kind) {
		t.Errorf("error %q is not %v", msg, kind)
	}
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error %q is more than one line", msg)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("error %q does not say %q", msg, want)
	}
	if secret != "" && strings.Contains(strings.ToLower(msg), secret) {
		t.Errorf("error %q holds the key", msg)
	}
}

func TestKMIPWrappedKeyText(t *testing.T) {
	w := KMIPWrappedKey{ID: "17", IV: bytes.Repeat([]byte{1}, gcmIVSize),
		Data: bytes.Repeat([]byte{2}, KeySize), Tag: bytes.Repeat([]byte{3}, gcmTagSize)}
	good, err := w.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		text string
		want string // "" for success
	}{
		{"as written", string(good), ""},
		{"CRLF and blank lines", strings.ReplaceAll(string(good), "\n", "\r\n\r\n"), ""},
		{"empty", "", "does not start with"},
		{"another format", "vault:v1:abc\n", "does not start with"},
		{"no identifier", strings.Replace(string(good), "unique-identifier 17\n", "", 1), "no unique-identifier"},
		{"another algorithm", strings.Replace(string(good), "AES-256-GCM", "AES-128-CBC", 1), `algorithm "AES-128-CBC"`},
		{"short data", strings.Replace(string(good), "data 0202", "data ", 1), "data is not 32 bytes"},
		{"bad hex", strings.Replace(string(good), "iv 01", "iv zz", 1), "iv is not 12 bytes"},
		{"twice", string(good) + "tag 00\n", "tag given twice"},
		{"no value", string(good) + "junk\n", "is not NAME VALUE"},
		{"unknown field", string(good) + "bogus-field 1234\n", `unknown field "bogus-field"`},
		{"a line too long", string(good) + "tag " + strings.Repeat("0", 70000) + "\n", "cannot be read"},
	}
	// identifiers that would not read back the same are not written
	for _, id := range []string{"", " 17", "17\t", "1\x1b[7"} {
		bad := w
		bad.ID = id
		if _, err := bad.MarshalText(); err == nil {
			t.Errorf("identifier %q written", id)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got KMIPWrappedKey
			err := got.UnmarshalText([]byte(tt.text))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.want == "" && (got.ID != w.ID || !bytes.Equal(got.IV, w.IV) || !bytes.Equal(got.Data, w.Data) || !bytes.Equal(got.Tag, w.Tag)):
				t.Errorf("read %+v, want %+v", got, w)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestTTLV(t *testing.T) {
	msg := tStruct(tagRequestMessage,
		tInt(tagBatchCount, 1),
		tEnum(tagOperation, opDecrypt),
		tText(tagUniqueIdentifier, "12345"),
		tBytes(tagData, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}))
	b := msg.encode(nil)
	if len(b)%8 != 0 {
		t.Fatalf("encoding of %d bytes is not padded to 8", len(b))
	}
	// tag 420078, type 01 (Structure), then a 4-byte length
	if want := "42007801000000"; !strings.HasPrefix(hex.EncodeToString(b), want) {
		t.Errorf("encoding starts %x, want %s", b[:7], want)
	}
	got, err := readMessage(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := got.child(tagData); !ok || !bytes.Equal(d.val, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("Data read back as %x", d.val)
	}
	if op, _ := got.path(tagOperation); op.typ != ttlvEnum {
		t.Errorf("Operation read back as type %d", op.typ)
	} else if v, _ := op.enum(); v != opDecrypt {
		t.Errorf("Operation %#x, want %#x", v, opDecrypt)
	}

	bad := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"not a structure", tText(tagResponseMessage, "x").encode(nil)},
		{"truncated", b[:len(b)-8]},
		{"child longer than its structure", func() []byte {
			c := bytes.Clone(b)
			c[8+4+3] = 0xff // the first child's length
			return c
		}()},
		{"too large", []byte{0x42, 0, 0x7b, 1, 0x7f, 0, 0, 0}},
		{"a child's length near 2^31 (overflows n + 7 in 32 bits)", func() []byte {
			c := bytes.Clone(b)
			copy(c[8+4:8+8], []byte{0x7f, 0xff, 0xff, 0xfb})
			return c
		}()},
		{"a child's length of 2^32 - 1", func() []byte {
			c := bytes.Clone(b)
			copy(c[8+4:8+8], []byte{0xff, 0xff, 0xff, 0xff})
			return c
		}()},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := readMessage(bytes.NewReader(tt.b)); err == nil {
				t.Errorf("read %x without an error", tt.b)
			}
		})
	}
}

// SCRAM pass-through (design 15.14): a client whose secret came from the
// auth query logs in to the proxy with SCRAM-SHA-256; the proxy keeps
// the ClientKey that the client's proof reveals (as PgBouncer does) and
// logs in to the server as that user with it, never knowing the
// password.  pgconn opens the server connection; the proof it computes
// from a placeholder password is replaced on its way out, and the
// server's signature checked against the verifier and replaced by the
// one pgconn expects on its way in.

package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/xdg-go/scram"
)

// passPlaceholder is the password pgconn computes its proof from; the
// proof never reaches the server.
const passPlaceholder = "pgcipher-proxy: SCRAM pass-through"

// scramKeys is what a client's SCRAM login leaves for the server logins
// made on its behalf: its ClientKey and the verifier's keys.
type scramKeys struct {
	clientKey []byte
	creds     scram.StoredCredentials
}

func hmacSHA256(key, msg []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return h.Sum(nil)
}

func xorBytes(a, b []byte) []byte {
	out := make([]byte, len(a))
	subtle.XORBytes(out, a, b)
	return out
}

// clientKeyOf recovers the ClientKey from a client's proof, after the
// SCRAM server accepted it: ClientProof = ClientKey XOR
// HMAC(StoredKey, AuthMessage) (RFC 5802, 3).
func clientKeyOf(creds scram.StoredCredentials, clientFirst, serverFirst, clientFinal string) ([]byte, error) {
	// after the GS2 header: "n,," or "y,," (no channel binding here)
	gs2 := strings.SplitN(clientFirst, ",", 3)
	i := strings.LastIndex(clientFinal, ",p=")
	if len(gs2) != 3 || i < 0 {
		return nil, errors.New("SCRAM messages malformed")
	}
	bare, without, proof := gs2[2], clientFinal[:i], clientFinal[i+3:]
	p, err := base64.StdEncoding.DecodeString(proof)
	if err != nil || len(p) != sha256.Size {
		return nil, errors.New("SCRAM proof malformed")
	}
	auth := []byte(bare + "," + serverFirst + "," + without)
	key := xorBytes(p, hmacSHA256(creds.StoredKey, auth))
	if sum := sha256.Sum256(key); !hmac.Equal(sum[:], creds.StoredKey) {
		return nil, errors.New("SCRAM proof does not match the verifier")
	}
	return key, nil
}

// passThrough rewrites one server login's SCRAM exchange; its reader
// and writer wrap those pgconn's frontend uses.  Once the server has
// answered AuthenticationOk both pass everything through.
type passThrough struct {
	keys scramKeys
	// the exchange as pgconn sent and the server answered it
	clientFirstBare, serverFirst, authMessage []byte
	// reader side: a frame read and rewritten, served from out
	src  io.Reader
	out  []byte
	done bool
	// writer side: the startup message has no type byte
	dst        io.Writer
	startupOut bool
}

// buildFrontend is pgconn's BuildFrontend for a pass-through login.
func (k scramKeys) buildFrontend(r io.Reader, w io.Writer) *pgproto3.Frontend {
	p := &passThrough{keys: k, src: r, dst: w}
	return pgproto3.NewFrontend(passReader{p}, passWriter{p})
}

type passReader struct{ p *passThrough }
type passWriter struct{ p *passThrough }

func (r passReader) Read(b []byte) (int, error) {
	p := r.p
	if len(p.out) == 0 {
		if p.done {
			return p.src.Read(b)
		}
		if err := p.readFrame(); err != nil {
			return 0, err
		}
	}
	n := copy(b, p.out)
	p.out = p.out[n:]
	return n, nil
}

// readFrame reads one server message during authentication, rewriting
// the SCRAM final message.
func (p *passThrough) readFrame() error {
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(p.src, hdr); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(hdr[1:]))
	if n < 4 || n > 1<<20 {
		return fmt.Errorf("SCRAM pass-through: server message %q of length %d", hdr[0], n)
	}
	frame := make([]byte, 1+n)
	copy(frame, hdr)
	if _, err := io.ReadFull(p.src, frame[5:]); err != nil {
		return err
	}
	if hdr[0] == 'R' && n >= 8 {
		switch binary.BigEndian.Uint32(frame[5:9]) {
		case 0: // AuthenticationOk
			p.done = true
		case 11: // SASLContinue: the server-first message
			p.serverFirst = append([]byte(nil), frame[9:]...)
		case 12: // SASLFinal: "v=" ServerSignature
			if err := p.serverFinal(frame[9:]); err != nil {
				return err
			}
		}
	}
	p.out = frame
	return nil
}

// serverFinal checks the server's signature against the verifier's
// ServerKey and puts in its place the one pgconn computes from the
// placeholder password.
func (p *passThrough) serverFinal(data []byte) error {
	sig, ok := bytes.CutPrefix(data, []byte("v="))
	got, err := base64.StdEncoding.DecodeString(string(sig))
	if !ok || err != nil || p.authMessage == nil {
		return errors.New("SCRAM pass-through: malformed server-final message")
	}
	if !hmac.Equal(got, hmacSHA256(p.keys.creds.ServerKey, p.authMessage)) {
		return errors.New("SCRAM pass-through: the server's signature does not match the verifier the auth query returned")
	}
	salted, err := pbkdf2.Key(sha256.New, passPlaceholder, []byte(p.keys.creds.Salt), p.keys.creds.Iters, sha256.Size)
	if err != nil {
		return err
	}
	want := hmacSHA256(hmacSHA256(salted, []byte("Server Key")), p.authMessage)
	copy(data[2:], base64.StdEncoding.EncodeToString(want))
	return nil
}

func (w passWriter) Write(b []byte) (int, error) {
	p := w.p
	if p.done {
		return p.dst.Write(b)
	}
	// pgconn flushes whole messages: rewrite the SASL ones in place
	out := append([]byte(nil), b...)
	for i := 0; i < len(out); {
		if !p.startupOut {
			if len(out)-i < 4 {
				break
			}
			p.startupOut = true
			i += int(binary.BigEndian.Uint32(out[i:]))
			continue
		}
		if len(out)-i < 5 {
			break
		}
		n := int(binary.BigEndian.Uint32(out[i+1:]))
		if i+1+n > len(out) {
			break
		}
		if out[i] == 'p' {
			if err := p.clientMessage(out[i+5 : i+1+n]); err != nil {
				return 0, err
			}
		}
		i += 1 + n
	}
	if _, err := p.dst.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// clientMessage reads SASLInitialResponse (mechanism, length, data)
// and replaces the proof of SASLResponse.
func (p *passThrough) clientMessage(body []byte) error {
	if p.clientFirstBare == nil {
		mech, rest, ok := bytes.Cut(body, []byte{0})
		if !ok || string(mech) != "SCRAM-SHA-256" || len(rest) < 4 {
			return fmt.Errorf("SCRAM pass-through: the server asks for %q; only SCRAM-SHA-256 (without channel binding) passes through", mech)
		}
		first := rest[4:]
		if !bytes.HasPrefix(first, []byte("n,,")) {
			return errors.New("SCRAM pass-through: channel binding cannot pass through")
		}
		p.clientFirstBare = append([]byte(nil), first[3:]...)
		return nil
	}
	i := bytes.LastIndex(body, []byte(",p="))
	if i < 0 || p.serverFirst == nil {
		return errors.New("SCRAM pass-through: malformed client-final message")
	}
	if err := p.checkFactors(); err != nil {
		return err
	}
	p.authMessage = bytes.Join([][]byte{p.clientFirstBare, p.serverFirst, body[:i]}, []byte(","))
	proof := xorBytes(p.keys.clientKey, hmacSHA256(p.keys.creds.StoredKey, p.authMessage))
	enc := base64.StdEncoding.EncodeToString(proof)
	if len(enc) != len(body)-i-3 {
		return errors.New("SCRAM pass-through: malformed client-final message")
	}
	copy(body[i+3:], enc)
	return nil
}

// checkFactors: the server's salt and iteration count are the
// verifier's (another verifier: the user's password changed since the
// client logged in).
func (p *passThrough) checkFactors() error {
	var salt []byte
	iters := -1
	for _, f := range bytes.Split(p.serverFirst, []byte(",")) {
		switch {
		case bytes.HasPrefix(f, []byte("s=")):
			salt, _ = base64.StdEncoding.DecodeString(string(f[2:]))
		case bytes.HasPrefix(f, []byte("i=")):
			if n, err := strconv.Atoi(string(f[2:])); err == nil {
				iters = n
			}
		}
	}
	if string(salt) != p.keys.creds.Salt || iters != p.keys.creds.Iters {
		return errors.New("SCRAM pass-through: the server's verifier is not the one the client logged in with (password changed?)")
	}
	return nil
}

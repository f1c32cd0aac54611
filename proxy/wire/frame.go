// Message framing after startup (design 15.9): whole messages read and written as
// bytes, so that a message the proxy does not rewrite is relayed exactly
// as it came (never decoded and encoded again), and decoding into
// pgproto3's types only where the proxy looks inside.

package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgproto3"
)

// maxMessageLen bounds one message (PostgreSQL's own limit for most
// messages is 1 GB; a CopyData or DataRow may come close).
const maxMessageLen = 1<<30 + 1024

// frameReader reads whole messages: the type byte, the length and the
// body, as one byte slice of its own (callers may keep it).
type frameReader struct {
	r *bufio.Reader
}

// frameBufferSize is each direction's buffer.  A message larger than it
// passes through without being copied into it (bufio reads into and
// writes from the caller's slice then), so it only bounds how many small
// messages one system call moves.  8 KiB rather than 64 KiB: an idle
// connection's proxy RSS fell from 66 to 51 KiB (50 connections, pgbench
// -S through the proxy within the noise; design 15.11).
const frameBufferSize = 8 * 1024

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, frameBufferSize)}
}

// next returns the next message: its type and its raw bytes (header
// included; the body is raw[5:]).
func (f *frameReader) next() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(f.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[1:]))
	if n < 4 || n > maxMessageLen {
		return 0, nil, fmt.Errorf("wire: message %q of invalid length %d", hdr[0], n)
	}
	raw := make([]byte, 1+n)
	copy(raw, hdr[:])
	if _, err := io.ReadFull(f.r, raw[5:]); err != nil {
		return 0, nil, err
	}
	return hdr[0], raw, nil
}

// buffered is the number of bytes already read and not yet returned: 0
// means the peer has nothing more in flight right now.
func (f *frameReader) buffered() int { return f.r.Buffered() }

// frameWriter buffers messages for one peer.
type frameWriter struct {
	w   *bufio.Writer
	err error // a message that could not be encoded
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{w: bufio.NewWriterSize(w, frameBufferSize)}
}

// raw writes a message as it came.
func (f *frameWriter) raw(b []byte) error {
	_, err := f.w.Write(b)
	return err
}

// send encodes and writes a message of the proxy's making.
func (f *frameWriter) send(m pgproto3.Message) error {
	b, err := m.Encode(nil)
	if err != nil {
		// never a message dropped in silence: the connection ends
		f.err = fmt.Errorf("wire: encoding %T: %w", m, err)
		return f.err
	}
	return f.raw(b)
}

func (f *frameWriter) flush() error {
	if f.err != nil {
		return f.err
	}
	return f.w.Flush()
}

// decodeBackend decodes a server message (after authentication).
func decodeBackend(typ byte, body []byte) (pgproto3.BackendMessage, error) {
	var m pgproto3.BackendMessage
	switch typ {
	case '1':
		m = &pgproto3.ParseComplete{}
	case '2':
		m = &pgproto3.BindComplete{}
	case '3':
		m = &pgproto3.CloseComplete{}
	case 'A':
		m = &pgproto3.NotificationResponse{}
	case 'c':
		m = &pgproto3.CopyDone{}
	case 'C':
		m = &pgproto3.CommandComplete{}
	case 'd':
		m = &pgproto3.CopyData{}
	case 'D':
		m = &pgproto3.DataRow{}
	case 'E':
		m = &pgproto3.ErrorResponse{}
	case 'G':
		m = &pgproto3.CopyInResponse{}
	case 'H':
		m = &pgproto3.CopyOutResponse{}
	case 'I':
		m = &pgproto3.EmptyQueryResponse{}
	case 'K':
		m = &pgproto3.BackendKeyData{}
	case 'n':
		m = &pgproto3.NoData{}
	case 'N':
		m = &pgproto3.NoticeResponse{}
	case 's':
		m = &pgproto3.PortalSuspended{}
	case 'S':
		m = &pgproto3.ParameterStatus{}
	case 't':
		m = &pgproto3.ParameterDescription{}
	case 'T':
		m = &pgproto3.RowDescription{}
	case 'V':
		m = &pgproto3.FunctionCallResponse{}
	case 'W':
		m = &pgproto3.CopyBothResponse{}
	case 'Z':
		m = &pgproto3.ReadyForQuery{}
	case 'v':
		m = &pgproto3.NegotiateProtocolVersion{}
	default:
		return nil, fmt.Errorf("wire: unknown server message type %q", typ)
	}
	if err := m.Decode(body); err != nil {
		return nil, fmt.Errorf("wire: server message %q: %w", typ, err)
	}
	return m, nil
}

// decodeFrontend decodes a client message (after startup).
func decodeFrontend(typ byte, body []byte) (pgproto3.FrontendMessage, error) {
	var m pgproto3.FrontendMessage
	switch typ {
	case 'B':
		m = &pgproto3.Bind{}
	case 'C':
		m = &pgproto3.Close{}
	case 'D':
		m = &pgproto3.Describe{}
	case 'E':
		m = &pgproto3.Execute{}
	case 'F':
		m = &pgproto3.FunctionCall{}
	case 'f':
		m = &pgproto3.CopyFail{}
	case 'd':
		m = &pgproto3.CopyData{}
	case 'c':
		m = &pgproto3.CopyDone{}
	case 'H':
		m = &pgproto3.Flush{}
	case 'P':
		m = &pgproto3.Parse{}
	case 'Q':
		m = &pgproto3.Query{}
	case 'S':
		m = &pgproto3.Sync{}
	case 'X':
		m = &pgproto3.Terminate{}
	default:
		return nil, fmt.Errorf("wire: unknown client message type %q", typ)
	}
	if err := m.Decode(body); err != nil {
		return nil, fmt.Errorf("wire: client message %q: %w", typ, err)
	}
	return m, nil
}

// Message framing after startup (design 15.9): whole messages read and written as
// bytes, so that a message the proxy does not rewrite is relayed exactly
// as it came (never decoded and encoded again), and decoding into
// pgproto3's types only where the proxy looks inside.

package wire

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/jackc/pgx/v5/pgproto3"
)

// maxMessageLen bounds one message (PostgreSQL's own limit for most
// messages is 1 GB; a CopyData or DataRow may come close).
const maxMessageLen = 1<<30 + 1024

// Buffers (design 15.11): an idle connection holds none of its own.
// Each reader keeps a small buffer for the messages of a request or an
// answer that fit in it (a point select's Bind, Execute and Sync, or
// its four answers), and borrows a large one from a pool only while a
// burst that filled the small one is being read; each writer borrows
// one between its first message and its flush.  A message larger than
// the large buffer is read into its own slice and written from it
// directly, never copied through a buffer.
const (
	smallBufferSize = 512
	frameBufferSize = 8 * 1024
)

var framePool = sync.Pool{New: func() any { b := make([]byte, frameBufferSize); return &b }}

// frameReader reads whole messages: the type byte, the length and the
// body, as one byte slice of its own (callers may keep it).
type frameReader struct {
	src   io.Reader
	small [smallBufferSize]byte
	big   *[]byte // borrowed while a burst is buffered; nil otherwise
	buf   []byte  // small[:] or *big
	r, w  int     // buf[r:w] is read and not yet returned
	// burst: the last read filled the buffer it read into, so more is
	// probably on its way and the next read goes to the large buffer
	burst bool
}

func newFrameReader(r io.Reader) *frameReader {
	f := &frameReader{src: r}
	f.buf = f.small[:]
	return f
}

// fill reads until at least n bytes (n <= smallBufferSize) are buffered.
func (f *frameReader) fill(n int) error {
	for f.w-f.r < n {
		if f.burst && f.big == nil {
			f.big = framePool.Get().(*[]byte)
			f.w = copy(*f.big, f.buf[f.r:f.w])
			f.r = 0
			f.buf = *f.big
		} else if f.r > 0 {
			f.w = copy(f.buf, f.buf[f.r:f.w])
			f.r = 0
		}
		m, err := f.src.Read(f.buf[f.w:])
		f.w += m
		f.burst = f.w == len(f.buf)
		if err != nil && f.w-f.r < n {
			if err == io.EOF && f.w > f.r {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// drained gives the large buffer back once nothing is left in it (a
// burst that goes on borrows it again at its next read).
func (f *frameReader) drained() {
	if f.r < f.w {
		return
	}
	f.r, f.w = 0, 0
	if f.big != nil {
		framePool.Put(f.big)
		f.big, f.buf = nil, f.small[:]
	}
}

// next returns the next message: its type and its raw bytes (header
// included; the body is raw[5:]).
func (f *frameReader) next() (byte, []byte, error) {
	if err := f.fill(5); err != nil {
		return 0, nil, err
	}
	hdr := f.buf[f.r : f.r+5]
	typ := hdr[0]
	n := int(binary.BigEndian.Uint32(hdr[1:]))
	if n < 4 || n > maxMessageLen {
		return 0, nil, fmt.Errorf("wire: message %q of invalid length %d", typ, n)
	}
	raw := make([]byte, 1+n)
	k := copy(raw, f.buf[f.r:f.w])
	f.r += k
	if k < len(raw) {
		// the rest straight into the message's own slice
		if _, err := io.ReadFull(f.src, raw[k:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, nil, err
		}
		f.burst = false
	}
	f.drained()
	return typ, raw, nil
}

// buffered is the number of bytes already read and not yet returned: 0
// means the peer has nothing more in flight right now.
func (f *frameReader) buffered() int { return f.w - f.r }

// frameWriter buffers messages for one peer.
type frameWriter struct {
	dst io.Writer
	buf *[]byte // borrowed from the first message to the flush
	err error   // a message that could not be encoded
}

func newFrameWriter(w io.Writer) *frameWriter { return &frameWriter{dst: w} }

// raw writes a message as it came.
func (f *frameWriter) raw(b []byte) error {
	if f.buf != nil && len(*f.buf)+len(b) > cap(*f.buf) {
		if err := f.write(); err != nil {
			return err
		}
	}
	if len(b) >= frameBufferSize {
		// nothing is buffered before it now: written from its own slice
		_, err := f.dst.Write(b)
		return err
	}
	if f.buf == nil {
		f.buf = framePool.Get().(*[]byte)
		*f.buf = (*f.buf)[:0]
	}
	*f.buf = append(*f.buf, b...)
	return nil
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

// write sends what is buffered and keeps the buffer.
func (f *frameWriter) write() error {
	b := *f.buf
	*f.buf = b[:0]
	if len(b) == 0 {
		return nil
	}
	_, err := f.dst.Write(b)
	return err
}

// flush sends what is buffered and gives the buffer back.
func (f *frameWriter) flush() error {
	if f.err != nil {
		return f.err
	}
	if f.buf == nil {
		return nil
	}
	err := f.write()
	*f.buf = (*f.buf)[:cap(*f.buf)]
	framePool.Put(f.buf)
	f.buf = nil
	return err
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

// Message framing after startup (design 15.9): whole messages read and written as
// bytes, so that a message the proxy does not rewrite is relayed exactly
// as it came (never decoded and encoded again), and decoding into
// pgproto3's types only where the proxy looks inside.

package wire

import (
	"bytes"
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
// Each parser keeps a small buffer for the messages of a request or an
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

// frameParser splits the bytes of one direction into messages, pushed in
// as they arrive: the caller reads into space(), says how much with
// wrote(), and takes the whole messages with next().  It reads nothing
// itself, so that one loop over many sockets can drive a parser per
// peer as frameReader drives one from its reader.
//
// A message next returns is a view of the parser's buffer, valid until
// the next call of space (which may move what is buffered, or give the
// large buffer back): a caller that keeps a message, or anything a
// decoder took from it without copying, keeps a copy.  Messages larger
// than the large buffer come in slices of their own.
type frameParser struct {
	small [smallBufferSize]byte
	big   *[]byte // borrowed while a burst is buffered; nil otherwise
	buf   []byte  // small[:] or *big
	r, w  int     // buf[r:w] is read and not yet returned
	// burst: the last read filled the buffer it read into, so more is
	// probably on its way and the next read goes to the large buffer
	burst bool
	long  []byte // a message larger than the large buffer, being read
	longW int    // long[:longW] is read
}

func (p *frameParser) init() { p.buf = p.small[:] }

// next returns the next whole message (its type and its bytes, header
// included; the body is raw[5:]), or ok false when more must be read.
func (p *frameParser) next() (typ byte, raw []byte, ok bool, err error) {
	if p.long != nil {
		if p.longW < len(p.long) {
			return 0, nil, false, nil
		}
		raw, p.long, p.longW = p.long, nil, 0
		return raw[0], raw, true, nil
	}
	size, err := p.pending()
	if err != nil || size == 0 || p.w-p.r < size {
		if size > frameBufferSize {
			// the rest straight into the message's own slice
			p.long = make([]byte, size)
			p.longW = copy(p.long, p.buf[p.r:p.w])
			p.r = p.w
			p.burst = false
		}
		return 0, nil, false, err
	}
	raw = p.buf[p.r : p.r+size : p.r+size]
	p.r += size
	return raw[0], raw, true, nil
}

// pending is the size of the message at the front of the buffer, header
// included, or 0 while its header is incomplete.
func (p *frameParser) pending() (int, error) {
	if p.w-p.r < 5 {
		return 0, nil
	}
	n := int(binary.BigEndian.Uint32(p.buf[p.r+1:]))
	if n < 4 || n > maxMessageLen {
		return 0, fmt.Errorf("wire: message %q of invalid length %d", p.buf[p.r], n)
	}
	return 1 + n, nil
}

// space is where the next read goes: the rest of a large message, or
// the free end of the buffer, with room made for the message begun
// (call it once next has returned every whole message).
func (p *frameParser) space() []byte {
	if p.long != nil {
		return p.long[p.longW:]
	}
	if p.r == p.w {
		// nothing left: the buffer starts over and the large one goes
		// back (a read that waits holds none; a burst that goes on fills
		// the small one and borrows again)
		p.idle()
	}
	need, _ := p.pending() // an invalid length: next reports it
	need = max(need, 5)
	if p.big == nil && (p.burst || need > len(p.buf)) {
		p.big = framePool.Get().(*[]byte)
		p.w = copy(*p.big, p.buf[p.r:p.w])
		p.r = 0
		p.buf = *p.big
	} else if p.r > 0 {
		// less than a message: the read gets the whole buffer's room
		p.w = copy(p.buf, p.buf[p.r:p.w])
		p.r = 0
	}
	return p.buf[p.w:]
}

// idle gives the large buffer back when nothing is buffered (a pooled
// server connection going back to its pool: no read comes until its
// next session).  The messages next returned are no longer valid.
func (p *frameParser) idle() {
	if p.r != p.w || p.long != nil {
		return
	}
	p.r, p.w, p.burst = 0, 0, false
	if p.big != nil {
		framePool.Put(p.big)
		p.big, p.buf = nil, p.small[:]
	}
}

// wrote records n bytes read into what space returned.
func (p *frameParser) wrote(n int) {
	if p.long != nil {
		p.longW += n
		return
	}
	p.w += n
	p.burst = p.w == len(p.buf)
}

// buffered is the number of bytes read and not yet returned: 0 means
// the peer has nothing more in flight right now.
func (p *frameParser) buffered() int { return p.w - p.r + p.longW }

// frameReader reads whole messages from one reader with a frameParser:
// each is a view, valid until the next call of next.
type frameReader struct {
	src io.Reader
	frameParser
	err error // the read's error, reported once the bytes before it are
}

func newFrameReader(r io.Reader) *frameReader {
	f := &frameReader{src: r}
	f.init()
	return f
}

// next returns the next message: its type and its raw bytes (header
// included; the body is raw[5:]), valid until the next call.
func (f *frameReader) next() (byte, []byte, error) {
	for {
		typ, raw, ok, err := f.frameParser.next()
		if ok || err != nil {
			return typ, raw, err
		}
		if err, f.err = f.err, nil; err != nil {
			if err == io.EOF && f.buffered() > 0 {
				err = io.ErrUnexpectedEOF
			}
			return 0, nil, err
		}
		n, err := f.src.Read(f.space())
		f.wrote(n)
		f.err = err
	}
}

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

// frontendKeeps and backendKeeps say whether pgproto3's decoding of a
// client's or a server's message of type typ keeps slices of its bytes,
// where the others' do not (their strings and slices are their own): the
// decoders copy such a message's body first, since a message read is a
// view (frameParser) and what the proxy decodes it may keep (a portal's
// Bind, rows it sorts, COPY's rows, a result's description).
func frontendKeeps(typ byte) bool { return typ == 'B' || typ == 'd' || typ == 'F' }

func backendKeeps(typ byte) bool {
	switch typ {
	case 'D', 'T', 'C', 'd', 'V':
		return true
	}
	return false
}

// decodeBackend decodes a server message (after authentication) into a
// message of its own (decodeMessage).
func decodeBackend(typ byte, body []byte) (pgproto3.BackendMessage, error) {
	m := newBackend(typ)
	if err := decodeMessage(m, backendKeeps(typ), "server", typ, body); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeMessage decodes body into m (nil: a type unknown), copying it
// first where pgproto3 would keep slices of it (body may be a
// frameParser's view).
func decodeMessage(m pgproto3.Message, keeps bool, side string, typ byte, body []byte) error {
	if m == nil {
		return fmt.Errorf("wire: unknown %s message type %q", side, typ)
	}
	if keeps {
		body = bytes.Clone(body)
	}
	if err := m.Decode(body); err != nil {
		return fmt.Errorf("wire: %s message %q: %w", side, typ, err)
	}
	return nil
}

// newBackend is an empty server message of type typ, nil for a type
// unknown.
func newBackend(typ byte) pgproto3.BackendMessage {
	switch typ {
	case '1':
		return &pgproto3.ParseComplete{}
	case '2':
		return &pgproto3.BindComplete{}
	case '3':
		return &pgproto3.CloseComplete{}
	case 'A':
		return &pgproto3.NotificationResponse{}
	case 'c':
		return &pgproto3.CopyDone{}
	case 'C':
		return &pgproto3.CommandComplete{}
	case 'd':
		return &pgproto3.CopyData{}
	case 'D':
		return &pgproto3.DataRow{}
	case 'E':
		return &pgproto3.ErrorResponse{}
	case 'G':
		return &pgproto3.CopyInResponse{}
	case 'H':
		return &pgproto3.CopyOutResponse{}
	case 'I':
		return &pgproto3.EmptyQueryResponse{}
	case 'K':
		return &pgproto3.BackendKeyData{}
	case 'n':
		return &pgproto3.NoData{}
	case 'N':
		return &pgproto3.NoticeResponse{}
	case 's':
		return &pgproto3.PortalSuspended{}
	case 'S':
		return &pgproto3.ParameterStatus{}
	case 't':
		return &pgproto3.ParameterDescription{}
	case 'T':
		return &pgproto3.RowDescription{}
	case 'V':
		return &pgproto3.FunctionCallResponse{}
	case 'W':
		return &pgproto3.CopyBothResponse{}
	case 'Z':
		return &pgproto3.ReadyForQuery{}
	case 'v':
		return &pgproto3.NegotiateProtocolVersion{}
	}
	return nil
}

// decodeFrontend decodes a client message (after startup) into a
// message of its own (decodeMessage).
func decodeFrontend(typ byte, body []byte) (pgproto3.FrontendMessage, error) {
	m := newFrontend(typ)
	if err := decodeMessage(m, frontendKeeps(typ), "client", typ, body); err != nil {
		return nil, err
	}
	return m, nil
}

// newFrontend is an empty client message of type typ, nil for a type
// unknown.
func newFrontend(typ byte) pgproto3.FrontendMessage {
	switch typ {
	case 'B':
		return &pgproto3.Bind{}
	case 'C':
		return &pgproto3.Close{}
	case 'D':
		return &pgproto3.Describe{}
	case 'E':
		return &pgproto3.Execute{}
	case 'F':
		return &pgproto3.FunctionCall{}
	case 'f':
		return &pgproto3.CopyFail{}
	case 'd':
		return &pgproto3.CopyData{}
	case 'c':
		return &pgproto3.CopyDone{}
	case 'H':
		return &pgproto3.Flush{}
	case 'P':
		return &pgproto3.Parse{}
	case 'Q':
		return &pgproto3.Query{}
	case 'S':
		return &pgproto3.Sync{}
	case 'X':
		return &pgproto3.Terminate{}
	}
	return nil
}

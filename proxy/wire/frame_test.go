package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// chunkReader hands out its data in reads of the given sizes (the last
// size repeats), as a socket does.
type chunkReader struct {
	data  []byte
	sizes []int
	reads int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, errors.New("a read into no room")
	}
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := c.sizes[min(c.reads, len(c.sizes)-1)]
	c.reads++
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func message(typ byte, body int) []byte {
	m := make([]byte, 5+body)
	m[0] = typ
	binary.BigEndian.PutUint32(m[1:], uint32(4+body))
	for i := range body {
		m[5+i] = byte(i*7 + int(typ))
	}
	return m
}

func TestFrameReader(t *testing.T) {
	small := [][]byte{message('B', 30), message('E', 4), message('S', 0)}
	mixed := [][]byte{message('D', 100), message('D', 3000), message('C', 8), message('D', 20000),
		message('D', 600), message('Z', 1)}
	var many [][]byte
	for i := range 400 {
		many = append(many, message('D', i%50))
	}
	// 5 bytes to a header alone; 512 and 8192 the buffers', 8193 the
	// first of a slice of its own
	var edges [][]byte
	for _, size := range []int{5, 512, 513, 8192, 5, 8193, 511, 8191, 8192, 8192, 512, 20000, 5} {
		edges = append(edges, message('D', size-5))
	}
	cases := []struct {
		name  string
		msgs  [][]byte
		sizes []int
	}{
		{"request in one read", small, []int{1 << 20}},
		{"a byte at a time", small, []int{1}},
		{"header split", small, []int{3, 2, 1 << 20}},
		{"large and small, whole reads", mixed, []int{1 << 20}},
		{"large and small, odd reads", mixed, []int{700, 13, 5000, 1}},
		{"a burst of small rows", many, []int{1 << 20}},
		{"a burst in uneven reads", many, []int{511, 512, 513, 9000}},
		{"at the buffers' sizes", edges, []int{1 << 20}},
		{"at the buffers' sizes, odd reads", edges, []int{511, 3, 8191, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := &chunkReader{data: bytes.Join(c.msgs, nil), sizes: c.sizes}
			f := newFrameReader(src)
			for i, want := range c.msgs {
				typ, raw, err := f.next()
				if err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				if typ != want[0] || !bytes.Equal(raw, want) {
					t.Fatalf("message %d: got %q of %d bytes, want %q of %d", i, typ, len(raw), want[0], len(want))
				}
			}
			if f.buffered() != 0 {
				t.Fatalf("after the last message: %d bytes buffered", f.buffered())
			}
			if _, _, err := f.next(); err != io.EOF {
				t.Fatalf("at the end: %v, want EOF", err)
			}
			if f.big != nil {
				t.Fatal("the large buffer is held while waiting for the next message")
			}
		})
	}
}

// TestFrameParser pushes a stream into the parser in pieces, as an event
// loop would, and checks each message's bytes after every message of the
// same pieces was taken: views stay valid until the next read.
func TestFrameParser(t *testing.T) {
	var rows [][]byte
	for i := range 100 {
		rows = append(rows, message('D', i*13%700))
	}
	cases := []struct {
		name   string
		msgs   [][]byte
		pieces []int
	}{
		{"one piece", [][]byte{message('2', 0), message('D', 40), message('C', 8), message('Z', 1)}, []int{1 << 20}},
		{"bytes one by one", [][]byte{message('B', 30), message('E', 4), message('S', 0)}, []int{1}},
		{"over the small buffer", [][]byte{message('Q', 600), message('Q', 4000), message('S', 0)}, []int{100, 5000}},
		{"a message of its own slice", [][]byte{message('D', 10), message('D', 50000), message('Z', 1)}, []int{3000, 7}},
		{"rows of every size", rows, []int{511, 4096, 9000, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p frameParser
			p.init()
			data := bytes.Join(c.msgs, nil)
			got := 0
			for reads := 0; got < len(c.msgs); reads++ {
				var views [][]byte
				for {
					typ, raw, ok, err := p.next()
					if err != nil {
						t.Fatal(err)
					}
					if !ok {
						break
					}
					if typ != raw[0] {
						t.Fatalf("message %d: type %q, bytes begin %q", got+len(views), typ, raw[0])
					}
					views = append(views, raw)
				}
				for i, v := range views {
					if want := c.msgs[got+i]; !bytes.Equal(v, want) {
						t.Fatalf("message %d: %d bytes, not the %d sent", got+i, len(v), len(want))
					}
				}
				got += len(views)
				if got == len(c.msgs) {
					break
				}
				if len(data) == 0 {
					t.Fatalf("%d of %d messages, and nothing more to read", got, len(c.msgs))
				}
				space := p.space()
				n := min(c.pieces[min(reads, len(c.pieces)-1)], len(space), len(data))
				copy(space, data[:n])
				data = data[n:]
				p.wrote(n)
			}
			if p.buffered() != 0 || len(data) != 0 {
				t.Fatalf("%d bytes left in the parser, %d not read", p.buffered(), len(data))
			}
			p.space()
			if p.big != nil {
				t.Fatal("the large buffer is held with nothing in it")
			}
		})
	}
}

func TestFrameReaderErrors(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"end inside a header", message('Q', 10)[:3], io.ErrUnexpectedEOF},
		{"end inside a body", message('Q', 10)[:9], io.ErrUnexpectedEOF},
		{"end inside a large body", message('d', 20000)[:12000], io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFrameReader(&chunkReader{data: c.data, sizes: []int{1 << 20}})
			if _, _, err := f.next(); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	for _, bad := range [][]byte{{'Q', 0, 0, 0, 3}, {'D', 0x40, 0, 0x04, 0x01}} {
		f := newFrameReader(bytes.NewReader(bad))
		if _, _, err := f.next(); err == nil {
			t.Fatalf("a length of %d accepted", binary.BigEndian.Uint32(bad[1:]))
		}
	}
}

// timeoutReader gives its data in pieces, each followed by a timeout
// error (with the piece, or on the read after it), as a socket with a
// deadline does; the reader is read again after each.
type timeoutReader struct {
	data   []byte
	pieces []int
	with   bool // the error comes with the piece's bytes
	due    bool // the next read fails
}

var errTimeout = errors.New("i/o timeout")

func (r *timeoutReader) Read(p []byte) (int, error) {
	if r.due {
		r.due = false
		return 0, errTimeout
	}
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(r.pieces[0], len(p), len(r.data))
	if len(r.pieces) > 1 {
		r.pieces = r.pieces[1:]
	}
	copy(p, r.data[:n])
	r.data = r.data[n:]
	if r.with {
		return n, errTimeout
	}
	r.due = true
	return n, nil
}

// TestFrameReaderTimeouts: a read's error (a deadline) is reported once,
// after the messages before it, and loses no byte: the next call goes on
// with the message begun.
func TestFrameReaderTimeouts(t *testing.T) {
	msgs := [][]byte{message('B', 30), message('D', 9000), message('Z', 1), message('D', 600)}
	for _, with := range []bool{false, true} {
		f := newFrameReader(&timeoutReader{data: bytes.Join(msgs, nil), pieces: []int{7, 3000, 40, 700, 1 << 20}, with: with})
		got, timeouts := 0, 0
		for got < len(msgs) {
			_, raw, err := f.next()
			if errors.Is(err, errTimeout) {
				if timeouts++; timeouts > 20 {
					t.Fatal("timeouts without progress")
				}
				continue
			}
			if err != nil {
				t.Fatalf("message %d: %v", got, err)
			}
			if !bytes.Equal(raw, msgs[got]) {
				t.Fatalf("message %d: %d bytes, not the %d sent", got, len(raw), len(msgs[got]))
			}
			got++
		}
		if timeouts == 0 {
			t.Fatal("no timeout came through")
		}
		if _, _, err := f.next(); err != io.EOF && !errors.Is(err, errTimeout) {
			t.Fatalf("at the end: %v", err)
		}
	}
}

// TestFrameParserIdle: a pooled server connection goes back to its pool
// right after its last message, with no read after it: idle gives the
// large buffer back then.
func TestFrameParserIdle(t *testing.T) {
	f := newFrameReader(&chunkReader{data: bytes.Join([][]byte{message('D', 3000), message('Z', 1)}, nil), sizes: []int{1 << 20}})
	for range 2 {
		if _, _, err := f.next(); err != nil {
			t.Fatal(err)
		}
	}
	if f.big == nil {
		t.Fatal("the burst was not read into the large buffer")
	}
	f.idle()
	if f.big != nil || f.buffered() != 0 {
		t.Fatalf("after idle: large buffer held %v, %d bytes buffered", f.big != nil, f.buffered())
	}
}

// TestDecodingKeeps checks frontendKeeps and backendKeeps against
// pgproto3: a message decoded from bytes that are then overwritten must
// encode as before unless its type is one the lists name (a newer
// pgproto3 that keeps slices of another type fails here), and one the
// proxy decoded must encode as before whatever its type.
func TestDecodingKeeps(t *testing.T) {
	frontend := []pgproto3.FrontendMessage{
		&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s", ParameterFormatCodes: []int16{1},
			Parameters: [][]byte{[]byte("value")}, ResultFormatCodes: []int16{0}},
		&pgproto3.Close{ObjectType: 'S', Name: "s"},
		&pgproto3.CopyData{Data: []byte("row\n")},
		&pgproto3.CopyDone{},
		&pgproto3.CopyFail{Message: "failed"},
		&pgproto3.Describe{ObjectType: 'P', Name: "p"},
		&pgproto3.Execute{Portal: "p", MaxRows: 5},
		&pgproto3.Flush{},
		&pgproto3.FunctionCall{Function: 1, ArgFormatCodes: []uint16{1}, Arguments: [][]byte{[]byte("arg")}, ResultFormatCode: 1},
		&pgproto3.Parse{Name: "s", Query: "SELECT $1", ParameterOIDs: []uint32{23}},
		&pgproto3.Query{String: "SELECT 1"},
		&pgproto3.Sync{},
		&pgproto3.Terminate{},
	}
	backend := []pgproto3.BackendMessage{
		&pgproto3.BackendKeyData{ProcessID: 7, SecretKey: []byte{1, 2, 3, 4}},
		&pgproto3.BindComplete{},
		&pgproto3.CloseComplete{},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
		&pgproto3.CopyBothResponse{OverallFormat: 0, ColumnFormatCodes: []uint16{0}},
		&pgproto3.CopyData{Data: []byte("row\n")},
		&pgproto3.CopyDone{},
		&pgproto3.CopyInResponse{OverallFormat: 0, ColumnFormatCodes: []uint16{0}},
		&pgproto3.CopyOutResponse{OverallFormat: 0, ColumnFormatCodes: []uint16{0}},
		&pgproto3.DataRow{Values: [][]byte{[]byte("v"), nil}},
		&pgproto3.EmptyQueryResponse{},
		&pgproto3.ErrorResponse{Severity: "ERROR", Code: "42P01", Message: "gone"},
		&pgproto3.FunctionCallResponse{Result: []byte("r")},
		&pgproto3.NoData{},
		&pgproto3.NoticeResponse{Severity: "NOTICE", Code: "00000", Message: "note"},
		&pgproto3.NotificationResponse{PID: 1, Channel: "c", Payload: "p"},
		&pgproto3.ParameterDescription{ParameterOIDs: []uint32{23}},
		&pgproto3.ParameterStatus{Name: "n", Value: "v"},
		&pgproto3.ParseComplete{},
		&pgproto3.PortalSuspended{},
		&pgproto3.ReadyForQuery{TxStatus: 'I'},
		&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("f"), DataTypeOID: 23, DataTypeSize: 4}}},
	}
	type message interface {
		Decode([]byte) error
		Encode([]byte) ([]byte, error)
	}
	// aliases decodes m's bytes with decode, overwrites them (the
	// reader's buffer, reused) and says whether the message changed
	aliases := func(m message, decode func(byte, []byte) (message, error)) bool {
		want, err := m.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		raw := bytes.Clone(want)
		d, err := decode(raw[0], raw[5:])
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		for i := 5; i < len(raw); i++ {
			raw[i] ^= 0x5a
		}
		got, err := d.Encode(nil)
		if err != nil {
			t.Fatalf("%T after its bytes changed: %v", m, err)
		}
		return !bytes.Equal(got, want)
	}
	// pgproto3's own decoding keeps slices of exactly the types the
	// lists name; the proxy's decoders, which copy those, keep none
	check := func(m message, keeps func(byte) bool, empty func(byte) message, decode func(byte, []byte) (message, error)) {
		typ, _ := m.Encode(nil)
		byPgproto3 := aliases(m, func(typ byte, body []byte) (message, error) {
			d := empty(typ)
			return d, d.Decode(body)
		})
		if byPgproto3 != keeps(typ[0]) {
			t.Errorf("%T (%q): keeps slices of its bytes %v, the list says %v", m, typ[0], byPgproto3, keeps(typ[0]))
		}
		if aliases(m, decode) {
			t.Errorf("%T (%q): the proxy's decoding keeps slices of the reader's buffer", m, typ[0])
		}
	}
	for _, m := range frontend {
		check(m, frontendKeeps, func(typ byte) message { return newFrontend(typ) },
			func(typ byte, body []byte) (message, error) { return decodeFrontend(typ, body) })
	}
	for _, m := range backend {
		check(m, backendKeeps, func(typ byte) message { return newBackend(typ) },
			func(typ byte, body []byte) (message, error) { return decodeBackend(typ, body) })
	}
	if _, err := decodeBackend('?', nil); err == nil {
		t.Error("a server message of an unknown type decoded")
	}
	if _, err := decodeFrontend('?', nil); err == nil {
		t.Error("a client message of an unknown type decoded")
	}
}

// countingWriter counts the writes it is given.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func TestFrameWriter(t *testing.T) {
	cases := []struct {
		name   string
		msgs   [][]byte
		writes int // system calls the flush makes
	}{
		{"small messages, one write", [][]byte{message('2', 0), message('D', 40), message('C', 8), message('Z', 1)}, 1},
		{"a large message alone, written from its own slice", [][]byte{message('D', 20000)}, 1},
		{"small after large", [][]byte{message('D', 20000), message('Z', 1)}, 2},
		{"past the buffer", [][]byte{message('D', 5000), message('D', 5000), message('Z', 1)}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := &countingWriter{}
			f := newFrameWriter(w)
			for _, m := range c.msgs {
				if err := f.raw(m); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.Bytes(), bytes.Join(c.msgs, nil)) {
				t.Fatal("the bytes written are not the messages in order")
			}
			if w.writes != c.writes {
				t.Fatalf("%d writes, want %d", w.writes, c.writes)
			}
			if f.buf != nil {
				t.Fatal("the buffer is still held after the flush")
			}
		})
	}
}

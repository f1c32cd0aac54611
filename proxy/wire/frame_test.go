package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// chunkReader hands out its data in reads of the given sizes (the last
// size repeats), as a socket does.
type chunkReader struct {
	data  []byte
	sizes []int
	reads int
}

func (c *chunkReader) Read(p []byte) (int, error) {
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
			if f.buffered() != 0 || f.big != nil {
				t.Fatalf("after the last message: %d bytes buffered, large buffer held: %v", f.buffered(), f.big != nil)
			}
			if _, _, err := f.next(); err != io.EOF {
				t.Fatalf("at the end: %v, want EOF", err)
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
	bad := []byte{'Q', 0, 0, 0, 3}
	f := newFrameReader(bytes.NewReader(bad))
	if _, _, err := f.next(); err == nil {
		t.Fatal("a length under 4 was accepted")
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

// The audit log: records, their MAC chain, the file and its rotation.

package audit

import (
	"bufio"
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Column is what one statement did with one encrypted column.
type Column struct {
	Column    string `json:"column"` // its label, schema.table.column
	Access    string `json:"access"` // read or write: what the statement needed
	Decrypted int64  `json:"decrypted"`
	Encrypted int64  `json:"encrypted"`
}

// Record is one statement that used a column key (or was refused for
// want of a right).  Seq, Prev and the time are set by Log.Write.
type Record struct {
	Seq       uint64   `json:"seq"`
	Time      string   `json:"time"`
	Role      string   `json:"role"`
	Client    string   `json:"client"`
	Cert      string   `json:"cert,omitempty"`
	Database  string   `json:"database"`
	Statement string   `json:"statement"` // fingerprint of the SQL: no literal, no value
	Columns   []Column `json:"columns"`
	Outcome   string   `json:"outcome"` // ok, or the SQLSTATE the client got
	Prev      string   `json:"prev"`    // the previous record's mac (hex); 64 zeros for the first
}

// Key derives the audit MAC key from the CMK: HKDF-SHA-256(CMK, no salt,
// info = "pgcipher audit v1\0" ‖ CMK name).
func Key(cmk []byte, cmkName string) ([]byte, error) {
	if len(cmk) != 32 {
		return nil, fmt.Errorf("audit: CMK of %d bytes, want 32", len(cmk))
	}
	return hkdf.Key(sha256.New, cmk, nil, "pgcipher audit v1\x00"+cmkName, 32)
}

var zeroMAC = make([]byte, sha256.Size)

// seal returns body (a JSON object) with its mac appended: HMAC(key,
// prev ‖ body), m being HMAC-SHA-256 keyed with key.
func seal(m hash.Hash, prev, body []byte) ([]byte, []byte) {
	m.Reset()
	m.Write(prev)
	m.Write(body)
	mac := m.Sum(nil)
	line := make([]byte, 0, len(body)+80)
	line = append(line, body[:len(body)-1]...) // without its closing brace
	line = append(line, `,"mac":"`...)
	line = hex.AppendEncode(line, mac)
	line = append(line, "\"}\n"...)
	return line, mac
}

// flushEvery is how long a record may wait in the buffer; flushAt, how
// many buffered bytes make a write at once.
const (
	flushEvery = 100 * time.Millisecond
	flushAt    = 32 << 10
)

// Log is an open audit log.  Records are buffered and written at least
// every flushEvery; Write with through, and Flush, write them at once.
type Log struct {
	mu      sync.Mutex
	key     []byte
	mac     hash.Hash // HMAC-SHA-256 keyed with key, reset for each record
	body    []byte    // the record being encoded (reused)
	path    string    // "" for standard output
	out     io.Writer
	f       *os.File
	buf     *bufio.Writer // over out
	size    int64         // the file's, buffered records included
	maxSize int64         // rotate past this many bytes (0: never)
	seq     uint64
	prev    []byte
	err     error // the last write's failure, until one succeeds
	stop    chan struct{}
	closed  bool
}

// Open opens the log at path ("-" for standard output), appending; the
// chain goes on from the file's last record (its MAC must verify, so
// that a log edited while the proxy was down is not extended as if it
// were whole).
func Open(path string, maxSize int64, key []byte) (*Log, error) {
	l := &Log{key: key, mac: hmac.New(sha256.New, key), maxSize: maxSize, prev: zeroMAC, stop: make(chan struct{})}
	if path == "-" {
		l.out = os.Stdout
		l.buf = bufio.NewWriterSize(l.out, 64<<10)
	} else {
		l.path = path
		if err := l.resume(); err != nil {
			return nil, err
		}
		if err := l.openFile(); err != nil {
			return nil, err
		}
	}
	go l.flusher()
	return l, nil
}

// flusher writes buffered records every flushEvery until Close.
func (l *Log) flusher() {
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.mu.Lock()
			l.flush()
			l.mu.Unlock()
		}
	}
}

// flush writes the buffered records (caller holds l.mu).
func (l *Log) flush() error {
	if l.buf == nil || l.buf.Buffered() == 0 {
		return nil
	}
	if err := l.buf.Flush(); err != nil {
		l.err = fmt.Errorf("audit: %w", err)
		return l.err
	}
	return nil
}

// Flush writes the buffered records now.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flush()
}

// rotated returns the numbers of the rotated files FILE.N, in order
// (oldest first: rotation takes the number after the highest).
func (l *Log) rotated() []int {
	names, _ := filepath.Glob(l.path + ".*")
	var out []int
	for _, name := range names {
		if n, err := strconv.Atoi(strings.TrimPrefix(name, l.path+".")); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// resume reads the chain's head from the newest file that has records.
func (l *Log) resume() error {
	var files []string // oldest first
	for _, n := range l.rotated() {
		files = append(files, l.path+"."+strconv.Itoa(n))
	}
	files = append(files, l.path)
	// the newest records are in path, else in the highest-numbered file
	for i := len(files) - 1; i >= 0; i-- {
		head, err := Verify([]string{files[i]}, l.key, "")
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("audit: %s does not verify, so the chain cannot go on from it: %w", files[i], err)
		}
		if head.Records > 0 {
			l.seq, l.prev = head.Seq, head.MAC
			return nil
		}
	}
	return nil
}

func (l *Log) openFile() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: %w", err)
	}
	l.f, l.out, l.size = f, f, st.Size()
	l.buf = bufio.NewWriterSize(f, 64<<10)
	return nil
}

// Write appends r, chained to the record before it; through: written to
// the file (or standard output) before Write returns, with the records
// buffered before it, else within flushEvery.  An error means the record
// is not in the log (a buffered one: not yet, or not at all if a later
// write fails; the error is then that write's).
func (l *Log) Write(r *Record, through bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil && l.buf != nil && l.buf.Buffered() > 0 {
		return l.err // a failed flush leaves the buffer as it was: nothing goes after it
	}
	if l.out == nil {
		if l.closed {
			return errors.New("audit: the log is closed")
		}
		if err := l.openFile(); err != nil { // after a failed rotation
			l.err = err
			return err
		}
	}
	if l.maxSize > 0 && l.size > 0 && l.size >= l.maxSize {
		if err := l.rotate(); err != nil {
			l.err = err
			return err
		}
	}
	r.Seq = l.seq + 1
	r.Time = time.Now().UTC().Format(time.RFC3339Nano)
	r.Prev = hex.EncodeToString(l.prev)
	l.body = r.appendJSON(l.body[:0])
	line, mac := seal(l.mac, l.prev, l.body)
	n, err := l.buf.Write(line) // into the buffer, or through it at once
	l.size += int64(n)
	if err != nil {
		l.err = fmt.Errorf("audit: %w", err)
		return l.err
	}
	if through || l.buf.Buffered() >= flushAt {
		if err := l.flush(); err != nil {
			return err
		}
	}
	l.seq, l.prev, l.err = r.Seq, mac, nil
	return nil
}

// rotate renames the file to the next free FILE.N and opens a new one.
func (l *Log) rotate() error {
	n := 1
	if r := l.rotated(); len(r) > 0 {
		n = r[len(r)-1] + 1 // after the newest, even where older ones were removed
	}
	if err := l.flush(); err != nil {
		return err
	}
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	l.f, l.out, l.buf = nil, nil, nil
	if err := os.Rename(l.path, l.path+"."+strconv.Itoa(n)); err != nil {
		return fmt.Errorf("audit: rotating: %w", err)
	}
	return l.openFile()
}

// Head is the chain's newest record: its number and MAC.
type Head struct {
	Records int    // how many records were read
	Seq     uint64 // the last one's number
	MAC     []byte // and its MAC
}

func (h Head) String() string { return fmt.Sprintf("seq %d mac %x", h.Seq, h.MAC) }

// Head returns the chain's head as written so far.
func (l *Log) Head() Head {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Head{Seq: l.seq, MAC: bytes.Clone(l.prev)}
}

// Close writes what is buffered and closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		close(l.stop)
		l.closed = true
	}
	err := l.flush()
	if l.f == nil {
		return err
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f, l.out, l.buf = nil, nil, nil
	return err
}

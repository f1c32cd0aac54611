// The relay loop: server messages matched to the answers the client
// loop queued, in order.

package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/metrics"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
)

// send writes a message to the client: as it came from the server when
// it is the message being relayed, unchanged.
func (s *session) send(m pgproto3.BackendMessage) {
	if m == s.fromServer.m {
		s.clW.raw(s.fromServer.raw)
		return
	}
	s.clW.send(m)
}

// serverMsg is the server message being relayed.
type serverMsg struct {
	typ byte
	raw []byte
	m   pgproto3.BackendMessage
}

// relayFor runs the relay on the server connection up reads.  In
// transaction mode it returns when the connection goes back to its pool;
// otherwise the session is over.
func (s *session) relayFor(up *frameReader) {
	err := s.relay(up)
	if err == errReleased {
		return
	}
	close(s.relayEnded) // the client loop may wait for a lock's rows
	s.relayErr <- err
	// the session is over: wake the client loop if it waits for the
	// client (a deadline, not a close: the client may still get the
	// server's last error)
	if s.clientSock != nil {
		s.clientSock.SetReadDeadline(time.Now())
	}
}

func (s *session) relay(up *frameReader) error {
	var cur answer
	for {
		typ, raw, err := up.next()
		if err != nil {
			return err
		}
		s.clientMu.Lock()
		cur, err = s.relayOne(cur, typ, raw)
		if err == nil && s.preludeFailed != nil {
			s.clW.send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: s.preludeFailed.Code,
				Message: "pgcipher-proxy: cannot restore this session's settings on a pooled connection: " + s.preludeFailed.Message})
			err = &errPrelude{msg: s.preludeFailed.Message}
			s.clW.flush()
		}
		if err == nil && up.buffered() == 0 {
			err = s.clW.flush()
		}
		s.clientMu.Unlock()
		if err != nil {
			return err
		}
		if s.pooled != nil && typ == 'Z' && len(raw) > 5 && raw[5] == 'I' && cur == nil && up.buffered() == 0 && s.release() {
			up.idle() // no read until the next session: the large buffer goes back
			return errReleased
		}
	}
}

// relayOne handles one server message for answer cur (nil: none
// current yet) and returns the answer now current.
func (s *session) relayOne(cur answer, typ byte, raw []byte) (answer, error) {
	switch typ {
	case 'N', 'A', 'S':
		// notices, notifications and parameter changes: relayed as
		// they come, whatever is pending
		return cur, s.clW.raw(raw)
	case 'E':
		s.rolledBack.Store(true)
	case 'C':
		if bytes.HasPrefix(raw[5:], []byte("ROLLBACK")) {
			s.rolledBack.Store(true)
		}
	}
	if cur == nil {
		if cur = s.q.pop(); cur == nil {
			// nothing asked: a FATAL before the server closes, or an
			// error it sends on its own
			return nil, s.clW.raw(raw)
		}
	}
	if typ == 'D' && s.rawRow(cur, raw) {
		return cur, s.clW.raw(raw)
	}
	m, err := decodeBackend(typ, raw[5:])
	if err != nil && typ == 'D' {
		// a row that does not read may hold ciphertext: never relayed
		return cur, s.badRow(cur, err)
	}
	if err != nil {
		// a message pgproto3 cannot decode (a ParameterDescription of
		// more than 65535 parameters): nothing to rewrite in it
		s.srv.cfg.Log.Debug("relaying a message as it came", "err", err)
		return cur, s.clW.raw(raw)
	}
	s.fromServer = serverMsg{typ: typ, raw: raw, m: m}
	done, next := s.process(cur, m)
	s.fromServer = serverMsg{}
	if done {
		s.q.finish()
		s.endStat(statOf(cur))
		if typ == 'Z' && raw[5] == 'I' && s.ddlPending.Load() {
			// a catalog change is committed (or gone): catalogs read
			// before it may be stale
			s.srv.catalogs.invalidateAll()
			if s.q.empty() {
				s.ddlPending.Store(false)
			}
		}
		if typ == 'Z' {
			s.wakeDrain() // the session may be idle now
		}
		return nil, nil
	}
	return next, nil
}

// rawRow says whether a DataRow of answer a goes to the client as it
// came, never decoded: where take would relay it unchanged (a result
// without a description, or a plain one, whose rows are counted for the
// command tag as rowState's row counts them).  Every other row takes the
// decoding path (a row whose field count is not the description's fails
// there, a failed result drops the rest).
func (s *session) rawRow(a answer, raw []byte) bool {
	var rs *rowState
	switch a := a.(type) {
	case *executeAnswer:
		if a.failed {
			return false
		}
		rs = s.rowsOf(a)
	case *queryAnswer:
		if a.failed {
			return false
		}
		rs = a.rows
	default:
		return false
	}
	if rs != nil && !rs.plain {
		return false // values to decrypt, hide, recheck or sort
	}
	n, ok := rowFields(raw)
	if !ok || rs != nil && n != len(rs.fields) {
		return false // the decoding path fails it
	}
	if rs != nil {
		rs.kept++
	}
	return true
}

// rowFields is a DataRow's field count, and whether its values fill its
// body exactly (what decoding it would check), read without decoding it.
func rowFields(raw []byte) (int, bool) {
	if len(raw) < 7 {
		return 0, false
	}
	fields := int(binary.BigEndian.Uint16(raw[5:7]))
	off := 7
	for n := fields; n > 0; n-- {
		if off+4 > len(raw) {
			return 0, false
		}
		l := int(int32(binary.BigEndian.Uint32(raw[off:])))
		off += 4
		if l == -1 {
			continue
		}
		if l < 0 || l > len(raw)-off {
			return 0, false
		}
		off += l
	}
	return fields, off == len(raw)
}

// badRow answers a DataRow that does not decode: the client gets an error
// in place of the rest of its result, as for a value that does not
// decrypt; a row of no result of the client's (the proxy's own lock
// query) ends the session.
func (s *session) badRow(a answer, err error) error {
	r := resultOf(a)
	if r == nil {
		return fmt.Errorf("wire: the server sent a row that does not decode: %w", err)
	}
	if !r.failed {
		_, batch := a.(*executeAnswer)
		s.fail(r, statOf(a), batch, &rewrite.Refusal{Code: "08P01",
			Message: "pgcipher: the server sent a row that does not decode",
			Detail:  err.Error(),
			Hint:    "The proxy does not pass on a row it cannot read: the server or the connection to it is faulty."})
	}
	return nil
}

// popUntilSync drops the answers of a batch the relay stopped relaying;
// the server has sent ReadyForQuery, so the Sync is queued.
func (s *session) popUntilSync() {
	for {
		a := s.q.pop()
		if a == nil {
			return
		}
		s.q.finish()
		if _, sync := a.(*syncAnswer); sync {
			return
		}
		skipped(a)
	}
}

type relayError string

func (e relayError) Error() string { return string(e) }

const (
	errClientGone = relayError("wire: the client loop has ended")
	errReleased   = relayError("wire: the server connection went back to its pool")
	errSkipped    = relayError("wire: skipped after an error")
)

func errorFrom(r *rewrite.Refusal) *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: r.Code,
		Message: r.Message, Detail: r.Detail, Hint: r.Hint}
}

// process handles message m for answer a; it returns whether a is
// complete and the answer now current.
func (s *session) process(a answer, m pgproto3.BackendMessage) (bool, answer) {
	if _, ok := a.(*preludeAnswer); ok {
		switch m := m.(type) {
		case *pgproto3.ErrorResponse:
			s.preludeFailed = m
		case *pgproto3.ReadyForQuery:
			s.txStatus.Store(uint32(m.TxStatus))
			return true, nil
		}
		return false, a
	}
	r := resultOf(a)
	if er, ok := m.(*pgproto3.ErrorResponse); ok {
		t := statOf(a)
		if l, ok := a.(*lockAnswer); ok {
			// the lock of an UPDATE the proxy computes failed: the
			// statement ends with the server's error
			t = l.stat
			defer s.endStat(t)
		}
		switch ref := refusalOf(a); {
		case ref != nil:
			s.send(errorFrom(ref))
			s.srv.metrics.Error(metrics.Proxy, ref.Code)
			t.failed(ref.Code)
		case r != nil && r.failed:
			// the client has the proxy's error for this result
		default:
			s.send(er)
			s.srv.metrics.Error(metrics.Server, er.Code)
			t.failed(er.Code)
		}
		if r != nil {
			r.rows = nil
		}
		skipped(a)
		switch a.(type) {
		case *queryAnswer, *syncAnswer:
			return false, a // ReadyForQuery follows
		}
		// the server skips the rest of the batch: so do the answers; the
		// next message is the Sync's ReadyForQuery
		s.q.failBatch()
		return true, nil
	}
	if rfq, ok := m.(*pgproto3.ReadyForQuery); ok {
		s.txStatus.Store(uint32(rfq.TxStatus))
		switch a.(type) {
		case *queryAnswer, *syncAnswer:
		default:
			// a failed result made the relay drop the rest of a batch
			s.popUntilSync()
		}
		s.send(rfq)
		return true, nil
	}
	if r != nil && r.failed {
		// a value did not decrypt and the client got an error: in a
		// simple query the rest of that result is dropped; in a batch,
		// where the client now skips to ReadyForQuery as after any error,
		// everything up to ReadyForQuery is (the server did not fail, so
		// it goes on answering the batch's later messages)
		if _, simple := a.(*queryAnswer); simple {
			switch m.(type) {
			case *pgproto3.CommandComplete, *pgproto3.EmptyQueryResponse:
				r.failed = false
			}
		}
		return false, a
	}
	return a.take(s, m), a
}

// fail reports a value that does not decrypt and drops the rest of the
// result (never ciphertext handed on as data); in a batch, the answers
// still queued are dropped too (the relay swallows the server's messages
// up to ReadyForQuery) and the client loop's UPDATE waits end.
func (s *session) fail(r *rowsResult, t *stat, batch bool, err error) {
	ref, ok := err.(*rewrite.Refusal)
	if !ok {
		ref = computeError(err)
	}
	s.send(errorFrom(ref))
	s.srv.metrics.Error(metrics.Proxy, ref.Code)
	t.failed(ref.Code)
	r.failed = true
	r.rows = nil
	if batch {
		s.q.failBatch()
	}
}

func (e *queryAnswer) take(s *session, m pgproto3.BackendMessage) bool {
	switch m := m.(type) {
	case *pgproto3.RowDescription:
		e.rows = s.newRowState(e.plan, s.shapeOf(e.plan, m), m, nil, nil, false)
		e.rows.aud = e.stat.audit()
		s.send(e.rows.description(m, nil))
	case *pgproto3.DataRow:
		if e.rows == nil {
			s.send(m)
			return false
		}
		if err := e.rows.row(m); err != nil {
			s.fail(&e.rowsResult, e.stat, false, err)
		}
	case *pgproto3.CommandComplete:
		if e.rows != nil {
			m = e.rows.complete(m)
			e.rows = nil
		}
		e.copyOut = nil
		if e.set != nil {
			s.recordSet(e.set, e.plan.SQL)
		}
		s.send(m)
	case *pgproto3.CopyOutResponse:
		if e.plan.Copy != nil && !e.plan.Copy.From {
			e.copyOut = newCopyStream(s, e.plan.Copy)
			e.copyOut.answer = e
		}
		s.send(m)
	case *pgproto3.CopyData:
		if e.copyOut != nil {
			out, err := e.copyOut.decryptRow(m.Data)
			if err != nil {
				s.fail(&e.rowsResult, e.stat, false, err)
				return false
			}
			s.send(&pgproto3.CopyData{Data: out})
			return false
		}
		s.send(m)
	default:
		s.send(m)
	}
	return false
}

func (e *describeAnswer) take(s *session, m pgproto3.BackendMessage) bool {
	switch m := m.(type) {
	case *pgproto3.ParameterDescription:
		if !e.quiet {
			s.send(s.clientParams(e.st, m))
		}
		return false
	case *pgproto3.RowDescription:
		var sh *shape
		switch {
		case e.objType == 'S' && e.st != nil:
			e.st.desc = cloneDesc(m)
			e.st.shape = s.shapeOf(e.st.plan, e.st.desc)
			sh = e.st.shape
			if e.quiet && s.pooled != nil && e.st.srvName != "" {
				s.pooled.pool.markDescribed(e.st.srvName, e.st.desc)
			}
		case e.portal != nil && e.portal.st.shape != nil:
			sh = e.portal.st.shape
		default:
			sh = s.shapeOf(nil, m)
		}
		if !e.quiet {
			var formats []int16
			if e.portal != nil {
				formats = e.portal.formats
			}
			s.send(sh.description(m, formats))
		}
		return true
	case *pgproto3.NoData:
		if e.objType == 'S' && e.st != nil {
			e.st.desc, e.st.shape = nil, nil
			if e.quiet && s.pooled != nil && e.st.srvName != "" {
				s.pooled.pool.markDescribed(e.st.srvName, nil)
			}
		}
		if !e.quiet {
			s.send(m)
		}
		return true
	}
	s.send(m)
	return true
}

func (e *executeAnswer) take(s *session, m pgproto3.BackendMessage) bool {
	switch m := m.(type) {
	case *pgproto3.DataRow:
		if s.rowsOf(e) == nil {
			s.send(m)
			return false
		}
		if err := e.rows.row(m); err != nil {
			s.fail(&e.rowsResult, e.stat, true, err)
		}
		return false
	case *pgproto3.CommandComplete:
		if e.rows != nil {
			m = e.rows.complete(m)
		}
		if e.portal != nil && e.portal.st.set != nil {
			s.recordSet(e.portal.st.set, e.portal.st.plan.SQL)
		}
		s.send(m)
		return true
	case *pgproto3.PortalSuspended, *pgproto3.EmptyQueryResponse:
		if e.rows != nil {
			e.rows.flushRows()
		}
		s.send(m)
		return true
	}
	// COPY through the extended protocol (relations without encrypted
	// columns): CopyIn/OutResponse, CopyData, CopyDone
	s.send(m)
	return false
}

// rowsOf returns the row state of e's result, made at its first row
// (nil: the portal has no description, its rows pass as they are).
func (s *session) rowsOf(e *executeAnswer) *rowState {
	if e.rows == nil && !e.failed && e.portal != nil && e.portal.st.desc != nil {
		p := e.portal
		e.rows = s.newRowState(p.st.plan, p.st.shape, p.st.desc, p.formats, p.patterns, true)
		e.rows.params, e.rows.limits, e.rows.aud = p.params, p.limits, e.stat.audit()
	}
	return e.rows
}

// clientParams shows the client the plaintext types of encrypted
// parameters: the type it declared, or the column's plain type.
func (s *session) clientParams(st *stmt, m *pgproto3.ParameterDescription) *pgproto3.ParameterDescription {
	out := &pgproto3.ParameterDescription{ParameterOIDs: append([]uint32(nil), m.ParameterOIDs...)}
	if st != nil && st.plan.Update != nil && len(out.ParameterOIDs) > st.plan.Update.NParams {
		// a computed UPDATE's write-back has parameters of the proxy's own
		out.ParameterOIDs = out.ParameterOIDs[:st.plan.Update.NParams]
	}
	changed := len(out.ParameterOIDs) != len(m.ParameterOIDs)
	for i, oid := range out.ParameterOIDs {
		if st != nil && i < len(st.clientOIDs) && st.clientOIDs[i] != 0 {
			if s.catalog().TypeOf(oid) != nil || s.catalog().ElemOf(oid) != nil {
				out.ParameterOIDs[i], changed = st.clientOIDs[i], true
			}
			continue
		}
		if t := s.catalog().TypeOf(oid); t != nil {
			out.ParameterOIDs[i], changed = plainOID(t), true
		} else if t := s.catalog().ElemOf(oid); t != nil {
			out.ParameterOIDs[i], changed = plainArrayOID(t), true
		}
	}
	if !changed {
		return m // relayed as it came
	}
	return out
}

func cloneDesc(d *pgproto3.RowDescription) *pgproto3.RowDescription {
	out := &pgproto3.RowDescription{Fields: make([]pgproto3.FieldDescription, len(d.Fields))}
	for i, f := range d.Fields {
		f.Name = bytes.Clone(f.Name)
		out.Fields[i] = f
	}
	return out
}

// commandCount rewrites the row count of "SELECT n".
func commandCount(tag []byte, n int) []byte {
	if bytes.HasPrefix(tag, []byte("SELECT ")) {
		return strconv.AppendInt([]byte("SELECT "), int64(n), 10)
	}
	return tag
}

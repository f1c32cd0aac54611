// Computed results and UPDATE read-modify-write (design 15.8): rows whose
// fields the proxy computes from what the server returned, and the lock,
// compute and write-back of an UPDATE that sets computed values.

package wire

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/compute"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
	"github.com/pgcipher/pgcipher/proxy/values"
)

// computeFormats: the formats to ask the server for, per input, and the
// client's per output.  A field handed on comes as the client asked; what
// only the proxy reads comes as text, but an encrypted column's
// ciphertext (or array_agg of it) comes in binary where the protocol lets
// the proxy choose (ext: a Bind), sparing it base64 and array text.
func computeFormats(cp *rewrite.ComputePlan, client []int16, ext bool) (server, out []int16) {
	out = make([]int16, len(cp.Outputs))
	server = make([]int16, len(cp.Inputs))
	if ext {
		for i, in := range cp.Inputs {
			if in.Enc {
				server[i] = 1
			}
		}
	}
	for i, o := range cp.Outputs {
		out[i] = formatOf(client, i)
		if o.Expr == nil {
			server[o.In] = out[i]
		}
	}
	return server, out
}

// computeDescription describes the outputs of a computed result.
func (sh *shape) computeDescription(d *pgproto3.RowDescription, formats []int16) *pgproto3.RowDescription {
	cp := sh.compute
	out := &pgproto3.RowDescription{Fields: make([]pgproto3.FieldDescription, len(cp.Outputs))}
	_, outFmt := computeFormats(cp, formats, false)
	for i, o := range cp.Outputs {
		var f pgproto3.FieldDescription
		if o.Expr == nil && o.In < len(d.Fields) {
			f = d.Fields[o.In]
			if t := sh.fields[o.In].enc; t != nil {
				f.DataTypeOID, f.DataTypeSize, f.TypeModifier = plainOID(t), values.PlainLen(t.Plain), -1
			}
		} else {
			t := o.Expr.Type()
			f = pgproto3.FieldDescription{DataTypeOID: values.PlainOID(t), DataTypeSize: values.PlainLen(t), TypeModifier: -1}
		}
		f.Name = []byte(o.Name)
		f.Format = outFmt[i]
		out.Fields[i] = f
	}
	return out
}

// computedRow is a row kept for the proxy's sort.
type computedRow struct {
	row  *pgproto3.DataRow
	keys []compute.Value
}

// inputValue reads one value the server returned for a computation, in
// format (an encrypted column's may be binary: its ciphertext).
func (s *session) inputValue(f *field, in rewrite.Input, v []byte, format int16) (compute.Value, error) {
	if v == nil {
		return compute.Null(in.Type), nil
	}
	if !in.Enc {
		return compute.FromText(in.Type, string(v))
	}
	p, err := s.decrypt(f, v, format)
	if err != nil {
		return compute.Value{}, err
	}
	return compute.FromPayload(in.Type, p)
}

// arrayValues reads the values of a group: array_agg of a column, in
// format.
func (s *session) arrayValues(in rewrite.Input, v []byte, format int16) ([]compute.Value, error) {
	var elems [][]byte
	if format == 1 {
		var err error
		if elems, err = compute.ParseBinaryArray(v); err != nil {
			return nil, err
		}
	} else {
		texts, err := compute.ParseArray(string(v))
		if err != nil {
			return nil, err
		}
		elems = make([][]byte, len(texts))
		for j, e := range texts {
			if e != nil {
				elems[j] = []byte(*e)
			}
		}
	}
	vals := make([]compute.Value, len(elems))
	var f field // no column bound: each value's header finds its own
	for j, e := range elems {
		var err error
		if vals[j], err = s.inputValue(&f, in, e, format); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// computeRow evaluates one row of a computed result.
func (rs *rowState) computeRow(m *pgproto3.DataRow) error {
	cp := rs.plan.Compute
	if len(m.Values) != len(cp.Inputs) {
		return fmt.Errorf("row of %d fields, the computation reads %d", len(m.Values), len(cp.Inputs))
	}
	env := &compute.Env{Inputs: make([]compute.Value, len(cp.Inputs)), Arrays: make([][]compute.Value, len(cp.Inputs)), Params: rs.params}
	for i, in := range cp.Inputs {
		if in.Type == 0 {
			continue // handed on as it is
		}
		v := m.Values[i]
		if !in.Array {
			var err error
			if env.Inputs[i], err = rs.s.inputValue(&rs.fields[i], in, v, rs.serverFmt[i]); err != nil {
				return err
			}
			continue
		}
		if v == nil {
			continue // array_agg of no rows
		}
		vals, err := rs.s.arrayValues(in, v, rs.serverFmt[i])
		if err != nil {
			return err
		}
		env.Arrays[i] = vals
	}
	if cp.Having != nil {
		ok, err := cp.Having.Eval(env)
		if err != nil {
			return err
		}
		if ok.Null || ok.Int == 0 {
			return nil
		}
	}
	out := &pgproto3.DataRow{Values: make([][]byte, len(cp.Outputs))}
	for i, o := range cp.Outputs {
		if o.Expr == nil {
			v := m.Values[o.In]
			f := &rs.fields[o.In]
			if v == nil || f.enc == nil {
				out.Values[i] = bytes.Clone(v)
				continue
			}
			p, err := rs.s.decrypt(f, v, rs.serverFmt[o.In])
			if err != nil {
				return err
			}
			if out.Values[i], err = values.Result(make([]byte, 0, len(p)+8), f.enc.Plain, p, rs.outFmt[i]); err != nil {
				return err
			}
			continue
		}
		v, err := o.Expr.Eval(env)
		if err != nil {
			return err
		}
		if v.Null {
			continue
		}
		if out.Values[i], err = values.Result(nil, v.Type, v.Payload(), rs.outFmt[i]); err != nil {
			return err
		}
	}
	if !cp.Buffered() {
		rs.kept++
		rs.s.send(out)
		return nil
	}
	cr := computedRow{row: out}
	for _, k := range cp.Order {
		v, err := k.Expr.Eval(env)
		if err != nil {
			return err
		}
		cr.keys = append(cr.keys, v)
	}
	rs.computed = append(rs.computed, cr)
	return nil
}

// flushComputed sorts the kept rows, applies OFFSET and LIMIT, sends them.
func (rs *rowState) flushComputed() {
	cp := rs.plan.Compute
	sort.SliceStable(rs.computed, func(i, j int) bool {
		for k, key := range cp.Order {
			a, b := rs.computed[i].keys[k], rs.computed[j].keys[k]
			var c int
			switch {
			case a.Null && b.Null:
				continue
			case a.Null || b.Null:
				return a.Null == key.NullsFirst
			default:
				if a.Type != b.Type { // mixed numeric keys: compare as numeric
					a, _ = compute.Cast(a, colcrypt.Numeric)
					b, _ = compute.Cast(b, colcrypt.Numeric)
				}
				c = compute.Compare(a, b)
			}
			if c != 0 {
				return (c < 0) != key.Desc
			}
		}
		return false
	})
	rows := rs.computed
	rs.computed = nil
	if int64(len(rows)) > cp.Offset {
		rows = rows[cp.Offset:]
	} else {
		rows = nil
	}
	if cp.Limit >= 0 && int64(len(rows)) > cp.Limit {
		rows = rows[:cp.Limit]
	}
	for _, r := range rows {
		rs.kept++
		rs.s.send(r.row)
	}
}

// computeError turns a computation's failure into the client's error.
func computeError(err error) *rewrite.Refusal {
	var ce *compute.Error
	if errors.As(err, &ce) {
		return &rewrite.Refusal{Code: ce.Code, Message: ce.Message, Hint: ce.Hint}
	}
	return &rewrite.Refusal{Code: rewrite.CodeDecrypt,
		Message: "pgcipher: a value of an encrypted column could not be decrypted",
		Detail:  err.Error(),
		Hint:    "The value was written under another key or label, or damaged; the proxy does not pass ciphertext on as data."}
}

// The read-modify-write of an UPDATE with computed assignments.

// The proxy's own portals are unnamed: the client's portal of the
// UPDATE is bound on the server but never run (its Execute runs these),
// and a named portal would outlive the statement in a transaction.
const (
	lockPortal  = ""
	writePortal = ""
	lockPrefix  = "pgcipher.lock." // + the client's statement name
)

type lockResult struct {
	rows [][][]byte
	err  error
}

// rmw is one execution: the statement's plan, the encrypted Bind of the
// client's parameters (extended protocol) and the client's raw values.
type rmw struct {
	plan   *rewrite.Plan
	lock   string // the lock statement's name ("" unnamed)
	write  string // the write statement's name
	bound  *pgproto3.Bind
	params []compute.Value
	// writeParse: the simple protocol's write statement, parsed unnamed
	// once the lock query is done with the unnamed statement
	writeParse *pgproto3.Parse
	// stat: the statement's, ended by the first answer that ends it (the
	// lock's error, the refusal of a failed computation, the write-back;
	// in the simple protocol the Sync's answer, if none did)
	stat *stat
}

// parseLock sends the lock statement of a prepared UPDATE.
func (s *session) parseLock(name string, up *rewrite.UpdatePlan, oids []uint32) {
	lockOIDs := make([]uint32, up.NParams)
	for i := range lockOIDs {
		lockOIDs[i] = 25 // not read by the lock query: sent as NULL
		if i < len(up.LockParams) && up.LockParams[i] && i < len(oids) {
			lockOIDs[i] = oids[i]
		}
	}
	s.push(&completeAnswer{quiet: true})
	s.sendServer(&pgproto3.Parse{Name: name, Query: up.LockSQL, ParameterOIDs: lockOIDs})
}

// clientParamValues reads the client's parameters that computed expressions use.
func clientParamValues(types map[int]colcrypt.Type, st *stmt, m *pgproto3.Bind) ([]compute.Value, error) {
	out := make([]compute.Value, len(m.Parameters))
	for n, t := range types {
		i := n - 1
		if i >= len(m.Parameters) {
			continue
		}
		v := m.Parameters[i]
		if v == nil {
			out[i] = compute.Null(t)
			continue
		}
		var oid uint32
		if i < len(st.clientOIDs) {
			oid = st.clientOIDs[i]
		}
		p, err := values.Payload(t, oid, formatOf(m.ParameterFormatCodes, i), v)
		if err == nil {
			out[i], err = compute.FromPayload(t, p)
		}
		if err != nil {
			return nil, valueError(i, err)
		}
	}
	return out, nil
}

// runUpdate locks and reads the rows, computes and writes them back, in
// the client's transaction (or the implicit one that ends at its Sync).
// It reports whether the statement failed (the client has its error and
// the server's transaction is failed).
func (s *session) runUpdate(r *rmw) (failed bool, err error) {
	up := r.plan.Update
	bind := r.bound
	lockParams := make([][]byte, up.NParams)
	lockFormats := make([]int16, up.NParams)
	for i := 0; i < up.NParams && i < len(bind.Parameters); i++ {
		if i < len(up.LockParams) && up.LockParams[i] {
			lockParams[i] = bind.Parameters[i]
			lockFormats[i] = formatOf(bind.ParameterFormatCodes, i)
		}
	}
	done := make(chan lockResult, 1)
	s.push(&completeAnswer{quiet: true})
	s.sendServer(&pgproto3.Bind{DestinationPortal: lockPortal, PreparedStatement: r.lock,
		Parameters: lockParams, ParameterFormatCodes: lockFormats})
	s.push(&lockAnswer{ch: done, stat: r.stat})
	s.sendServer(&pgproto3.Execute{Portal: lockPortal})
	s.sendServer(&pgproto3.Flush{})
	if err := s.flushServer(); err != nil {
		return true, err
	}
	var res lockResult
	select {
	case res = <-done:
	case <-s.relayEnded:
		return true, errClientGone
	}
	if res.err != nil {
		return true, nil // the client has the server's error
	}
	binds, err := s.computeRows(r, res.rows)
	if err != nil {
		s.refuseInBatch(computeError(err), r.stat)
		return true, nil
	}
	if r.writeParse != nil {
		s.push(&completeAnswer{quiet: true})
		s.sendServer(r.writeParse)
	}
	s.push(&writeAnswer{writes: len(binds), stat: r.stat})
	for _, b := range binds {
		s.sendServer(b)
		s.sendServer(&pgproto3.Execute{Portal: writePortal})
	}
	return false, nil
}

// computeRows makes the write-back Bind of each locked row (one that
// matches nothing when no row was locked, for the count "UPDATE 0").
func (s *session) computeRows(r *rmw, rows [][][]byte) ([]*pgproto3.Bind, error) {
	up := r.plan.Update
	n := up.TableoidParam
	base := func() *pgproto3.Bind {
		b := &pgproto3.Bind{DestinationPortal: writePortal, PreparedStatement: r.write,
			Parameters: make([][]byte, n), ParameterFormatCodes: make([]int16, n)}
		for i := 0; i < up.NParams && i < len(r.bound.Parameters); i++ {
			b.Parameters[i] = r.bound.Parameters[i]
			b.ParameterFormatCodes[i] = formatOf(r.bound.ParameterFormatCodes, i)
		}
		return b
	}
	if len(rows) == 0 {
		return []*pgproto3.Bind{base()}, nil
	}
	var out []*pgproto3.Bind
	for _, row := range rows {
		if len(row) != 2+len(up.Inputs) {
			return nil, fmt.Errorf("locked row of %d fields, want %d", len(row), 2+len(up.Inputs))
		}
		env := &compute.Env{Inputs: make([]compute.Value, len(up.Inputs)), Params: r.params}
		for i, in := range up.Inputs {
			var err error
			if env.Inputs[i], err = s.inputValue(&field{}, in, row[2+i], 0); err != nil {
				return nil, err
			}
		}
		b := base()
		for _, set := range up.Sets {
			v, err := set.Expr.Eval(env)
			if err != nil {
				return nil, err
			}
			if v, err = compute.Cast(v, set.Type); err != nil {
				return nil, err
			}
			var p []byte
			switch {
			case v.Null:
			case set.Enc != nil:
				if p, err = set.Enc.EncryptPayload(v.Payload(), rand.Reader); err != nil {
					return nil, err
				}
				b.ParameterFormatCodes[set.Param-1] = 1
			default:
				t, err := v.Text()
				if err != nil {
					return nil, err
				}
				p = []byte(t)
			}
			b.Parameters[set.Param-1] = p
		}
		b.Parameters[up.CtidParam-1] = row[0]
		b.Parameters[up.TableoidParam-1] = row[1]
		out = append(out, b)
	}
	return out, nil
}

// take collects the locked rows.
func (e *lockAnswer) take(s *session, m pgproto3.BackendMessage) bool {
	switch m := m.(type) {
	case *pgproto3.DataRow:
		row := make([][]byte, len(m.Values))
		for i, v := range m.Values {
			if v != nil {
				row[i] = bytes.Clone(v)
			}
		}
		e.locked = append(e.locked, row)
		return false
	case *pgproto3.CommandComplete:
		e.ch <- lockResult{rows: e.locked}
		return true
	}
	return false
}

// take counts the rows written back and answers the client's Execute
// with one "UPDATE n".
func (e *writeAnswer) take(s *session, m pgproto3.BackendMessage) bool {
	cc, ok := m.(*pgproto3.CommandComplete)
	if !ok {
		return false // BindComplete
	}
	if f := bytes.Fields(cc.CommandTag); len(f) == 2 {
		n, _ := strconv.ParseInt(string(f[1]), 10, 64)
		e.updated += n
	}
	e.writes--
	if e.writes > 0 {
		return false
	}
	s.send(&pgproto3.CommandComplete{CommandTag: strconv.AppendInt([]byte("UPDATE "), e.updated, 10)})
	return true
}

// Computed results (design 15.8): rows whose fields the proxy computes
// from what the server returned (the read-modify-write of an UPDATE that
// sets computed values is in rmw.go).

package wire

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

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
func (s *session) inputValue(f *field, in rewrite.Input, v []byte, format int16, aud *auditStat) (compute.Value, error) {
	if v == nil {
		return compute.Null(in.Type), nil
	}
	if !in.Enc {
		return compute.FromText(in.Type, string(v))
	}
	p, err := s.decrypt(f, v, format, aud)
	if err != nil {
		return compute.Value{}, err
	}
	return compute.FromPayload(in.Type, p)
}

// arrayValues reads the values of a group: array_agg of a column, in
// format.
func (s *session) arrayValues(in rewrite.Input, v []byte, format int16, aud *auditStat) ([]compute.Value, error) {
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
		if vals[j], err = s.inputValue(&f, in, e, format, aud); err != nil {
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
			if env.Inputs[i], err = rs.s.inputValue(&rs.fields[i], in, v, rs.serverFmt[i], rs.aud); err != nil {
				return err
			}
			continue
		}
		if v == nil {
			continue // array_agg of no rows
		}
		vals, err := rs.s.arrayValues(in, v, rs.serverFmt[i], rs.aud)
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
			p, err := rs.s.decrypt(f, v, rs.serverFmt[o.In], rs.aud)
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
	var ref *rewrite.Refusal
	if errors.As(err, &ref) {
		return ref // a key that cannot be used, a row of another tenant
	}
	return &rewrite.Refusal{Code: rewrite.CodeDecrypt,
		Message: "pgcipher: a value of an encrypted column could not be decrypted",
		Detail:  err.Error(),
		Hint:    "The value was written under another key or label, or damaged; the proxy does not pass ciphertext on as data."}
}

// The read-modify-write of an UPDATE with computed assignments (design
// 15.8): the lock query that reads the rows FOR UPDATE, the values the
// proxy computes from them, and the write-back by ctid and tableoid, all
// in the client's transaction.

package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/compute"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
	"github.com/pgcipher/pgcipher/proxy/values"
)

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
	s.unlockPool() // the relay may need it while the client loop waits
	select {
	case res = <-done:
	case <-s.relayEnded:
		s.lockPool()
		return true, errClientGone
	}
	s.lockPool()
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
		if err := sameTenantRow(up, row); err != nil {
			return nil, err
		}
		env := &compute.Env{Inputs: make([]compute.Value, len(up.Inputs)), Params: r.params}
		for i, in := range up.Inputs {
			var err error
			if env.Inputs[i], err = s.inputValue(&field{}, in, row[2+i], 0, r.stat.audit()); err != nil {
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
				r.stat.audit().add(set.Enc.Spec().Label, colcrypt.AccessRead, 0, 1)
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

// sameTenantRow refuses a locked row whose values are under another
// tenant's key than the one a computed tenant-keyed column is written
// under (the session's, design 13.13): written back, they would move to
// the session's tenant, and a shredding of their own would miss them.
func sameTenantRow(up *rewrite.UpdatePlan, row [][]byte) error {
	var want uint32
	for _, set := range up.Sets {
		if set.Enc != nil && set.Enc.Header().IsTenant() {
			want = set.Enc.Header().KeyID
		}
	}
	if want == 0 {
		return nil
	}
	for _, v := range row[2:] {
		if v == nil {
			continue
		}
		ct, err := base64.StdEncoding.DecodeString(string(v))
		if err != nil {
			continue // not a ciphertext (a plaintext input)
		}
		if x, err := colcrypt.Parse(ct); err == nil && x.Header.IsTenant() && x.Header.KeyID != want {
			return &rewrite.Refusal{Code: rewrite.CodeTenant,
				Message: fmt.Sprintf("pgcipher: the statement updates a row of another tenant (tenant key %d) than the session's", x.Header.KeyID),
				Hint:    "Restrict the UPDATE to the session's tenant's rows (WHERE tenant = ...), or SET pgcipher.tenant to theirs."}
		}
	}
	return nil
}

// Parameters of Bind: the values of encrypted columns encrypted, whatever
// format and type the client sent them in.

package wire

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
	"github.com/pgcipher/pgcipher/proxy/values"
)

func formatOf(codes []int16, i int) int16 {
	switch len(codes) {
	case 0:
		return 0
	case 1:
		return codes[0]
	}
	if i < len(codes) {
		return codes[i]
	}
	return 0
}

func valueError(i int, err error) error {
	return &rewrite.Refusal{Code: rewrite.CodeValue,
		Message: fmt.Sprintf("pgcipher: parameter $%d is not a valid value for its encrypted column", i+1),
		Detail:  err.Error(), Hint: "Send a value of the column's plain type."}
}

// encryptParams returns the Bind to send and the plaintext LIKE patterns
// of the plan's filters.
// tenantCol: a tenant-keyed binding's crypto under a tenant's key (the
// parameters that carry their row's tenant, design 13.13).
type tenantCol func(b *catalog.Binding, tenant string) (*colcrypt.Column, error)

func encryptParams(st *stmt, m *pgproto3.Bind, tenantOf tenantCol) (*pgproto3.Bind, []string, error) {
	out := &pgproto3.Bind{DestinationPortal: m.DestinationPortal, PreparedStatement: m.PreparedStatement,
		ResultFormatCodes: m.ResultFormatCodes, Parameters: make([][]byte, len(m.Parameters)),
		ParameterFormatCodes: make([]int16, len(m.Parameters))}
	clientOID := func(i int) uint32 {
		if i < len(st.clientOIDs) {
			return st.clientOIDs[i]
		}
		return 0
	}
	text := func(i int, v []byte) (string, error) { // a LIKE pattern's text
		if formatOf(m.ParameterFormatCodes, i) == 0 {
			return string(v), nil
		}
		oid := clientOID(i)
		if oid == 0 {
			// undeclared: the client sent the type the proxy described
			// (text, for a pattern), as asyncpg does
			oid = values.PlainOID(colcrypt.Text)
		}
		return values.BinaryText(oid, v)
	}
	payloads := make([][]byte, len(m.Parameters)) // range filters' operands
	for i, v := range m.Parameters {
		f := formatOf(m.ParameterFormatCodes, i)
		out.ParameterFormatCodes[i] = f
		out.Parameters[i] = v
		if i >= len(st.plan.Params) || st.plan.Params[i] == nil || v == nil {
			continue
		}
		p := st.plan.Params[i]
		var ct []byte
		var err error
		if p.TenantParam > 0 {
			if p, err = rowTenantParam(p, m, clientOID, tenantOf); err != nil {
				return nil, nil, err
			}
		}
		switch {
		case p.Pattern:
			var s string
			if s, err = text(i, v); err == nil {
				if s, err = p.ParamPattern(s); err == nil {
					ct, err = p.Column.EncryptPattern(s, rand.Reader)
				}
			}
		case p.Array:
			ct, err = encryptArray(p, clientOID(i), f, v)
		default:
			var payload []byte
			if payload, err = modPayload(p, clientOID(i), f, v); err == nil {
				ct, err = p.EncryptPayload(payload, rand.Reader)
				payloads[i] = payload
			}
		}
		if err != nil {
			return nil, nil, valueError(i, err)
		}
		out.Parameters[i], out.ParameterFormatCodes[i] = ct, 1
	}
	var patterns []string
	for _, fl := range st.plan.Filters {
		if fl.Param == 0 {
			patterns = append(patterns, fl.Pattern)
			continue
		}
		i := fl.Param - 1
		if fl.Op != "" {
			// a range comparison's operand, in its text form; a NULL one
			// (no payload) keeps no row, as the comparison is NULL
			s := nullOperand
			if i < len(payloads) && payloads[i] != nil {
				var err error
				if s, err = colcrypt.Decode(fl.Column.Spec().Type, payloads[i]); err != nil {
					return nil, nil, valueError(i, err)
				}
			}
			patterns = append(patterns, s)
			continue
		}
		if i >= len(m.Parameters) || m.Parameters[i] == nil {
			return nil, nil, valueError(i, errors.New("a LIKE pattern is NULL"))
		}
		s, err := text(i, m.Parameters[i])
		if err == nil {
			s, err = fl.ParamPattern(s)
		}
		if err != nil {
			return nil, nil, valueError(i, err)
		}
		patterns = append(patterns, s)
	}
	return out, patterns, nil
}

var typeMap = pgtype.NewMap()

// encryptArray encrypts each element of a one-dimensional array parameter
// (= ANY($n)) and returns the binary array of the encrypted type.
func encryptArray(p *rewrite.Param, oid uint32, format int16, v []byte) ([]byte, error) {
	var elems [][]byte // nil: NULL
	var elemOID uint32
	if format == 0 {
		var strs []*string
		if err := typeMap.Scan(pgtype.TextArrayOID, 0, v, &strs); err != nil {
			return nil, fmt.Errorf("array parameter: %w", err)
		}
		for _, s := range strs {
			if s == nil {
				elems = append(elems, nil)
			} else {
				elems = append(elems, []byte(*s))
			}
		}
	} else {
		var err error
		if elems, elemOID, err = readBinaryArray(v); err != nil {
			return nil, err
		}
	}
	out := binary.BigEndian.AppendUint32(nil, 1) // ndim
	out = binary.BigEndian.AppendUint32(out, 0)  // flags, set below
	out = binary.BigEndian.AppendUint32(out, p.EncType.OID)
	out = binary.BigEndian.AppendUint32(out, uint32(len(elems)))
	out = binary.BigEndian.AppendUint32(out, 1)
	hasNull := false
	for _, e := range elems {
		if e == nil {
			hasNull = true
			out = binary.BigEndian.AppendUint32(out, 0xFFFFFFFF)
			continue
		}
		payload, err := modPayload(p, elemOID, format, e)
		if err != nil {
			return nil, err
		}
		ct, err := p.Column.EncryptPayload(payload, rand.Reader)
		if err != nil {
			return nil, err
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(ct)))
		out = append(out, ct...)
	}
	if hasNull {
		binary.BigEndian.PutUint32(out[4:], 1)
	}
	return out, nil
}

// readBinaryArray reads a one-dimensional array in PostgreSQL's binary
// array format (array_send).
func readBinaryArray(v []byte) ([][]byte, uint32, error) {
	bad := errors.New("array parameter: malformed binary array")
	if len(v) < 12 {
		return nil, 0, bad
	}
	ndim := binary.BigEndian.Uint32(v)
	elemOID := binary.BigEndian.Uint32(v[8:])
	if ndim == 0 {
		return nil, elemOID, nil
	}
	if ndim != 1 || len(v) < 20 {
		return nil, 0, errors.New("array parameter: only one-dimensional arrays are supported")
	}
	n := int(binary.BigEndian.Uint32(v[12:]))
	rest := v[20:]
	elems := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		if len(rest) < 4 {
			return nil, 0, bad
		}
		l := int32(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if l < 0 {
			elems = append(elems, nil)
			continue
		}
		if int(l) > len(rest) {
			return nil, 0, bad
		}
		elems = append(elems, rest[:l])
		rest = rest[l:]
	}
	return elems, elemOID, nil
}

// modPayload is the payload of a value of p's column, with the modifier
// of the statement's cast applied (rewrite.CastMod: varchar(n), numeric(p, s)).
func modPayload(p *rewrite.Param, oid uint32, format int16, v []byte) ([]byte, error) {
	payload, err := values.Payload(p.EncType.Plain, oid, format, v)
	if err != nil || p.Mod == nil {
		return payload, err
	}
	s, err := p.Mod.Apply(p.EncType.Plain, string(payload))
	if err != nil {
		return nil, err
	}
	return values.Encode(p.EncType.Plain, s)
}

// limits are the LIMIT (-1: none) and OFFSET the proxy applies to the rows
// a LIKE recheck keeps.
type limits struct{ limit, offset int64 }

// portalLimits reads a plan's LIMIT and OFFSET, from the Bind where they
// are parameters.
func portalLimits(st *stmt, m *pgproto3.Bind) (limits, error) {
	p := st.plan
	lim := limits{limit: p.Limit, offset: p.Offset}
	read := func(n int, none int64) (int64, error) {
		i := n - 1
		if i >= len(m.Parameters) || m.Parameters[i] == nil {
			return none, nil // LIMIT NULL: none
		}
		oid := uint32(20)
		if i < len(st.clientOIDs) && st.clientOIDs[i] != 0 {
			oid = st.clientOIDs[i]
		}
		payload, err := values.Payload(colcrypt.Int8, oid, formatOf(m.ParameterFormatCodes, i), m.Parameters[i])
		if err != nil {
			return 0, valueError(i, err)
		}
		v, err := colcrypt.Decode(colcrypt.Int8, payload)
		if err != nil {
			return 0, valueError(i, err)
		}
		k, err := strconv.ParseInt(v, 10, 64)
		if err != nil || k < 0 {
			return 0, valueError(i, fmt.Errorf("LIMIT and OFFSET must not be negative"))
		}
		return k, nil
	}
	var err error
	if p.LimitParam > 0 {
		if lim.limit, err = read(p.LimitParam, -1); err != nil {
			return lim, err
		}
	}
	if p.OffsetParam > 0 {
		lim.offset, err = read(p.OffsetParam, 0)
	}
	return lim, err
}

// withoutUnsent is the Bind to send with the parameters that only the
// proxy's computed outputs read set to NULL (rewrite.ComputePlan.Unsent):
// coalesce(c, $1) over an encrypted c must not send $1 in plaintext.
func withoutUnsent(st *stmt, m *pgproto3.Bind) *pgproto3.Bind {
	if st == nil || st.plan.Compute == nil || len(st.plan.Compute.Unsent) == 0 {
		return m
	}
	out := *m
	out.Parameters = append([][]byte(nil), m.Parameters...)
	for _, n := range st.plan.Compute.Unsent {
		if n-1 < len(out.Parameters) {
			out.Parameters[n-1] = nil
		}
	}
	return &out
}

// rowTenantParam is p with the crypto of its row's tenant, which
// parameter p.TenantParam carries (text, or binary of the tenant column's
// type or the one the client declared).
func rowTenantParam(p *rewrite.Param, m *pgproto3.Bind, clientOID func(int) uint32, tenantOf tenantCol) (*rewrite.Param, error) {
	k := p.TenantParam - 1
	if k >= len(m.Parameters) || m.Parameters[k] == nil {
		return nil, &rewrite.Refusal{Code: rewrite.CodeTenant,
			Message: fmt.Sprintf("pgcipher: parameter $%d, the row's tenant of encrypted column %s, is NULL", k+1, p.Attr.Binding.Spec.Label),
			Hint:    "Give every row its tenant."}
	}
	name := string(m.Parameters[k])
	if formatOf(m.ParameterFormatCodes, k) != 0 {
		oid := clientOID(k)
		if oid == 0 {
			oid = p.TenantOID
		}
		var err error
		if name, err = values.BinaryText(oid, m.Parameters[k]); err != nil {
			return nil, valueError(k, err)
		}
	}
	name, err := rewrite.TenantText(p.TenantOID, name)
	if err != nil {
		return nil, &rewrite.Refusal{Code: rewrite.CodeTenant,
			Message: fmt.Sprintf("pgcipher: parameter $%d, the row's tenant of encrypted column %s, %v", k+1, p.Attr.Binding.Spec.Label, err)}
	}
	col, err := tenantOf(p.Attr.Binding, name)
	if err != nil {
		return nil, err
	}
	q := *p
	q.Column = col
	return &q, nil
}

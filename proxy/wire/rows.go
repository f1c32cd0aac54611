// Results: descriptions of encrypted types shown as their plaintext
// types, values decrypted into the client's format, LIKE rechecks and
// the sort of prefix-ordered columns.

package wire

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/compute"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
	"github.com/pgcipher/pgcipher/proxy/values"
)

func plainOID(t *catalog.EncType) uint32 { return values.PlainOID(t.Plain) }

// plainArrayOID is the OID of the array of a plaintext type.
func plainArrayOID(t *catalog.EncType) uint32 { return values.PlainArrayOID(t.Plain) }

// field is how to treat one field of a result.
type field struct {
	enc     *catalog.EncType // nil: plaintext, passed through
	bound   *colcrypt.Column // the column the field comes from, if known
	binding *catalog.Binding // its binding
}

// shape is how to treat the fields of a result: computed once per
// description (a prepared statement's, kept for all its executions, or
// each result of a simple query).
type shape struct {
	fields  []field
	visible int
	resort  int // field index to sort by, -1 for none
	rtype   colcrypt.Type
	rdesc   bool
	rnulls  bool
	plain   bool // no field to decrypt, hide or sort by: rows pass as they are
	compute *rewrite.ComputePlan
}

// shapeOf works out the treatment of the fields described by d.
func (s *session) shapeOf(plan *rewrite.Plan, d *pgproto3.RowDescription) *shape {
	sh := &shape{fields: make([]field, len(d.Fields)), visible: len(d.Fields), resort: -1}
	if plan != nil && plan.Hidden > 0 && plan.Hidden <= len(d.Fields) {
		sh.visible = len(d.Fields) - plan.Hidden
	}
	cat := s.catalog()
	for i, f := range d.Fields {
		t := cat.TypeOf(f.DataTypeOID)
		if t == nil {
			continue
		}
		fp := field{enc: t}
		if r := cat.Relations[f.TableOID]; r != nil && f.TableOID != 0 {
			if at := r.AttrNum(int16(f.TableAttributeNumber)); at != nil && at.Binding != nil {
				fp.bound, _ = s.srv.cfg.Keys.Column(at.Binding)
				fp.binding = at.Binding
			}
		}
		if plan != nil && sh.resort < 0 && i < sh.visible {
			for _, r := range plan.Resorts {
				if r.Relid == f.TableOID && r.Attnum == int16(f.TableAttributeNumber) {
					sh.resort, sh.rtype, sh.rdesc, sh.rnulls = i, r.Type, r.Desc, r.NullsFirst
					break
				}
			}
		}
		sh.fields[i] = fp
	}
	if plan != nil {
		sh.compute = plan.Compute
	}
	sh.plain = sh.visible == len(d.Fields) && sh.resort < 0 && sh.compute == nil
	for _, f := range sh.fields {
		sh.plain = sh.plain && f.enc == nil
	}
	return sh
}

// rowState is one result being relayed.
type rowState struct {
	*shape
	s        *session
	plan     *rewrite.Plan
	formats  []int16 // per field, as the client asked
	patterns []string
	// operands: each range filter's operand (nil: NULL, no row passes),
	// read once from its text in patterns
	operands   []*compute.Value
	badOperand error // an operand that does not read as a value (numeric NaN): the statement fails
	buffered   []*pgproto3.DataRow
	kept       int
	skipped    int64  // rows OFFSET dropped (plan.Limited)
	limits     limits // the LIMIT and OFFSET the proxy applies (plan.Limited)
	// a computed result: formats asked of the server per input, the
	// client's per output, rows kept for the proxy's sort
	serverFmt, outFmt []int16
	computed          []computedRow
	params            []compute.Value // the client's, as computed outputs read them
	// denied: per field, why the session's role may not read its column
	// (nil: none denied, design 13.12)
	denied []error
	aud    *auditStat // the statement's audit: values decrypted (nil: no audit)
}

// newRowState starts relaying a result of shape sh; formats are the
// client's result formats (nil: those in d), patterns the LIKE patterns of
// a portal's parameters (nil: the plan's literals); ext: a portal's result
// (the proxy chose the server's formats in its Bind).
func (s *session) newRowState(plan *rewrite.Plan, sh *shape, d *pgproto3.RowDescription, formats []int16, patterns []string, ext bool) *rowState {
	rs := &rowState{shape: sh, s: s, plan: plan, patterns: patterns}
	if plan != nil {
		rs.limits = limits{limit: plan.Limit, offset: plan.Offset} // a portal's replace them
	}
	if sh.plain {
		return rs
	}
	rs.denied = s.deniedFields(sh)
	if sh.compute != nil {
		rs.serverFmt, rs.outFmt = computeFormats(sh.compute, formats, ext)
		return rs
	}
	rs.formats = make([]int16, len(d.Fields))
	for i, f := range d.Fields {
		switch {
		case len(formats) == 1:
			rs.formats[i] = formats[0]
		case len(formats) > i:
			rs.formats[i] = formats[i]
		case formats == nil:
			rs.formats[i] = f.Format
		}
	}
	if plan != nil && len(patterns) == 0 {
		for _, f := range plan.Filters {
			rs.patterns = append(rs.patterns, f.Pattern)
		}
	}
	if plan != nil {
		for k, f := range plan.Filters {
			rs.operands = append(rs.operands, nil)
			if f.Op == "" || k >= len(rs.patterns) || rs.patterns[k] == nullOperand {
				continue
			}
			if v, err := compute.FromText(f.Column.Spec().Type, rs.patterns[k]); err == nil {
				rs.operands[k] = &v
			} else {
				rs.badOperand = err
			}
		}
	}
	return rs
}

// description shows the client plaintext types and hides the proxy's
// extra fields.
func (sh *shape) description(d *pgproto3.RowDescription, formats []int16) *pgproto3.RowDescription {
	if sh.compute != nil {
		return sh.computeDescription(d, formats)
	}
	if sh.plain && sh.visible == len(d.Fields) {
		return d // relayed as it came
	}
	out := &pgproto3.RowDescription{Fields: make([]pgproto3.FieldDescription, sh.visible)}
	for i := 0; i < sh.visible; i++ {
		f := d.Fields[i]
		if t := sh.fields[i].enc; t != nil {
			f.DataTypeOID = plainOID(t)
			f.DataTypeSize = values.PlainLen(t.Plain)
			f.TypeModifier = -1
		}
		out.Fields[i] = f
	}
	return out
}

// row decrypts one row, rechecks the plan's LIKE filters, and sends it
// (or buffers it for a sort).
func (rs *rowState) row(m *pgproto3.DataRow) error {
	if len(m.Values) != len(rs.fields) {
		return fmt.Errorf("row of %d fields, description has %d", len(m.Values), len(rs.fields))
	}
	if rs.plain {
		rs.kept++
		rs.s.send(m)
		return nil
	}
	if rs.denied != nil {
		for i, err := range rs.denied {
			if err != nil {
				rs.aud.add(rs.fields[i].binding.Spec.Label, colcrypt.AccessRead, 0, 0)
				return err // NULL too: a row's existence is not what is refused, its column is
			}
		}
	}
	if rs.compute != nil {
		return rs.computeRow(m)
	}
	out := &pgproto3.DataRow{Values: make([][]byte, rs.visible)}
	for i, v := range m.Values {
		f := &rs.fields[i]
		if i >= rs.visible && v == nil {
			return nil // LIKE and NOT LIKE of NULL are NULL: the row goes
		}
		if f.enc == nil || v == nil {
			if i < rs.visible {
				out.Values[i] = v
			}
			continue
		}
		p, err := rs.s.decrypt(f, v, rs.formats[i], rs.aud)
		if err != nil {
			return err
		}
		if i >= rs.visible {
			k := i - rs.visible
			keep, err := rs.recheck(k, p)
			if err != nil {
				return err
			}
			if !keep {
				return nil
			}
			continue
		}
		// a non-nil buffer: an empty value is not NULL
		if out.Values[i], err = values.Result(make([]byte, 0, len(p)+8), f.enc.Plain, p, rs.formats[i]); err != nil {
			return err
		}
		if i == rs.resort {
			// keep the payload for the sort: appended after the values
			out.Values = append(out.Values, p)
		}
	}
	if rs.resort >= 0 {
		if len(out.Values) == rs.visible {
			out.Values = append(out.Values, nil) // NULL sort key
		}
		for i, v := range out.Values {
			if v != nil {
				out.Values[i] = bytes.Clone(v)
			}
		}
		rs.buffered = append(rs.buffered, out)
		return nil
	}
	rs.sendKept(out)
	return nil
}

// sendKept sends a row the recheck kept, within the plan's OFFSET and
// LIMIT.
func (rs *rowState) sendKept(r *pgproto3.DataRow) {
	if p := rs.plan; p != nil && p.Limited {
		lim := rs.limits
		if rs.skipped < lim.offset {
			rs.skipped++
			return
		}
		if lim.limit >= 0 && int64(rs.kept) >= lim.limit {
			return
		}
	}
	rs.kept++
	rs.s.send(r)
}

// recheck applies LIKE filter k to a decrypted value.
func (rs *rowState) recheck(k int, payload []byte) (bool, error) {
	if k >= len(rs.plan.Filters) || k >= len(rs.patterns) {
		return false, errors.New("LIKE recheck without its pattern")
	}
	f := rs.plan.Filters[k]
	if f.Op != "" {
		return rs.inRange(k, f, payload)
	}
	ok, err := like(f.Subject(string(payload)), rs.patterns[k])
	if err != nil {
		return false, err
	}
	return ok != f.Not, nil
}

// nullOperand stands in patterns for a range filter's NULL operand (no
// text form of a value holds a NUL byte).
const nullOperand = "\x00"

// inRange applies range filter k (value Op operand) to a decrypted value:
// the exact comparison the server's prefix order could only narrow.
func (rs *rowState) inRange(k int, f rewrite.Filter, payload []byte) (bool, error) {
	if rs.badOperand != nil {
		return false, rs.badOperand
	}
	op := rs.operands[k]
	if op == nil {
		return false, nil
	}
	v, err := compute.FromPayload(f.Column.Spec().Type, payload)
	if err != nil {
		return false, err
	}
	c := compute.Compare(v, *op)
	switch f.Op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	case ">=":
		return c >= 0, nil
	}
	return false, fmt.Errorf("range recheck of operator %s", f.Op)
}

// flushRows sorts and sends buffered rows.
func (rs *rowState) flushRows() {
	if rs.compute != nil {
		rs.flushComputed()
		return
	}
	if rs.resort < 0 {
		return
	}
	key := func(r *pgproto3.DataRow) []byte { return r.Values[rs.visible] }
	sort.SliceStable(rs.buffered, func(i, j int) bool {
		a, b := key(rs.buffered[i]), key(rs.buffered[j])
		if a == nil || b == nil {
			if a == nil && b == nil {
				return false
			}
			return (a == nil) == rs.rnulls
		}
		c := comparePlain(rs.rtype, a, b)
		if rs.rdesc {
			return c > 0
		}
		return c < 0
	})
	for _, r := range rs.buffered {
		r.Values = r.Values[:rs.visible]
		rs.sendKept(r)
	}
	rs.buffered = nil
}

// complete ends a result: sorted rows sent, the count fixed for rows the
// LIKE recheck dropped.
func (rs *rowState) complete(m *pgproto3.CommandComplete) *pgproto3.CommandComplete {
	rs.flushRows()
	if rs.plan != nil && (len(rs.plan.Filters) > 0 || rs.compute != nil || rs.plan.Limited) {
		return &pgproto3.CommandComplete{CommandTag: commandCount(m.CommandTag, rs.kept)}
	}
	return m
}

// comparePlain orders payloads of prefix-ordered types as PostgreSQL
// orders their values (text in C collation: bytes).
func comparePlain(t colcrypt.Type, a, b []byte) int {
	if t != colcrypt.Numeric {
		return bytes.Compare(a, b)
	}
	x, errX := compute.ParseDecimal(string(a))
	y, errY := compute.ParseDecimal(string(b))
	if errX != nil || errY != nil { // cannot happen: payloads were checked when decrypted
		return bytes.Compare(a, b)
	}
	return x.Cmp(y)
}

// decrypt returns the payload of an encrypted value as the server sent it
// (base64 text or binary).
func (s *session) decrypt(f *field, v []byte, format int16, aud *auditStat) ([]byte, error) {
	p, b, err := s.decryptValue(f, v, format)
	if err == nil && aud != nil {
		aud.decrypted(b)
	}
	return p, err
}

// decryptValue decrypts v and says which column's binding it belongs to.
func (s *session) decryptValue(f *field, v []byte, format int16) ([]byte, *catalog.Binding, error) {
	ct := v
	if format == 0 {
		ct = make([]byte, base64.StdEncoding.DecodedLen(len(v)))
		n, err := base64.StdEncoding.Decode(ct, v)
		if err != nil {
			return nil, nil, fmt.Errorf("ciphertext is not base64: %w", err)
		}
		ct = ct[:n]
	}
	x, err := colcrypt.Parse(ct)
	if err != nil {
		return nil, nil, err
	}
	if f.bound != nil && family(f.bound, f.binding) == x.Header.Identity() {
		p, err := s.decryptWith(f.bound, f.binding, ct, x.Header)
		return p, f.binding, err
	}
	var last error = errors.New("no column of this key and join group is known to the proxy")
	for _, c := range s.candidates(x.Header.Identity()) {
		p, err := s.decryptWith(c.col, c.binding, ct, x.Header)
		if err == nil {
			if denied := s.readDenied(c.binding); denied != nil {
				return nil, nil, denied
			}
			return p, c.binding, nil
		}
		last = err
	}
	return nil, nil, last
}

// family is the identity of the values of binding b, whose column key's
// crypto is col: col's header's, but for a tenant-keyed column that of
// every tenant's values (key id 0 and FlagTenant, colcrypt's Identity),
// whichever tenant's key each names (design 13.13).
func family(col *colcrypt.Column, b *catalog.Binding) colcrypt.Header {
	h := col.Header().Identity()
	if b != nil && b.TenantBy != "" {
		h.KeyID, h.Flags = 0, colcrypt.FlagTenant
	}
	return h
}

// decryptWith decrypts ct, whose header is h, with col, the crypto of
// binding b; a tenant's value with the column of the tenant key it names,
// whatever the session's tenant (a destroyed or unknown key refused as
// such: the value is not corrupt).
func (s *session) decryptWith(col *colcrypt.Column, b *catalog.Binding, ct []byte, h colcrypt.Header) ([]byte, error) {
	if h.IsTenant() {
		var err error
		if col, err = s.tenantColumnByID(b, h.KeyID); err != nil {
			return nil, err
		}
	}
	return col.DecryptPayload(ct)
}

// tenantMemo: a session's tenant columns by binding and key id, so that
// the values of a result do not each take the shared cache's lock; kept
// with the candidates (one shared catalog: a reload, a SIGHUP's after a
// shredding included, starts it again), a few hundred at most.
type tenantMemo struct {
	b  *catalog.Binding
	id uint32
}

// tenantColumnByID is binding b's column under tenant key id.
func (s *session) tenantColumnByID(b *catalog.Binding, id uint32) (*colcrypt.Column, error) {
	if s.candsCat != s.catalog().Shared() {
		s.candidates(colcrypt.Header{}) // a new shared catalog: a new memo
	}
	if col := s.tenantMemo[tenantMemo{b, id}]; col != nil {
		return col, nil
	}
	col, err := s.srv.cfg.Keys.TenantColumnByID(s.catalog(), b, id)
	if err != nil {
		return nil, rewrite.TenantRefusal(err)
	}
	if len(s.tenantMemo) >= 256 {
		clear(s.tenantMemo)
	}
	s.tenantMemo[tenantMemo{b, id}] = col
	return col, nil
}

// tenantColumnOf is the column under tenant key id of the tenant-keyed
// binding whose column key's crypto is col (a COPY TO field's).
func (s *session) tenantColumnOf(col *colcrypt.Column, h colcrypt.Header) (*colcrypt.Column, error) {
	for _, c := range s.candidates(h.Identity()) {
		if c.col == col {
			return s.tenantColumnByID(c.binding, h.KeyID)
		}
	}
	return nil, fmt.Errorf("no tenant-keyed column %s is known to the proxy", col.Spec().Label)
}

// candidate is a column whose values a result may carry.
type candidate struct {
	col     *colcrypt.Column
	binding *catalog.Binding
}

// candidates are the columns whose values carry header identity h (the
// key, type, level and join group): usually one.
func (s *session) candidates(h colcrypt.Header) []candidate {
	// the bindings are the shared catalog's: a session's own view of it
	// (another tenant, search path) changes none of them
	if shared := s.catalog().Shared(); s.cands == nil || s.candsCat != shared {
		s.cands = map[colcrypt.Header][]candidate{}
		s.tenantMemo = map[tenantMemo]*colcrypt.Column{}
		s.candsCat = shared
		for _, b := range shared.Bindings() {
			c, err := s.srv.cfg.Keys.Column(b)
			if err != nil {
				continue
			}
			s.cands[family(c, b)] = append(s.cands[family(c, b)], candidate{c, b})
		}
	}
	return s.cands[h]
}

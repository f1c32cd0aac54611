// What the analysis of one SQL string yields: the SQL to send, how to
// treat its parameters and results, and the errors it can refuse with.

package rewrite

import (
	"errors"
	"fmt"
	"io"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/compute"
)

// SQLSTATEs of the proxy's own errors (class PC, unused by PostgreSQL).
const (
	// CodeRefused: the statement uses an encrypted column in a way the
	// proxy cannot run on ciphertext; nothing was sent to the server.
	CodeRefused = "PC001"
	// CodeDecrypt: a value of an encrypted type could not be decrypted.
	CodeDecrypt = "PC002"
	// CodeKey: a column's key cannot be used (pinned binding changed,
	// key of another CMK, key does not unwrap).
	CodeKey = "PC003"
	// CodeValue: a plaintext value does not fit its encrypted column.
	CodeValue = "PC004"
	// CodeRight: the session's role lacks the right a statement needs on
	// an encrypted column (design 13.12); nothing was decrypted.
	CodeRight = "PC005"
	// CodeAudit: the audit log, which must record the statement first
	// (audit-required), cannot be written (design 15.15).
	CodeAudit = "PC006"
	// CodeTenant: a tenant-keyed column is used without a tenant the
	// proxy can encrypt for: none set, one without a key, or one it
	// cannot follow (design 13.13).
	CodeTenant = "PC007"
)

// Refusal is an error the proxy answers with instead of the server.
type Refusal struct {
	Code    string
	Message string
	Detail  string
	Hint    string
}

func (r *Refusal) Error() string { return r.Message }

// ErrRefused is what every Refusal of CodeRefused matches with errors.Is.
var ErrRefused = errors.New("statement refused on encrypted columns")

// Is makes errors.Is(r, ErrRefused) true for refusals of CodeRefused.
func (r *Refusal) Is(target error) bool { return target == ErrRefused && r.Code == CodeRefused }

func refuse(hint, format string, args ...any) *Refusal {
	return &Refusal{Code: CodeRefused, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// Param says how to encrypt the value of one parameter.
type Param struct {
	Attr    *catalog.Attr
	Column  *colcrypt.Column
	EncType *catalog.EncType
	Pattern bool // a LIKE pattern for a MATCH column: encrypted as a query
	// PatternForm: how the statement makes the pattern of the value
	PatternForm
	Array bool // = ANY($n): an array of values
	// Operand: only compared with, never stored: encrypted as a query
	// operand where the column's order format has one (EncryptOperand)
	Operand bool
	// Bound: the parameter is a lower (-1) or upper (+1) bound of a
	// rechecked range comparison on a prefix-ordered column
	// (colcrypt's EncryptBound); 0 otherwise
	Bound int
	// ArrayOID is the encrypted array type's OID when Array is set.
	ArrayOID uint32
	// Mod: a cast of the value to the column's type with a modifier
	// (varchar(n), numeric(p, s)), applied before it is encrypted
	Mod *CastMod
	// TenantParam: the parameter (1-based) that carries the row's tenant
	// of a column bound tenant_by a column (design 13.13): the value is
	// encrypted at Bind under that tenant's key, Column standing for the
	// binding only; TenantOID: the tenant column's type (a binary value)
	TenantParam int
	TenantOID   uint32
}

// CastMod is a type modifier of a cast the statement applies to a value of
// an encrypted column, which the server cannot apply to ciphertext:
// varchar(Len) truncates text to Len characters (an explicit cast does),
// numeric(Prec, Scale) rounds to Scale digits and fails past Prec.
type CastMod struct {
	Len         int32
	Prec, Scale int32
}

// Apply applies the modifier to a value of type t given as text.
func (m *CastMod) Apply(t colcrypt.Type, s string) (string, error) {
	switch {
	case m == nil:
		return s, nil
	case t == colcrypt.Text && m.Len > 0:
		if r := []rune(s); int32(len(r)) > m.Len {
			return string(r[:m.Len]), nil
		}
		return s, nil
	case t == colcrypt.Numeric && m.Prec > 0:
		d, err := compute.ParseDecimal(s)
		if err != nil {
			return "", err
		}
		if d, err = d.Typmod(m.Prec, m.Scale); err != nil {
			return "", err
		}
		return d.String(), nil
	}
	return s, nil
}

// EncryptPayload encrypts an encoded value of the parameter: as a query
// operand where the statement only compares with it, else as a value.
func (p *Param) EncryptPayload(payload []byte, rand io.Reader) ([]byte, error) {
	return encryptPayload(p.Column, payload, p.Operand, p.Bound, rand)
}

// encryptPayload is the one choice between a range's bound (bound -1 or
// +1: colcrypt's EncryptBound), a comparison's operand (EncryptOperand: a
// query at order format 2) and a value to store, for literals and
// parameters alike.
func encryptPayload(c *colcrypt.Column, payload []byte, operand bool, bound int, rand io.Reader) ([]byte, error) {
	if bound != 0 {
		return c.EncryptBound(payload, rand, bound < 0)
	}
	if operand {
		return c.EncryptOperand(payload, rand)
	}
	return c.EncryptPayload(payload, rand)
}

// Resort asks the proxy to sort a result again by the plaintext of one
// output column: ORDER BY on an ORD column whose order covers a prefix
// (text, bytea, numeric).  The server's order is right except among values
// with equal prefixes; a stable sort by the whole plaintext fixes that and
// keeps the server's order of later sort keys.
type Resort struct {
	// the column, found in the result by RowDescription's table OID and
	// attribute number
	Relid      uint32
	Attnum     int16
	Type       colcrypt.Type
	Desc       bool
	NullsFirst bool
}

// Filter is a LIKE or NOT LIKE (MATCH is a candidate test), or a range
// comparison on a prefix-ordered ORD column (Op), that the proxy rechecks
// on the decrypted value of a hidden output column.
type Filter struct {
	Hidden int // the k-th hidden field, counted from the first hidden one
	Column *colcrypt.Column
	// Op: < <= > >= for a range comparison (Pattern, or the parameter, is
	// its operand); empty for LIKE
	Op      string
	Pattern string // the LIKE pattern of a literal
	Param   int    // 1-based parameter holding the pattern, 0 for a literal
	Not     bool
	// PatternForm: a parameter's, as its Param's (a literal's pattern is
	// made whole at analysis, and its form left empty)
	PatternForm
	// ColCase: "upper" or "lower", applied to the decrypted value before
	// it is matched (upper(c) LIKE …; ILIKE: "lower")
	ColCase string
}

// LikePattern is a pattern as the client sent it, in the default form
// (backslash escapes) when the statement named another ESCAPE.
func LikePattern(s string, esc *string) (string, error) {
	if esc == nil {
		return s, nil
	}
	return colcrypt.LikeEscape(s, *esc)
}

// PatternForm is how a statement makes a LIKE pattern of a value (a
// parameter's, or a literal's at analysis): the parameter and the plan's
// filter on it share one.
type PatternForm struct {
	// Escape: the pattern's ESCAPE character ("" for none) when LIKE …
	// ESCAPE named one; the proxy reads it as colcrypt.LikeEscape does
	Escape *string
	// Prefix and Suffix: literals the statement joins to the pattern
	// ('%' || $1 || '%', SQLAlchemy's contains())
	Prefix, Suffix string
	// Case: "upper" or "lower" when the statement applies it to the
	// pattern (upper(c) LIKE upper($1)), ILIKE's "lower"; Literal: the
	// value is compared whole (upper(c) = upper($1)), its % and _ literal
	Case    string
	Literal bool
}

// ParamPattern is the whole pattern of a value s: the literals joined
// around it, the case function applied (as the server would evaluate
// upper($1) before LIKE reads it), a value compared whole written as a
// pattern, then the ESCAPE character read (the default escape form).
func (pf PatternForm) ParamPattern(s string) (string, error) {
	s = applyCase(pf.Case, pf.Prefix+s+pf.Suffix)
	if pf.Literal {
		s = escapeLike(s)
	}
	return LikePattern(s, pf.Escape)
}

// sharable: one parameter may be the pattern of two searches only where
// neither joins literals to it and both treat case alike
func (pf PatternForm) sharable(o PatternForm) bool {
	return pf.Prefix == "" && pf.Suffix == "" && o.Prefix == "" && o.Suffix == "" &&
		pf.Case == o.Case && pf.Literal == o.Literal
}

// Subject is what the filter's LIKE matches of a decrypted text value v:
// v with ColCase applied.
func (f *Filter) Subject(v string) string { return applyCase(f.ColCase, v) }

// Plan is the outcome of analysing one SQL string.
type Plan struct {
	SQL string // what to send; the original when nothing changed
	// Tenant: the session's tenant the plan encrypts for, when it uses a
	// tenant-keyed column (design 13.13); a plan is used again under
	// that tenant only
	Tenant string
	// Touches: the statement reads or writes a relation with encrypted
	// columns, so results may carry ciphertext.
	Touches bool
	Params  []*Param // index i is $i+1; nil: a plaintext parameter
	// Reload: the statement may change the catalog (DDL, bindings, keys,
	// search_path): reload it once the statement has run.
	Reload  bool
	Resorts []Resort
	Filters []Filter
	// Hidden: the number of fields appended to the select list for
	// Filters, which the client does not see.
	Hidden int
	// Limited: the LIMIT (Limit, -1 for none) and OFFSET of a query with
	// Filters, which the proxy applies to the rows the recheck keeps
	// (the server returns every candidate)
	Limited       bool
	Limit, Offset int64
	// LimitParam, OffsetParam: the parameters that give them (0: the
	// literals above), read at Bind (SQLAlchemy binds LIMIT)
	LimitParam, OffsetParam int
	Copy                    *CopyPlan
	// Compute: the proxy computes the result from the fields the
	// server returns (aggregates and expressions over encrypted columns).
	Compute *ComputePlan
	// Update: an UPDATE whose computed assignments the proxy runs as a
	// read-modify-write of the rows it locks.
	Update *UpdatePlan
	// Parsed: the statement names encrypted relations and was analysed
	// (the others pass by a substring test, cheaper than a cache).
	Parsed bool
	// Cacheable: the plan depends only on the SQL text and the catalog
	// (no literal was encrypted into it).
	Cacheable bool
	// Names: what the statement does to the session's name resolution.
	Names []NameChange
	// Statements: how many statements the SQL holds (0: not parsed).
	Statements int
	// Uses: the encrypted columns whose keys the proxy uses for the
	// statement and what for (the rights the session's role needs,
	// design 13.12); results' columns are checked as they are decrypted.
	Uses []Use
}

// Use is one encrypted column the proxy encrypts values of (Access
// write), or decrypts, compares or computes with (Access read), for a
// statement.
type Use struct {
	Binding *catalog.Binding
	Access  colcrypt.Access
	// Literals: how many of the statement's literals the proxy encrypted
	// for the column (its parameters are counted at Bind)
	Literals int
}

// use records that the statement needs access acc to binding b.
func (p *Plan) use(b *catalog.Binding, acc colcrypt.Access) {
	for i := range p.Uses {
		if p.Uses[i].Binding == b {
			p.Uses[i].Access = max(p.Uses[i].Access, acc)
			return
		}
	}
	p.Uses = append(p.Uses, Use{Binding: b, Access: acc})
}

// PostProcess reports whether result rows must be buffered or dropped.
func (p *Plan) PostProcess() bool {
	return len(p.Resorts) > 0 || len(p.Filters) > 0 || p.Compute != nil
}

// CopyPlan describes COPY FROM STDIN or TO STDOUT on a relation with
// encrypted columns: which fields of each row to encrypt or decrypt.
type CopyPlan struct {
	From      bool
	CSV       bool
	Binary    bool // COPY FROM STDIN in binary format (pgx CopyFrom)
	Delimiter byte
	Null      string
	Quote     byte
	Escape    byte
	Header    bool
	Columns   []*colcrypt.Column // per field; nil for a plaintext field
	Names     []string
}

// Fingerprint is PostgreSQL's fingerprint of sql as pg_query computes it
// (literals and values left out), or "" where sql does not parse.
func Fingerprint(sql string) string {
	fp, err := pg.Fingerprint(sql)
	if err != nil {
		return ""
	}
	return fp
}

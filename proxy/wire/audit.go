// The audit of decryptions (design 15.15): what each statement did with
// encrypted columns, counted as it runs, written as one record of
// package audit when it ends (and, with audit-required, one before it
// is sent: no value is decrypted without a record).

package wire

import (
	"errors"
	"sync"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/audit"
	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
)

// auditStat is one statement's audit, filled by the client loop until
// the statement is sent (its plan's uses, the values encrypted into it)
// and by the relay after (the values decrypted from its results).
type auditStat struct {
	statement string
	mu        sync.Mutex // COPY FROM counts in the client loop while the relay may end the statement
	cols      []audit.Column
}

// audit returns t's audit, nil where none is kept.
func (t *stat) audit() *auditStat {
	if t == nil {
		return nil
	}
	return t.aud
}

// add counts values of the column labelled label.
func (a *auditStat) add(label string, acc colcrypt.Access, decrypted, encrypted int64) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.cols {
		c := &a.cols[i]
		if c.Column == label {
			if acc == colcrypt.AccessRead {
				c.Access = acc.String()
			}
			c.Decrypted += decrypted
			c.Encrypted += encrypted
			return
		}
	}
	a.cols = append(a.cols, audit.Column{Column: label, Access: acc.String(), Decrypted: decrypted, Encrypted: encrypted})
}

// decrypted counts a value of b's column decrypted.
func (a *auditStat) decrypted(b *catalog.Binding) {
	if a != nil && b != nil {
		a.add(b.Spec.Label, colcrypt.AccessRead, 1, 0)
	}
}

// audited starts the audit of a statement the client loop is about to
// send: plan p (of client SQL sql) and the values encrypted into its
// parameters (by column label).  With audit-required, the record of its
// start is written now; a failure refuses the statement (PC006).
func (s *session) audited(t *stat, p *rewrite.Plan, sql string, params map[string]int64) *rewrite.Refusal {
	if s.srv.cfg.Audit == nil || p == nil || (!p.Touches && len(p.Uses) == 0 && p.Copy == nil) {
		return nil
	}
	a := &auditStat{statement: s.fingerprint(sql)}
	for _, u := range p.Uses {
		a.add(u.Binding.Spec.Label, u.Access, 0, int64(u.Literals))
	}
	for label, n := range params {
		a.add(label, colcrypt.AccessWrite, 0, n)
	}
	t.aud = a
	if !s.srv.cfg.AuditRequired {
		return nil
	}
	if err := s.srv.cfg.Audit.Write(s.auditRecord(a, "started"), true); err != nil {
		t.aud = nil
		return auditRefusal(err)
	}
	return nil
}

// auditRefused records a statement refused for want of a right.
func (s *session) auditRefused(sql string, err error) {
	var re *catalog.RightError
	code := rewrite.CodeRight
	a := &auditStat{statement: s.fingerprint(sql)}
	switch {
	case s.srv.cfg.Audit == nil:
		return
	case errors.As(err, &re):
		a.add(re.Label, re.Need, 0, 0)
	case errors.Is(err, catalog.ErrRightForged):
		code = rewrite.CodeKey
	default:
		return
	}
	if werr := s.srv.cfg.Audit.Write(s.auditRecord(a, code), false); werr != nil {
		s.srv.cfg.Log.Error("audit: a refusal could not be recorded", "err", werr)
	}
}

// endAudit writes the record of a statement that ended with outcome
// (ok, or the SQLSTATE the client got); a statement that touched an
// encrypted relation but decrypted and encrypted nothing has none.
func (s *session) endAudit(t *stat) {
	a := t.aud
	if a == nil {
		return
	}
	a.mu.Lock()
	cols := append([]audit.Column(nil), a.cols...)
	a.mu.Unlock()
	if len(cols) == 0 {
		return
	}
	outcome := "ok"
	if t.code != "" {
		outcome = t.code
	}
	r := s.auditRecord(a, outcome)
	r.Columns = cols
	if err := s.srv.cfg.Audit.Write(r, false); err != nil {
		s.srv.cfg.Log.Error("audit: a statement could not be recorded", "err", err)
	}
	for _, c := range cols {
		s.srv.metrics.Audited(s.user, c.Column, c.Decrypted, c.Encrypted)
	}
}

func (s *session) auditRecord(a *auditStat, outcome string) *audit.Record {
	return &audit.Record{Role: s.user, Client: s.clientAddr, Cert: s.certIdentity, Database: s.db,
		Statement: a.statement, Columns: a.cols, Outcome: outcome}
}

// fingerprint is PostgreSQL's fingerprint of a statement (pg_query's:
// no literal, no value), kept per SQL text.
func (s *session) fingerprint(sql string) string {
	if fp, ok := s.fingerprints[sql]; ok {
		return fp
	}
	fp := rewrite.Fingerprint(sql)
	if s.fingerprints == nil || len(s.fingerprints) > 1000 {
		s.fingerprints = map[string]string{}
	}
	s.fingerprints[sql] = fp
	return fp
}

// auditRefusal: the audit log cannot take the record a statement needs.
func auditRefusal(err error) *rewrite.Refusal {
	return &rewrite.Refusal{Code: rewrite.CodeAudit, Message: "pgcipher: the audit log cannot be written: " + err.Error(),
		Hint: "audit-required is on: nothing is run on encrypted columns without a record first; free the audit log's disk or fix its file, then restart the proxy."}
}

// paramCounts counts the parameters of a Bind that the proxy encrypts,
// by column label (none without an audit log).
func (s *session) paramCounts(p *rewrite.Plan, m *pgproto3.Bind) map[string]int64 {
	if s.srv.cfg.Audit == nil {
		return nil
	}
	var out map[string]int64
	for i, pr := range p.Params {
		if pr == nil || i >= len(m.Parameters) || m.Parameters[i] == nil {
			continue
		}
		if out == nil {
			out = map[string]int64{}
		}
		out[pr.Column.Spec().Label]++
	}
	return out
}

// audit is the audit of the COPY statement c streams (nil: none).
func (c *copyStream) audit() *auditStat {
	if c.answer == nil {
		return nil
	}
	return c.answer.stat.audit()
}

// Decryption rights (design 13.12): the session's role against the
// columns a statement uses (its plan's Uses) and those its results carry.

package wire

import (
	"errors"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
)

// allowed says why a plan needs a right the session's role lacks on one
// of its columns (nil: it may run); nothing of it has been sent.
func (s *session) allowed(p *rewrite.Plan) error {
	for _, u := range p.Uses {
		if err := s.srv.cfg.Keys.Allow(s.rightsCatalog(), u.Binding, s.user, u.Access); err != nil {
			return err
		}
	}
	return nil
}

// deniedFields says, per field of a result, why the role may not read
// its column (nil where every field may be read): checked per result, so
// that a right revoked since a statement was prepared counts at once.
func (s *session) deniedFields(sh *shape) []error {
	var out []error
	for i, f := range sh.fields {
		if f.binding == nil {
			continue
		}
		if err := s.readDenied(f.binding); err != nil {
			if out == nil {
				out = make([]error, len(sh.fields))
			}
			out[i] = err
		}
	}
	return out
}

// readDenied is the refusal of decrypting a value of b's column, or nil.
func (s *session) readDenied(b *catalog.Binding) error {
	if err := s.srv.cfg.Keys.Allow(s.rightsCatalog(), b, s.user, colcrypt.AccessRead); err != nil {
		return rightRefusal(err)
	}
	return nil
}

// rightRefusal is the client's error for a missing right (PC005) or a
// right that does not verify (PC003, as a changed binding).
func rightRefusal(err error) *rewrite.Refusal {
	var re *catalog.RightError
	if errors.As(err, &re) {
		return &rewrite.Refusal{Code: rewrite.CodeRight, Message: "pgcipher: permission denied: " + re.Error(),
			Hint: "The column's owner grants rights with pgcipher-keys grant (design 13.12); nothing was decrypted."}
	}
	return &rewrite.Refusal{Code: rewrite.CodeKey, Message: "pgcipher: " + err.Error(),
		Hint: "Only rows that pgcipher-keys signed count: check pgcipher.column_rights, and sign the right again."}
}

// mayRun checks a prepared statement's plan against the rights as they
// are now; a refusal is recorded, answered in the batch, and false
// returned.
func (s *session) mayRun(p *rewrite.Plan, sql string) bool {
	err := s.allowed(p)
	if err == nil {
		return true
	}
	s.auditRefused(sql, err)
	s.refuseInBatch(rightRefusal(err), nil)
	return false
}

// rightsCatalog is the catalog whose grants count: rightsCat, or the
// session's own before one was stored.
func (s *session) rightsCatalog() *catalog.Catalog {
	if c := s.rightsCat.Load(); c != nil {
		return c
	}
	return s.catalog()
}

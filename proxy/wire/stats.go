// What the metrics and the debug log see of each statement: what the
// proxy did with it, the error the client got, and how long it took.
// Nothing here holds a value of an encrypted column: the SQL kept is the
// one sent to the server, in which those values are ciphertext (design
// 15.11).

package wire

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/pgcipher/pgcipher/proxy/metrics"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
)

// stat is one statement: a simple Query message, an Execute, or an
// extended-protocol message the proxy refused.  The client loop makes it
// when it decides the outcome; the relay ends it with the answer that
// completes the statement.
type stat struct {
	outcome metrics.Outcome
	code    string // the SQLSTATE of a refusal, or of the first error the client got
	sql     string // as sent to the server, kept only for the debug log
	start   time.Time
	ended   atomic.Bool
	aud     *auditStat // nil: no audit record (design 15.15)
}

// newStat starts a statement's stat; sql is what the server is sent.
func (s *session) newStat(o metrics.Outcome, code, sql string, start time.Time) *stat {
	t := &stat{outcome: o, code: code, start: start}
	if o != metrics.Refused && s.srv.cfg.Log.Enabled(context.Background(), slog.LevelDebug) {
		t.sql = sql
	}
	return t
}

// outcomeOf says what the proxy does with a planned statement whose
// client SQL was sent.
func outcomeOf(p *rewrite.Plan, sent string) metrics.Outcome {
	switch {
	case p == nil || !p.Parsed:
		return metrics.Passed
	case p.Compute != nil || p.Update != nil:
		return metrics.Computed
	case p.Touches || p.Copy != nil || p.SQL != sent || hasEncrypted(p.Params):
		return metrics.Rewritten
	}
	return metrics.Passed
}

func hasEncrypted(params []*rewrite.Param) bool {
	for _, p := range params {
		if p != nil {
			return true
		}
	}
	return false
}

// failed records the first error the client got for a statement.
func (t *stat) failed(code string) {
	if t != nil && t.code == "" {
		t.code = code
	}
}

// endStat counts a statement once its answer is complete (once only:
// an UPDATE the proxy computes has answers that may each end it).
func (s *session) endStat(t *stat) {
	if t == nil || t.ended.Swap(true) {
		return
	}
	d := time.Since(t.start)
	s.srv.metrics.Statement(t.outcome, t.code, d)
	if t.aud != nil {
		s.endAudit(t)
	}
	log := s.srv.cfg.Log
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{slog.String("outcome", string(t.outcome)), slog.Duration("duration", d),
		slog.String("database", s.db), slog.String("user", s.user)}
	if t.code != "" {
		attrs = append(attrs, slog.String("sqlstate", t.code))
	}
	if t.sql != "" {
		// never a refused statement's text: it may hold plaintext the
		// proxy did not encrypt
		attrs = append(attrs, slog.String("sql", t.sql))
	}
	log.LogAttrs(context.Background(), slog.LevelDebug, "statement", attrs...)
}

// statOf returns the stat an answer ends when it is complete (a
// lockAnswer's ends only when the lock fails: process sees to it).
func statOf(a answer) *stat {
	switch a := a.(type) {
	case *queryAnswer:
		return a.stat
	case *executeAnswer:
		return a.stat
	case *refusedAnswer:
		return a.stat
	case *writeAnswer:
		return a.stat
	case *syncAnswer:
		return a.stat
	}
	return nil
}

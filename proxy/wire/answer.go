// The answers the relay expects: one small type per kind of message the
// proxy sends the server, each knowing what to do with the server's
// messages for it.  The client loop queues one per message, in the order
// the messages are sent (queue.go); the relay takes the server's messages
// for the answer at the head of the queue (relay.go).

package wire

import (
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/rewrite"
)

// answer is what the server will answer to one message.
type answer interface {
	// take handles one of the server's messages for this answer (not
	// ErrorResponse or ReadyForQuery: process handles those) and reports
	// whether the answer is complete.
	take(s *session, m pgproto3.BackendMessage) bool
}

// rowsResult is the part of an answer that carries rows.
type rowsResult struct {
	rows   *rowState
	failed bool // a value did not decrypt: drop the rest of the result
}

type (
	// queryAnswer: a simple query (or a FunctionCall), everything up to
	// ReadyForQuery.
	queryAnswer struct {
		plan    *rewrite.Plan
		refused *rewrite.Refusal // the proxy's error in place of the server's
		// refusedLater: an error found after the query was sent (a COPY
		// row that does not encrypt), set by the client loop
		refusedLater atomic.Pointer[rewrite.Refusal]
		rowsResult
		copyOut *copyStream
		stat    *stat
		// set: a session-level SET to record once it has run
		// (transaction mode)
		set *rewrite.SessionEffect
	}

	// completeAnswer: ParseComplete, BindComplete or CloseComplete.
	completeAnswer struct {
		quiet bool // the proxy's own message: not relayed
	}

	// describeAnswer: [ParameterDescription] RowDescription | NoData.
	describeAnswer struct {
		objType byte
		st      *stmt
		portal  *portal
		quiet   bool // the proxy's own Describe after Parse
	}

	// executeAnswer: DataRow* then CommandComplete, PortalSuspended or
	// EmptyQueryResponse (or COPY's messages, passed on).
	executeAnswer struct {
		portal *portal
		rowsResult
		stat *stat
	}

	// syncAnswer: ReadyForQuery (stat: the simple query of an UPDATE
	// the proxy computes, which it ends).
	syncAnswer struct {
		stat *stat
	}

	// refusedAnswer: the error of the harmless failing message sent for
	// a statement the proxy refused.
	refusedAnswer struct {
		refused *rewrite.Refusal
		stat    *stat
	}

	// lockAnswer: the rows an UPDATE locks and reads, DataRow* then
	// CommandComplete, handed to the client loop.
	lockAnswer struct {
		ch     chan lockResult
		locked [][][]byte
		stat   *stat // the Execute's, ended here if the lock fails
	}

	// writeAnswer: an UPDATE's per-row write-backs, (BindComplete
	// CommandComplete) × writes, answered to the client as one.
	writeAnswer struct {
		writes  int
		updated int64
		stat    *stat
	}
)

func (a *completeAnswer) take(s *session, m pgproto3.BackendMessage) bool {
	if !a.quiet {
		s.send(m)
	}
	return true
}

func (*syncAnswer) take(s *session, m pgproto3.BackendMessage) bool {
	s.send(m)
	return false
}

func (*refusedAnswer) take(s *session, m pgproto3.BackendMessage) bool {
	s.send(m)
	return false
}

// resultOf returns the rows part of an answer, or nil.
func resultOf(a answer) *rowsResult {
	switch a := a.(type) {
	case *queryAnswer:
		return &a.rowsResult
	case *executeAnswer:
		return &a.rowsResult
	}
	return nil
}

// refusalOf returns the proxy's error to give in place of the server's.
func refusalOf(a answer) *rewrite.Refusal {
	switch a := a.(type) {
	case *refusedAnswer:
		return a.refused
	case *queryAnswer:
		if a.refused != nil {
			return a.refused
		}
		return a.refusedLater.Load()
	}
	return nil
}

// skippable: the server skips this message after an error in its batch
// (every message up to the Sync).
func skippable(a answer) bool {
	_, sync := a.(*syncAnswer)
	return !sync
}

// skipped tells a waiting client loop that its message was skipped (and
// a pooled connection's statement cache that a Parse did not happen).
func skipped(a answer) {
	if p, ok := a.(*parseAnswer); ok {
		p.entry.state.CompareAndSwap(stmtPending, stmtFailed)
	}
	if l, ok := a.(*lockAnswer); ok {
		select {
		case l.ch <- lockResult{err: errSkipped}:
		default:
		}
	}
}

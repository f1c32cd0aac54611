// The queue of answers between the client loop and the relay: one
// per message the server will answer, in the order the messages were
// sent.  It has no bound (the client loop never waits for the relay, so
// no batch size can deadlock them), and it knows the server's rule for a
// failed batch: after an error the server skips every message up to the
// next Sync, so their answers are dropped, and those the client loop
// pushes later in the same batch are dropped as they come.

package wire

import "sync"

type queue struct {
	mu sync.Mutex
	// items[head:] are queued; the array is kept between batches while
	// small (a transaction's answers each needed an allocation when it
	// was given back at every empty queue), given back when large
	items []answer
	head  int
	// skipping: a batch failed and its Sync has not been pushed yet
	skipping bool
	closed   bool
	// pending: answers pushed and not yet complete (queued, or the
	// relay's current one)
	pending int
}

// push adds the answer of a message about to be sent; it reports
// false when the server will skip that message (the batch has failed).
func (q *queue) push(a answer) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.skipping && skippable(a) {
		skipped(a)
		return false
	}
	if !skippable(a) {
		q.skipping = false // the Sync ends the batch
	}
	if q.head > 0 && len(q.items) == cap(q.items) {
		// full, with taken slots before head: a pipelining client
		// never empties the queue, so move the live answers down
		// rather than grow the array by the dead ones
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, a)
	q.pending++
	return true
}

// finish: the relay completed an answer it popped.
func (q *queue) finish() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending--
}

// pop returns the oldest answer, or nil when none is pending (a
// message the client did not ask for: a FATAL, or a notice).
func (q *queue) pop() answer {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		return nil
	}
	e := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	q.compact()
	return e
}

// queueKeep: the largest array an empty queue keeps (a batch of this
// many answers or fewer allocates nothing in the next one).
const queueKeep = 16

// compact starts the array over once everything in it was taken.
func (q *queue) compact() {
	if q.head < len(q.items) {
		return
	}
	q.head = 0
	if cap(q.items) > queueKeep {
		q.items = nil // let a large array go
	} else {
		q.items = q.items[:0]
	}
}

// empty: no answer is pending, the relay's current one included (what
// the server did with every message sent is known).
func (q *queue) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending == 0
}

// failBatch drops the answers the server will skip after an error
// in a batch: everything up to the next Sync, including those not yet
// pushed.
func (q *queue) failBatch() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head < len(q.items) {
		a := q.items[q.head]
		if !skippable(a) {
			return // the Sync
		}
		skipped(a)
		q.items[q.head] = nil
		q.head++
		q.pending--
	}
	q.compact()
	q.skipping = true
}

// close ends the queue: answers still waiting are told.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, a := range q.items[q.head:] {
		skipped(a)
	}
	q.items, q.head, q.closed, q.pending = nil, 0, true, 0
}

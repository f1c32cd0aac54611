package wire

import "testing"

// TestQueue: answers come out in the order pushed; a failed batch drops
// its answers up to the Sync, those pushed later in it too; an emptied
// queue keeps a small array (a transaction's answers allocate nothing)
// and gives a large one back.
func TestQueue(t *testing.T) {
	ex := func() answer { return &executeAnswer{} }
	sy := func() answer { return &syncAnswer{} }
	t.Run("order", func(t *testing.T) {
		var q queue
		a, b, c := ex(), ex(), sy()
		for _, x := range []answer{a, b, c} {
			if !q.push(x) {
				t.Fatal("push refused outside a failed batch")
			}
		}
		for i, want := range []answer{a, b, c, nil} {
			if got := q.pop(); got != want {
				t.Fatalf("pop %d: %p, want %p", i, got, want)
			}
		}
	})
	t.Run("failed batch", func(t *testing.T) {
		var q queue
		a, b, s1, c := ex(), ex(), sy(), ex()
		q.push(a)
		q.push(b)
		q.pop() // a: the relay's current one, failed
		q.finish()
		q.failBatch() // b dropped; nothing before the Sync is left
		if q.push(ex()) {
			t.Fatal("an answer pushed after the batch failed was kept")
		}
		if !q.push(s1) || !q.push(c) {
			t.Fatal("the Sync, or what follows it, was refused")
		}
		if got := q.pop(); got != s1 {
			t.Fatalf("after the failed batch: %p, want its Sync %p", got, s1)
		}
		if got := q.pop(); got != c {
			t.Fatalf("after the Sync: %p, want %p", got, c)
		}
		q.finish()
		q.finish()
		if !q.empty() {
			t.Fatalf("pending %d after every answer finished", q.pending)
		}
	})
	t.Run("failed batch up to a queued Sync", func(t *testing.T) {
		var q queue
		a, s1, c := ex(), sy(), ex()
		q.push(a)
		q.push(s1)
		q.push(c)
		q.failBatch()
		if got := q.pop(); got != s1 {
			t.Fatalf("%p, want the Sync %p", got, s1)
		}
		if !q.push(ex()) {
			t.Fatal("an answer after the Sync was refused")
		}
		if got := q.pop(); got != c {
			t.Fatalf("%p, want %p", got, c)
		}
	})
	t.Run("small array kept", func(t *testing.T) {
		var q queue
		batch := []answer{ex(), ex(), sy()}
		run := func() {
			for _, a := range batch {
				q.push(a)
			}
			for range batch {
				q.pop()
				q.finish()
			}
		}
		run()
		if n := testing.AllocsPerRun(100, run); n != 0 {
			t.Fatalf("%.1f allocations per batch of %d answers, want 0", n, len(batch))
		}
	})
	t.Run("pipelining never empties it", func(t *testing.T) {
		// one answer always outstanding: the array stays the size of
		// what is live, not of everything ever pushed
		var q queue
		q.push(ex())
		for range 100_000 {
			q.push(ex())
			q.pop()
			q.finish()
		}
		if len(q.items)-q.head != 1 || cap(q.items) > queueKeep {
			t.Fatalf("%d live answers in an array of %d", len(q.items)-q.head, cap(q.items))
		}
	})
	t.Run("large array given back", func(t *testing.T) {
		var q queue
		for range queueKeep + 1 {
			q.push(ex())
		}
		for range queueKeep + 1 {
			q.pop()
		}
		if q.items != nil || q.head != 0 {
			t.Fatalf("an emptied queue holds an array of %d", cap(q.items))
		}
	})
}

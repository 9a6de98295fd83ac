package events

import (
	"fmt"
	"slices"
	"testing"
)

// TestSlowWatcherLosesOldestAndIsTold: a watcher that reads nothing keeps
// the newest watcherQueue events and is told how many it lost; Publish
// never blocks on it.
func TestSlowWatcherLosesOldestAndIsTold(t *testing.T) {
	var b Bus
	next, stop := b.Watch()
	defer stop()
	const n = watcherQueue + 10
	for i := range n {
		b.Publish(Event{Kind: "k", Detail: string(rune('a' + i%26))})
	}
	done := make(chan struct{})
	evs, lost, ok := next(done)
	if !ok || lost != 10 || len(evs) != watcherQueue {
		t.Fatalf("got %d events, %d lost, ok %v; want %d, 10, true", len(evs), lost, ok, watcherQueue)
	}
	if evs[0].Detail != string(rune('a'+10%26)) || evs[0].Time.IsZero() {
		t.Fatalf("oldest kept event %+v: want the 11th published, with its time set", evs[0])
	}
	close(done)
	if _, _, ok := next(done); ok {
		t.Fatal("next after done: ok, want false")
	}
	stop()
	b.Publish(Event{Kind: "after"}) // no watcher: must not block or panic
}

// drain returns what next has now (it must have something).
func drain(t *testing.T, next func(done <-chan struct{}) ([]Event, int, bool)) ([]uint64, int) {
	t.Helper()
	done := make(chan struct{})
	close(done)
	evs, lost, _ := next(done)
	var seqs []uint64
	for _, e := range evs {
		seqs = append(seqs, e.Seq)
	}
	return seqs, lost
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// TestWatchAfterResumes: a watcher resuming after seq n gets the events
// after n the bus retains, each once, then new ones; those it no longer
// retains are counted lost; a seq beyond the last (a restarted daemon)
// gets every event retained.
func TestWatchAfterResumes(t *testing.T) {
	var b Bus
	for range 10 {
		b.Publish(Event{Kind: "k"})
	}
	for _, tc := range []struct {
		after    uint64
		want     []uint64
		wantLost int
	}{
		{4, seqRange(5, 10), 0},
		{0, seqRange(1, 10), 0},
		{100, seqRange(1, 10), 0},
	} {
		next, stop := b.WatchAfter(tc.after)
		got, lost := drain(t, next)
		stop()
		if !slices.Equal(got, tc.want) || lost != tc.wantLost {
			t.Errorf("WatchAfter(%d) = %v, %d lost; want %v, %d", tc.after, got, lost, tc.want, tc.wantLost)
		}
	}
	next, stop := b.WatchAfter(10)
	defer stop()
	b.Publish(Event{Kind: "k"})
	if got, lost := drain(t, next); !slices.Equal(got, []uint64{11}) || lost != 0 {
		t.Errorf("after 10, then one published: %v, %d lost; want [11], 0", got, lost)
	}
	// Beyond what the bus retains and what a watcher's queue holds.
	var c Bus
	const n = Retained + 10
	for range n {
		c.Publish(Event{Kind: "k"})
	}
	next2, stop2 := c.WatchAfter(3)
	defer stop2()
	got, lost := drain(t, next2)
	if !slices.Equal(got, seqRange(n-watcherQueue+1, n)) || lost != n-3-watcherQueue {
		t.Errorf("WatchAfter(3) of %d: %d events from %d, %d lost; want the newest %d and %d lost", n, len(got), got[0], lost, watcherQueue, n-3-watcherQueue)
	}
}

// TestRestoreContinues: a bus restored from another's Snapshot numbers on
// from it — the events it published before Restore come after the
// restored ones — and a watcher resuming after a restored seq gets the
// rest once.
func TestRestoreContinues(t *testing.T) {
	var old Bus
	for range 5 {
		old.Publish(Event{Kind: "before"})
	}
	seq, kept := old.Snapshot()
	var b Bus
	b.Publish(Event{Kind: "adopted"})
	b.Publish(Event{Kind: "adopted"})
	b.Restore(seq, kept)
	b.Publish(Event{Kind: "after"})
	next, stop := b.WatchAfter(3)
	defer stop()
	done := make(chan struct{})
	close(done)
	evs, lost, _ := next(done)
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%d:%s", e.Seq, e.Kind))
	}
	want := []string{"4:before", "5:before", "6:adopted", "7:adopted", "8:after"}
	if !slices.Equal(got, want) || lost != 0 {
		t.Fatalf("resumed after 3: %v, %d lost; want %v", got, lost, want)
	}
	if s, _ := b.Snapshot(); s != 8 {
		t.Fatalf("last seq %d, want 8", s)
	}
}

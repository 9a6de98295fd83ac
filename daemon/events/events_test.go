package events

import "testing"

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

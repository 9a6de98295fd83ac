// Package events fans the daemon's events (channels created, exited and
// closed, viewers joining, leaving, stalled, kicked and typing into a
// recorded terminal, limits changed, recordings started, stopped and
// dropping output)
// out to watchers such as `ahpctl events`. A Bus is safe for concurrent
// use, and publishing never blocks on a watcher.
//
// Events are numbered (Event.Seq) and the newest Retained are kept, so
// that a watcher that lost its stream (an upgrade in place) resumes after
// the last one it got (WatchAfter): nothing twice, and what the bus no
// longer keeps counted as lost. An upgrade in place hands the number and
// the retained events to the next binary (Snapshot, Restore), so the
// sequence goes on; a restart starts it anew.
package events

import (
	"sync"
	"time"
)

// Event is something an operator may watch (ahpctl events).
type Event struct {
	// Seq numbers the events from 1 in the order Publish took them.
	Seq  uint64
	Time time.Time
	// Kind is channel.created, channel.exited, channel.closed,
	// viewer.joined, viewer.left, viewer.stalled, viewer.kicked (by the
	// operator, or because its token was revoked or expired: Detail is the
	// close reason, e.g. "token revoked"), viewer.input (a viewer's first
	// keystroke into a recorded terminal, once per recording: Detail names
	// its token id, role and remote address, never the secret),
	// limits.changed, recording.started and recording.stopped (Detail:
	// the recording's id and mode, or why it stopped), recording.dropped
	// (Detail: bytes of output the recording dropped because the disk
	// fell behind).
	Kind    string
	Channel string
	Viewer  string
	Detail  string
}

// Kinds are the event kinds, in the order Event's doc lists them.
var Kinds = []string{"channel.created", "channel.exited", "channel.closed",
	"viewer.joined", "viewer.left", "viewer.stalled", "viewer.kicked", "viewer.input", "limits.changed",
	"recording.started", "recording.stopped", "recording.dropped"}

// Retained is how many of the newest events a Bus keeps for watchers
// that resume (WatchAfter).
const Retained = 1024

// Bus fans events out to watchers. Each watcher has a bounded queue; a
// watcher that falls behind loses its oldest events and is told how many
// with its next ones (Watch's lost count), so a slow watcher never blocks
// the daemon. The zero Bus is ready to use.
type Bus struct {
	mu       sync.Mutex // guards what follows
	watchers map[*watcher]struct{}
	seq      uint64  // of the last event published
	recent   []Event // the newest, at most Retained, oldest first
}

type watcher struct {
	mu      sync.Mutex // guards queue and lost
	queue   []Event
	lost    int
	signal  chan struct{}
	maxSize int
}

const watcherQueue = 256

// push queues e, dropping the oldest when full; w.mu is held.
func (w *watcher) push(e Event) {
	if len(w.queue) >= w.maxSize {
		w.queue = w.queue[1:]
		w.lost++
	}
	w.queue = append(w.queue, e)
}

// Publish numbers e and sends it to every watcher; a zero Time is set to
// now.
func (b *Bus) Publish(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	b.keep(e)
	for w := range b.watchers {
		w.mu.Lock()
		w.push(e)
		w.mu.Unlock()
		select {
		case w.signal <- struct{}{}:
		default:
		}
	}
}

// keep adds e to the retained events; b.mu is held.
func (b *Bus) keep(e Event) {
	if len(b.recent) >= 2*Retained {
		b.recent = append(b.recent[:0], b.recent[len(b.recent)-Retained+1:]...)
	}
	b.recent = append(b.recent, e)
}

// retained returns the retained events, at most Retained; b.mu is held.
func (b *Bus) retained() []Event {
	return b.recent[max(0, len(b.recent)-Retained):]
}

// Watch returns a function that blocks for the next events and the count
// of events lost before them (ok false once done is closed), and a
// function that stops watching. It watches the events published from now
// on.
func (b *Bus) Watch() (next func(done <-chan struct{}) (events []Event, lost int, ok bool), stop func()) {
	return b.watch(nil)
}

// WatchAfter is Watch starting after the event numbered seq: the events
// after it that the bus retains come first, and the first call's lost
// count includes those after it that it no longer retains. A seq beyond
// the last published (the watcher knew a daemon that has restarted since,
// whose numbers started anew) starts with every event retained.
func (b *Bus) WatchAfter(seq uint64) (next func(done <-chan struct{}) (events []Event, lost int, ok bool), stop func()) {
	return b.watch(&seq)
}

func (b *Bus) watch(after *uint64) (next func(done <-chan struct{}) ([]Event, int, bool), stop func()) {
	w := &watcher{signal: make(chan struct{}, 1), maxSize: watcherQueue}
	b.mu.Lock()
	if b.watchers == nil {
		b.watchers = map[*watcher]struct{}{}
	}
	b.watchers[w] = struct{}{}
	if after != nil {
		seq := *after
		if seq > b.seq {
			seq = 0
		}
		kept := b.retained()
		first := b.seq + 1 // the first seq retained
		if len(kept) > 0 {
			first = kept[0].Seq
		}
		if seq+1 < first {
			w.lost = int(first - seq - 1)
		}
		for _, e := range kept {
			if e.Seq > seq {
				w.push(e)
			}
		}
		if len(w.queue) > 0 || w.lost > 0 {
			w.signal <- struct{}{}
		}
	}
	b.mu.Unlock()
	next = func(done <-chan struct{}) ([]Event, int, bool) {
		for {
			w.mu.Lock()
			q, lost := w.queue, w.lost
			w.queue, w.lost = nil, 0
			w.mu.Unlock()
			if len(q) > 0 || lost > 0 {
				return q, lost, true
			}
			select {
			case <-w.signal:
			case <-done:
				return nil, 0, false
			}
		}
	}
	stop = func() {
		b.mu.Lock()
		delete(b.watchers, w)
		b.mu.Unlock()
	}
	return next, stop
}

// Snapshot returns the number of the last event published and the events
// retained, oldest first: what an upgrade in place hands over.
func (b *Bus) Snapshot() (seq uint64, retained []Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq, append([]Event(nil), b.retained()...)
}

// Restore carries on a Snapshot of the bus of the process image before an
// execve: the events published here so far are numbered after seq, after
// the retained ones. Call it before anything watches.
func (b *Bus) Restore(seq uint64, retained []Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(retained) > Retained {
		retained = retained[len(retained)-Retained:]
	}
	recent := make([]Event, 0, len(retained)+len(b.recent))
	for _, e := range retained {
		if e.Seq <= seq && (len(recent) == 0 || e.Seq > recent[len(recent)-1].Seq) {
			recent = append(recent, e)
		}
	}
	for _, e := range b.recent {
		e.Seq += seq
		recent = append(recent, e)
	}
	b.recent = recent
	b.seq += seq
}

// Seq returns the number of the last event published.
func (b *Bus) Seq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

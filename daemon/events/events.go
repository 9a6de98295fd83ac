// Package events fans the daemon's events (channels created, exited and
// closed, viewers joining, leaving, stalled and kicked, limits changed)
// out to watchers such as `ahpctl events`. A Bus is safe for concurrent
// use, and publishing never blocks on a watcher.
package events

import (
	"sync"
	"time"
)

// Event is something an operator may watch (ahpctl events).
type Event struct {
	Time time.Time
	// Kind is channel.created, channel.exited, channel.closed,
	// viewer.joined, viewer.left, viewer.stalled, viewer.kicked (by the
	// operator, or because its token was revoked or expired: Detail is the
	// close reason, e.g. "token revoked"), limits.changed.
	Kind    string
	Channel string
	Viewer  string
	Detail  string
}

// Kinds are the event kinds, in the order Event's doc lists them.
var Kinds = []string{"channel.created", "channel.exited", "channel.closed",
	"viewer.joined", "viewer.left", "viewer.stalled", "viewer.kicked", "limits.changed"}

// Bus fans events out to watchers. Each watcher has a bounded queue; a
// watcher that falls behind loses its oldest events and is told how many
// with its next ones (Watch's lost count), so a slow watcher never blocks
// the daemon. The zero Bus is ready to use.
type Bus struct {
	mu       sync.Mutex // guards watchers
	watchers map[*watcher]struct{}
}

type watcher struct {
	mu      sync.Mutex // guards queue and lost
	queue   []Event
	lost    int
	signal  chan struct{}
	maxSize int
}

const watcherQueue = 256

// Publish sends e to every watcher; a zero Time is set to now.
func (b *Bus) Publish(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for w := range b.watchers {
		w.mu.Lock()
		if len(w.queue) >= w.maxSize {
			w.queue = w.queue[1:]
			w.lost++
		}
		w.queue = append(w.queue, e)
		w.mu.Unlock()
		select {
		case w.signal <- struct{}{}:
		default:
		}
	}
}

// Watch returns a function that blocks for the next events and the count
// of events lost before them (ok false once done is closed), and a
// function that stops watching.
func (b *Bus) Watch() (next func(done <-chan struct{}) (events []Event, lost int, ok bool), stop func()) {
	w := &watcher{signal: make(chan struct{}, 1), maxSize: watcherQueue}
	b.mu.Lock()
	if b.watchers == nil {
		b.watchers = map[*watcher]struct{}{}
	}
	b.watchers[w] = struct{}{}
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

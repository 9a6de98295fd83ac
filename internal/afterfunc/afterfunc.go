// Package afterfunc is time.AfterFunc with an owner for its callback.
//
// A time.AfterFunc callback runs on a goroutine of its own, and Stop does
// not wait for one that has already started. A Timer counts its callbacks,
// pending and running, so that Stop can wait for the one under way and the
// owner knows that nothing of its runs after it stopped.
package afterfunc

import (
	"sync"
	"time"
)

// Timer calls f after the duration given to Reset. The zero Timer is not
// usable; make one with New. Reset and Stop must not be called
// concurrently with each other (the owner serializes them, e.g. under its
// lock); f may call Reset.
type Timer struct {
	f     func()
	t     *time.Timer
	calls sync.WaitGroup // callbacks pending or running
}

// New returns a Timer that calls f; it is not armed.
func New(f func()) *Timer {
	t := &Timer{f: f}
	// Made here, not at the first Reset: f may call Reset, and must find
	// t.t set.
	t.t = time.AfterFunc(time.Hour, t.run)
	t.t.Stop()
	return t
}

// Reset arms the timer to call f after d, in place of a pending call.
func (t *Timer) Reset(d time.Duration) {
	t.calls.Add(1)
	if t.t.Reset(d) {
		t.calls.Done() // it was pending: one call, counted already
	}
}

func (t *Timer) run() {
	defer t.calls.Done()
	t.f()
}

// Stop disarms the timer and waits for a call of f already under way. It
// reports whether it cancelled a pending call. f must not be waiting for
// the caller of Stop, and nothing may Reset the timer while Stop waits.
func (t *Timer) Stop() bool {
	cancelled := t.t.Stop()
	if cancelled {
		t.calls.Done()
	}
	t.calls.Wait()
	return cancelled
}

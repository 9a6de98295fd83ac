package pty

import (
	"sync/atomic"
	"time"
)

// Pacer gives typing precedence over floods among the terminals that share
// it (those of one daemon, which share its CPU). For Window after input to
// one of them, the others' readers pause for Delay after each read while
// they flood (from more than 64 KiB read within 100 ms until a read finds
// the PTY empty): a flooding program then blocks on its full PTY, and the
// CPU that its output would cost (reading, emulating, framing and sending
// it) goes to the keystroke and its echo instead. The terminal typed into
// last is never paused (Ctrl-C into a flood works as before), nor is
// output that comes in bursts (a prompt, a screen redraw, an `ls`), and a
// flood alone, with nobody typing elsewhere, runs at full speed. Viewers
// of a paused terminal lose nothing: its output only arrives more slowly.
//
// On a 2-core machine, `yes` in one terminal pushed the echo of a
// keystroke in another past 10–50 ms (p99); see docs/benchmarks.md.
type Pacer struct {
	// Window is how long input keeps a terminal interactive. Default 1 s.
	Window time.Duration
	// Delay is the pause after each read of a flooding terminal while
	// another is interactive; reads are at most 4 KiB (the line
	// discipline's buffer), so 2 ms caps such a flood near 2 MB/s.
	// Default 2 ms.
	Delay time.Duration

	last atomic.Int64             // monotonic time of the latest input to any terminal
	who  atomic.Pointer[Terminal] // the terminal that received it
}

// A terminal floods from when its reader has taken in more than floodBytes
// within floodSpan until a read finds its PTY empty.
const (
	floodBytes = 64 << 10
	floodSpan  = 100 * time.Millisecond
)

// epoch anchors the Pacer's monotonic times.
var epoch = time.Now()

func monoNow() int64 { return int64(time.Since(epoch)) }

func (p *Pacer) window() int64 {
	if p.Window > 0 {
		return int64(p.Window)
	}
	return int64(time.Second)
}

func (p *Pacer) delay() time.Duration {
	if p.Delay > 0 {
		return p.Delay
	}
	return 2 * time.Millisecond
}

// input records input to t.
func (p *Pacer) input(t *Terminal) {
	p.who.Store(t)
	p.last.Store(monoNow())
}

// pause returns how long t's reader should pause now: Delay when another
// terminal was typed into within Window, else 0.
func (p *Pacer) pause(t *Terminal) time.Duration {
	if p.who.Load() == t || monoNow()-p.last.Load() >= p.window() {
		return 0 // t is being typed into, or nobody is typing
	}
	return p.delay()
}

// forget drops t (closed) so that it is not kept reachable.
func (p *Pacer) forget(t *Terminal) { p.who.CompareAndSwap(t, nil) }

package daemon

import (
	"log/slog"
	"sync"
	"time"
)

// procScaler runs the daemon on one P while its terminals are quiet and
// on two while one floods (pty.Config.Flooding). On one P a hand-off
// between the daemon's goroutines (PTY reader, emulator, connection run
// loop, socket writer) is a goroutine switch; on two it is often a thread
// wake-up, which doubles the CPU a keystroke costs and adds ~100 µs to its
// echo. But a PTY holds only ~12 KiB between the program and the daemon
// (150 µs of an 80 MB/s flood): on one P the reader waits while the other
// goroutines frame and send, and the program blocks on the full PTY. With
// a second P the reader keeps up (internal/ahpbench on 2 cores, 8 MiB
// window: 0.87–1.08 of the raw PTY read against 0.63–0.66, at the same CPU
// per MB; see docs/benchmarks.md).
//
// ahpd scales only when GOMAXPROCS is not set in its environment.
type procScaler struct {
	quiet, busy int
	hold        time.Duration   // on busy until no flood for this long
	set         func(n int) int // runtime.GOMAXPROCS
	log         *slog.Logger

	mu      sync.Mutex
	raised  bool      // running on busy Ps
	last    time.Time // the latest flooding call
	timer   *time.Timer
	stopped bool
}

// newProcScaler sets quiet Ps at once and returns the scaler.
func newProcScaler(quiet, busy int, hold time.Duration, set func(int) int, log *slog.Logger) *procScaler {
	set(quiet)
	return &procScaler{quiet: quiet, busy: busy, hold: hold, set: set, log: log}
}

// flooding notes that a terminal floods now; it raises the Ps to busy if
// they are not already.
func (s *procScaler) flooding() {
	if s.busy <= s.quiet {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.last = time.Now()
	if s.raised {
		return
	}
	s.raised = true
	s.set(s.busy)
	s.log.Debug("a terminal floods: more Ps", "gomaxprocs", s.busy)
	if s.timer == nil {
		s.timer = time.AfterFunc(s.hold, s.check)
	} else {
		s.timer.Reset(s.hold)
	}
}

// check lowers the Ps to quiet once no terminal has flooded for hold.
func (s *procScaler) check() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || !s.raised {
		return
	}
	if since := time.Since(s.last); since < s.hold {
		s.timer.Reset(s.hold - since)
		return
	}
	s.raised = false
	s.set(s.quiet)
	s.log.Debug("no terminal floods: fewer Ps", "gomaxprocs", s.quiet)
}

// stop ends the scaling; the Ps stay as they are.
func (s *procScaler) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
}

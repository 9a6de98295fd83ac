package flow

import "time"

// TunerConfig bounds a WindowTuner. Zero fields take the defaults.
type TunerConfig struct {
	// Floor and Ceiling bound the window (UTF-16 bytes). Floor is at
	// least the receiver's maximumFrameBytes; Ceiling is what the
	// receiver's memory budget allows for this subscription.
	Floor, Ceiling int64
	// QueueTarget is the queueing delay tolerated above the path's
	// smallest round trip before the window stops growing; twice it
	// makes the window shrink to the measured bandwidth-delay product.
	// Default 8 ms: a keystroke's echo on the same connection waits
	// behind at most about this much of a bulk stream's bytes.
	QueueTarget time.Duration
	// MinRTTLifetime is how long a smallest round trip stays valid
	// (the path may change). Default 10 s.
	MinRTTLifetime time.Duration
}

func (c TunerConfig) withDefaults() TunerConfig {
	if c.QueueTarget == 0 {
		c.QueueTarget = 8 * time.Millisecond
	}
	if c.MinRTTLifetime == 0 {
		c.MinRTTLifetime = 10 * time.Second
	}
	c.Ceiling = max(c.Ceiling, c.Floor)
	return c
}

// WindowTuner sizes one receive window from what the receiver measures
// (docs/protocol-decisions.md, "Adaptive windows"): the bytes its consumer
// releases per round trip and the round trip itself, with and without
// queues. It is TCP receive-window autotuning (and grpc-go's BDP
// estimator) with a delay bound, as in TCP Vegas and LEDBAT:
//
//   - The window grows while the stream uses it — at least half the
//     window released in the last round trip — and the round trip is
//     within QueueTarget of the smallest seen: doubling each round trip
//     until the first time the queue bound is hit (slow start), then by
//     a quarter per round trip.
//   - When the round trip exceeds the smallest by 2 × QueueTarget, bytes
//     are queuing on the path (a bottleneck buffer, a kernel buffer), and
//     the window falls to what the path carries per smallest round trip
//     (the released rate × the smallest round trip) plus QueueTarget's
//     worth, never below Floor.
//   - It never shrinks because the stream went idle: an idle window
//     costs the receiver nothing.
//   - Every MinRTTLifetime it halves the window for one round trip (as
//     BBR's ProbeRTT does), so that a standing queue drains and the
//     smallest round trip is measured again, not inflated by the
//     stream's own bytes.
//
// Each decision takes one round trip of samples, so the window changes
// at most once per round trip (and at most once per 2 ms). A WindowTuner
// does no I/O and reads no clock: the caller passes the time. It is not
// safe for concurrent use.
type WindowTuner struct {
	cfg    TunerConfig
	window int64

	minRTT    time.Duration
	minRTTAt  time.Time
	prevMin   time.Duration // the minimum of the previous lifetime, kept while the current one fills
	rtt       time.Duration // smoothed round trip (EWMA 1/4); 0: no sample yet
	slowStart bool
	// A drain every MinRTTLifetime (as BBR's ProbeRTT): the window is
	// halved for one round trip so that a standing queue empties and the
	// pings of the new lifetime see the path's own round trip, not one
	// the stream's own bytes inflate.
	drainDue   bool
	restoreTo  int64 // the window to go back to after the drain; 0: none under way
	epochStart time.Time
	epochBytes int64
}

// minEpoch bounds how often a tuner decides on loopback, where a round
// trip is tens of microseconds.
const minEpoch = 2 * time.Millisecond

// NewWindowTuner returns a tuner whose window starts at initial, within
// the config's bounds.
func NewWindowTuner(cfg TunerConfig, initial int64) *WindowTuner {
	cfg = cfg.withDefaults()
	return &WindowTuner{cfg: cfg, window: min(max(initial, cfg.Floor), cfg.Ceiling), slowStart: true}
}

// Window returns the window the tuner last decided.
func (t *WindowTuner) Window() int64 { return t.window }

// RTT returns the smoothed round trip and the smallest one still valid
// (zeros before the first sample).
func (t *WindowTuner) RTT() (smoothed, smallest time.Duration) { return t.rtt, t.minRTT }

// OnRTT records a round-trip sample taken at now (a ping's answer).
func (t *WindowTuner) OnRTT(now time.Time, rtt time.Duration) {
	if rtt <= 0 {
		rtt = time.Microsecond
	}
	if t.rtt == 0 {
		t.rtt = rtt
	} else {
		t.rtt += (rtt - t.rtt) / 4
	}
	// A windowed minimum over two lifetimes: the current one's minimum
	// and the previous one's, so that an old minimum expires without
	// leaving the tuner with none.
	if t.minRTTAt.IsZero() || now.Sub(t.minRTTAt) > t.cfg.MinRTTLifetime {
		t.drainDue = !t.minRTTAt.IsZero() && t.window > t.cfg.Floor
		t.prevMin, t.minRTT, t.minRTTAt = t.minRTT, rtt, now
	} else if rtt < t.minRTT {
		t.minRTT = rtt
	}
}

// smallest is the smallest round trip of the current and the previous
// lifetime.
func (t *WindowTuner) smallest() time.Duration {
	if t.prevMin > 0 && t.prevMin < t.minRTT {
		return t.prevMin
	}
	return t.minRTT
}

// OnRelease records that the consumer released n more bytes at now. It
// returns the new window and true when the tuner changed it by at least an
// eighth (smaller changes are not worth a channel/window).
func (t *WindowTuner) OnRelease(now time.Time, n int64) (window int64, changed bool) {
	if t.epochStart.IsZero() {
		t.epochStart = now
	}
	t.epochBytes += n
	if t.rtt == 0 {
		return t.window, false
	}
	elapsed := now.Sub(t.epochStart)
	if elapsed < max(t.rtt, minEpoch) {
		return t.window, false
	}
	released := t.epochBytes
	t.epochStart, t.epochBytes = now, 0
	if elapsed > 4*max(t.rtt, minEpoch) {
		// The stream paused in between: this epoch says nothing about
		// the path.
		return t.window, false
	}
	if t.restoreTo > 0 {
		// The drain's round trip is over.
		next := max(t.restoreTo, t.cfg.Floor)
		t.restoreTo = 0
		if next == t.window {
			return t.window, false
		}
		t.window = next
		return next, true
	}
	if t.drainDue {
		t.drainDue = false
		if half := max(t.window/2, t.cfg.Floor); half < t.window {
			t.restoreTo, t.window = t.window, half
			return half, true
		}
	}
	minRTT := t.smallest()
	queue := t.rtt - minRTT
	perRTT := int64(float64(released) * float64(t.rtt) / float64(elapsed))
	next := t.window
	switch {
	case queue > 2*t.cfg.QueueTarget:
		t.slowStart = false
		rate := float64(released) / elapsed.Seconds()
		bdp := int64(rate * (minRTT + t.cfg.QueueTarget).Seconds())
		next = min(t.window, max(bdp, t.cfg.Floor))
	case queue > t.cfg.QueueTarget:
		t.slowStart = false
	case perRTT >= t.window/2:
		if t.slowStart {
			next = t.window * 2
		} else {
			next = t.window + t.window/4
		}
	}
	next = min(max(next, t.cfg.Floor), t.cfg.Ceiling)
	if d := next - t.window; d == 0 || (d > 0 && d < t.window/8 && next != t.cfg.Ceiling) || (d < 0 && -d < t.window/8 && next != t.cfg.Floor) {
		return t.window, false
	}
	t.window = next
	return next, true
}

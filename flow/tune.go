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
	// Default 4 ms: a keystroke's echo on the same connection waits
	// behind about this much of a bulk stream's bytes, at most twice it
	// (PROTOCOL.md's echo target beside a transfer is the round trip +
	// 15 ms, and the transport and the socket hold a few ms more).
	QueueTarget time.Duration
	// MinRTTLifetime is how long a smallest round trip stays valid
	// (the path may change). Default 10 s.
	MinRTTLifetime time.Duration
}

func (c TunerConfig) withDefaults() TunerConfig {
	if c.QueueTarget == 0 {
		c.QueueTarget = 4 * time.Millisecond
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
//     steps from QueueTarget's worth of the rate, doubling while no queue
//     shows (at most an eighth of the window), each step only after a new
//     round-trip sample.
//   - When the round trip exceeds the smallest by 2 × QueueTarget, bytes
//     are queuing on the path (a bottleneck buffer, a kernel buffer), and
//     the window falls to what the path carries per smallest round trip
//     (the highest released rate of the last eight epochs × the smallest
//     round trip) plus QueueTarget's worth, plus what the receiver holds
//     and has not credited (NoteHeld), never below Floor; the next shrink waits two epochs, since this one takes a
//     round trip to act and starves the pipe meanwhile.
//   - It never shrinks because the stream went idle: an idle window
//     costs the receiver nothing.
//   - Every MinRTTLifetime it halves the window for one round trip (as
//     BBR's ProbeRTT does), so that a standing queue drains and the
//     smallest round trip is measured again, not inflated by the
//     stream's own bytes.
//
// Each decision takes one round trip of samples, so the window changes
// at most once per round trip (and at most once per 2 ms), and by a 64th
// at least. A WindowTuner
// does no I/O and reads no clock: the caller passes the time. It is not
// safe for concurrent use.
type WindowTuner struct {
	cfg    TunerConfig
	window int64

	minRTT    time.Duration
	minRTTAt  time.Time
	prevMin   time.Duration // the minimum of the previous lifetime, kept while the current one fills
	rtt       time.Duration // smoothed round trip (EWMA 1/4); 0: no sample yet
	last      time.Duration // the newest sample
	fresh     bool          // a sample sent after the last growth had begun to act arrived
	grewAt    time.Time     // when the window last grew
	step      int64         // the last additive step (0: none yet); doubles while no queue shows
	rates     [8]float64    // the released rate (bytes/s) of the last epochs, newest at rateAt
	rateAt    int
	settle    int     // epochs to wait after a shrink before another: it takes a round trip to act
	growRate  float64 // the released rate when the window last grew (bytes/s); 0: never
	growFrac  float64 // by how much it grew then (a fraction of the window)
	slowStart bool
	// A drain every MinRTTLifetime (as BBR's ProbeRTT): the window is
	// halved for one round trip so that a standing queue empties and the
	// pings of the new lifetime see the path's own round trip, not one
	// the stream's own bytes inflate.
	drainDue        bool
	restoreTo       int64     // the window to go back to after the drain; 0: none under way
	drainLeft       int       // epochs of the drain still to go
	restoreFrom     int64     // the window the restore started from
	restoreStart    time.Time // when it started (the first release after the drain)
	restoring       int64     // the drain is over: the window goes back to this by released bytes; 0: not
	restoreGrow     int64     // released bytes not yet added back
	restoredInEpoch bool      // the restore ended in the epoch under way
	epochStart      time.Time
	epochBytes      int64
	// What the receiver held (NoteHeld): the epoch's sum and count, and
	// the mean of the last epoch that had samples.
	heldSum, heldN int64
	held           int64
}

// NoteHeld records that the receiver holds n bytes of the window that are
// not in flight (flow.Receiver.Held: buffered, or released and not yet
// announced). A shrink sizes the window as the path's product plus what
// the receiver holds on average: a consumer that keeps up has its
// releases announced at once and holds about nothing, one whose credit
// goes per quarter window holds an eighth of it.
func (t *WindowTuner) NoteHeld(n int64) {
	t.heldSum += max(n, 0)
	t.heldN++
}

// PingInterval is how long a tuner's owner waits from one round-trip
// sample's ping to the next ping, given the time since one of its streams
// last released bytes and the smoothed round trip (0 before the first
// sample): one per round trip (10–200 ms apart) while a stream moved data
// in the last second, else one a second. The daemon (WebSocket pings) and
// ahpctl (`ping` requests) both sample so (PingWait); the page's rtt.js
// does likewise.
func PingInterval(sinceActive, srtt time.Duration) time.Duration {
	if sinceActive >= PingBusyFor {
		return pingIdle
	}
	return min(max(srtt, pingBusyMin), pingBusyMax)
}

// PingWait is how long to wait after a ping that took took (sent, then
// answered) before the next: PingInterval counted from the ping's send, so
// that a stream sampled once per round trip gets a sample per round trip,
// not one per two (a ping answered after a round trip, then a round trip's
// wait). Slow start doubles a window once per sample.
func PingWait(sinceActive, srtt, took time.Duration) time.Duration {
	return max(PingInterval(sinceActive, srtt)-took, 0)
}

const (
	pingBusyMin = 10 * time.Millisecond
	pingBusyMax = 200 * time.Millisecond
	pingIdle    = time.Second
)

// PingBusyFor is how long after a stream's last release its owner keeps
// sampling once per round trip (PingInterval); an owner that wakes from
// longer samples at once.
const PingBusyFor = time.Second

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

// OpeningRate is the window a bulk stream opens with per second of round
// trip when nothing else shares its connection (OpeningWindow): a window
// counts UTF-16 bytes of base64 in JSON, 8 per 3 bytes of data, so this
// is about 144 MiB/s of data (a gigabit LAN's 117 MB/s at a millisecond).
const OpeningRate = 384 << 20

// OpeningMin is the least OpeningWindow gives: what a bulk stream has in
// flight on loopback (docs/benchmarks.md, "TCP channels").
const OpeningMin = 512 << 10

// OpeningWindow is the window a bulk stream's receiver opens with over a
// round trip of rtt, before its tuner has measured anything: rtt ×
// OpeningRate, at least OpeningMin (its owner caps it). ahpctl's
// downloads (ctl/client.AutoReceive) and the host's tcp/input on a
// connection of TCP streams only both open so.
func OpeningWindow(rtt time.Duration) int64 {
	return max(int64(rtt.Seconds()*OpeningRate), OpeningMin)
}

// Raise sets the window to n, within the config's bounds, when that is
// more than it is (an opening guess once the round trip is known); it
// returns the window.
func (t *WindowTuner) Raise(n int64) int64 {
	t.window = max(t.window, min(n, t.cfg.Ceiling))
	return t.window
}

// Clamp lowers the window to n (not below Floor) when its owner could not
// grant all of what OnRelease asked for (a memory budget).
func (t *WindowTuner) Clamp(n int64) {
	t.window = max(min(t.window, n), t.cfg.Floor)
}

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
	t.last = rtt
	// In slow start, a sample speaks for the last doubling only if its
	// ping went out once the doubled window had reached the sender (half
	// a round trip): one sent before says nothing of the queue the
	// doubling adds, and doubling on it again overshoots the path by up
	// to four times its product, not two. After slow start a step is
	// small, and waiting so long would halve how fast the window follows
	// a path whose rate rose.
	if !t.slowStart || now.Add(-rtt).Sub(t.grewAt) >= t.rtt/2 {
		t.fresh = true
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

// rateRose reports whether the released rate rose by at least half of the
// last growth step since it was taken: the path had room for it.
func (t *WindowTuner) rateRose(rate float64) bool {
	if t.growRate == 0 {
		return true // it never grew: nothing to compare with yet
	}
	return t.growFrac > 0 && rate >= t.growRate*(1+t.growFrac/2)
}

// rateFollowed reports whether the released rate rose with the last growth
// by at least 3/4 of it: the window, not the path, limits the stream.
func (t *WindowTuner) rateFollowed(rate float64) bool {
	return t.growRate > 0 && t.growFrac > 0 && rate >= t.growRate*(1+t.growFrac*3/4)
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
// returns the new window and true when the tuner changed it by at least a
// 64th (smaller changes are not worth a channel/window).
func (t *WindowTuner) OnRelease(now time.Time, n int64) (window int64, changed bool) {
	if t.epochStart.IsZero() {
		t.epochStart = now
	}
	t.epochBytes += n
	if t.restoring > 0 {
		// After a drain, the window goes back to what it was over two
		// round trips, in steps of a 64th, and never faster than bytes
		// are released. Restored at once, half a window of credit
		// reached the sender together and stood at the bottleneck as a
		// burst, half a round trip ahead of every echo, every 10 s; and
		// clocked by releases alone it followed the drained stream's
		// bursts (a halved window's bytes come a half window at the
		// full rate, then a gap), which arrive at the path's full rate,
		// so it sent at twice that rate (a queue of 95 ms at 200 ms).
		t.restoreGrow += n
		if t.restoreStart.IsZero() {
			t.restoreStart = now
		}
		span := 2 * max(t.rtt, minEpoch)
		due := t.restoreFrom + int64(float64(t.restoring-t.restoreFrom)*min(1, float64(now.Sub(t.restoreStart))/float64(span)))
		next := min(due, t.window+t.restoreGrow, t.restoring)
		if next-t.window >= t.window/64 || next >= t.restoring {
			t.restoreGrow -= next - t.window
			if next >= t.restoring {
				// Back where it was. The epoch under way saw the rate
				// rise with the restored window, which says nothing of
				// room on the path (rateRose, rateFollowed): it does not
				// count for growth.
				t.restoring, t.step, t.restoredInEpoch = 0, 0, true
			}
			if next > t.window {
				t.window = next
				return next, true
			}
		}
	}
	if t.rtt == 0 {
		return t.window, false
	}
	elapsed := now.Sub(t.epochStart)
	if elapsed < max(t.rtt, minEpoch) {
		return t.window, false
	}
	released := t.epochBytes
	t.epochStart, t.epochBytes = now, 0
	if t.heldN > 0 {
		t.held = t.heldSum / t.heldN
		t.heldSum, t.heldN = 0, 0
	}
	if elapsed > 4*max(t.rtt, minEpoch) {
		// The stream paused in between: this epoch says nothing about
		// the path.
		return t.window, false
	}
	if t.restoreTo > 0 {
		// The drain lasts two epochs: the halved window reaches the
		// sender half a round trip after it is announced, and the gap it
		// makes in the stream reaches the receiver half a round trip
		// later, so for the first epoch bytes are still released at the
		// full rate, and a restore clocked by them would send at twice
		// the path's rate (a queue of 95 ms at 200 ms, make bench-link
		// -v). Then the window goes back to what it was as bytes are
		// released (restoring, above), not at once.
		if t.drainLeft--; t.drainLeft > 0 {
			return t.window, false
		}
		t.restoring, t.restoreTo, t.restoreGrow = max(t.restoreTo, t.cfg.Floor), 0, 0
		t.restoreFrom, t.restoreStart = t.window, time.Time{}
		return t.window, false
	}
	if t.drainDue {
		t.drainDue = false
		if half := max(t.window/2, t.cfg.Floor); half < t.window {
			t.restoreTo, t.window, t.drainLeft = t.window, half, 2
			return half, true
		}
	}
	restored := t.restoredInEpoch
	t.restoredInEpoch = false
	t.rateAt = (t.rateAt + 1) % len(t.rates)
	t.rates[t.rateAt] = float64(released) / elapsed.Seconds()
	if t.settle > 0 {
		t.settle--
	}
	minRTT := t.smallest()
	// Queue evidence: both the smoothed round trip and the newest sample
	// must show one to shrink; either suffices to stop growing.
	queue := min(t.rtt, t.last) - minRTT
	growQueue := max(t.rtt, t.last) - minRTT
	perRTT := int64(float64(released) * float64(t.rtt) / float64(elapsed))
	rate := float64(released) / elapsed.Seconds()
	next := t.window
	// A standing queue: the window the path needs, from the highest
	// released rate of the last epochs (a shrink starves the pipe for a
	// round trip, and the rate measured meanwhile is not the path's),
	// times the smallest round trip plus QueueTarget, plus what the
	// receiver holds on average (NoteHeld), which is not in flight. A
	// fixed 8/7 for per-quarter credit held a queue of an eighth of the
	// round trip (28 ms at 200 ms) behind every echo of a consumer that
	// keeps up, whose releases are announced at once. When the shrink is
	// not below the window (the round trip is noisy, not queued), growth
	// is considered.
	shrink := int64(0)
	if queue > 2*t.cfg.QueueTarget {
		t.step = 0
		if t.settle == 0 {
			best := 0.0
			for _, r := range t.rates {
				best = max(best, r)
			}
			if bdp := max(int64(best*(minRTT+t.cfg.QueueTarget).Seconds())+t.held, t.cfg.Floor); bdp < t.window-t.window/64 {
				shrink = bdp
			}
		}
	}
	switch {
	case shrink > 0:
		t.slowStart, t.restoring = false, 0
		next, t.settle = shrink, 2
	case queue > 2*t.cfg.QueueTarget && t.settle > 0:
		// The last shrink has not acted yet.
	case t.restoring > 0 || restored:
		// Coming back from a drain (above): no growth on top, nor on
		// the epoch in which it came back.
	case perRTT >= t.window/2 && t.fresh && (growQueue <= t.cfg.QueueTarget || t.rateRose(rate)):
		// Each growth waits for a round trip measured after the last
		// one: on a short path several epochs pass between pings. It
		// needs a round trip within QueueTarget of the smallest, or, when
		// the round trip is noisier than that (a busy CPU, compression
		// in bursts), a delivery rate that rose with the last step: a
		// full path's rate does not.
		before := t.window
		defer func() {
			// Only a growth that took place is one to wait on and to
			// judge the next by (one under a 64th is not announced).
			if t.window > before {
				t.fresh, t.grewAt = false, now
				t.growRate, t.growFrac = rate, float64(t.window-before)/float64(before)
			}
		}()
		if t.slowStart {
			next = t.window * 2
		} else {
			// Additive, from half QueueTarget's worth of the rate, so
			// that from the top of the band where it grows (a queue of
			// QueueTarget) a step, even one taken on a sample that came
			// before the last step acted, stays under the 2 ×
			// QueueTarget where it shrinks (each shrink starves the pipe
			// for a round trip). The step doubles while the round trip
			// shows no queue (at most half the target), or while the
			// delivery rate rose with the last step as much as the
			// window did (the window, not the path, limits the stream:
			// round trips noisier than the target do not show that),
			// so that a window far below the path's needs gets there in
			// a few round trips; it starts over otherwise. At least a
			// 64th (less is not announced), at most an eighth.
			base := max(int64(rate*t.cfg.QueueTarget.Seconds()/2), t.window/64)
			if t.step == 0 || (growQueue > t.cfg.QueueTarget/2 && !t.rateFollowed(rate)) {
				t.step = base
			} else {
				t.step *= 2
			}
			t.step = min(max(t.step, base), t.window/8)
			next = t.window + t.step
		}
	case growQueue > t.cfg.QueueTarget:
		t.step = 0
		if queue > 2*t.cfg.QueueTarget {
			// Both the smoothed round trip and the newest show a queue:
			// slow start is over (one noisy sample does not end it).
			t.slowStart = false
		}
	default:
		if growQueue > t.cfg.QueueTarget/2 {
			t.step = 0
		}
	}
	next = min(max(next, t.cfg.Floor), t.cfg.Ceiling)
	// A change under a 64th (3 ms of a 200 ms round trip) is not worth a
	// channel/window, and the queue target needs no finer steps (one per
	// round trip at most: growth waits for a fresh sample).
	if d := next - t.window; d == 0 || (d > 0 && d < t.window/64 && next != t.cfg.Ceiling) || (d < 0 && -d < t.window/64 && next != t.cfg.Floor) {
		return t.window, false
	}
	t.window = next
	return next, true
}

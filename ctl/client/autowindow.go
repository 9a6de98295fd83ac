package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// Adaptive windows (PROTOCOL.md §6, "Changing a window"; issue 40). A
// subscription that tunes its receive window registers an rttWatch with
// its Conn; while any is registered, the Conn's pinger measures the round
// trip with `ping` requests (answered on the host's control lane, so the
// time includes what the host queued ahead of a keystroke's echo) and
// hands every sample to each watch. A flow.WindowTuner per subscription
// turns samples and released bytes into a window; a change is applied to
// the subscription's flow.Receiver first and then announced with
// channel/window.

// pingTimeout bounds one `ping` (flow.PingInterval says when the next goes).
const pingTimeout = 10 * time.Second

// rttWatch receives the pinger's samples (on the pinger goroutine).
type rttWatch struct {
	sample func(now time.Time, rtt time.Duration)
}

// WindowUpdates reports whether the host takes channel/window and ping
// (initialize's capabilities.windowUpdates).
func (c *Conn) WindowUpdates() bool { return c != nil && c.init.Capabilities.WindowUpdates }

// Ping measures one round trip with a `ping` request.
func (c *Conn) Ping(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := c.Call(ctx, "ping", struct{}{}, nil); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// pinger is a Conn's round-trip sampler (started on the first watch).
type pinger struct {
	mu      sync.Mutex
	watches map[*rttWatch]struct{}
	started bool
	wake    chan struct{}
	active  atomic.Int64 // unix nanos of the last data a watch reported
	srtt    atomic.Int64 // nanoseconds, smoothed
}

// watchRTT registers w; the returned function unregisters it. It starts
// the pinger the first time (it ends with the connection).
func (c *Conn) watchRTT(w *rttWatch) (stop func()) {
	p := &c.pinger
	p.mu.Lock()
	if p.watches == nil {
		p.watches = map[*rttWatch]struct{}{}
		p.wake = make(chan struct{}, 1)
	}
	p.watches[w] = struct{}{}
	start := !p.started
	p.started = true
	p.mu.Unlock()
	if start {
		c.wg.Go(c.pingLoop)
	} else {
		c.pinger.poke()
	}
	return func() {
		p.mu.Lock()
		delete(p.watches, w)
		p.mu.Unlock()
	}
}

// busy tells the pinger that a watched subscription moved data.
func (p *pinger) busy(now time.Time) {
	if prev := p.active.Swap(now.UnixNano()); time.Duration(now.UnixNano()-prev) >= flow.PingBusyFor {
		p.poke() // from idle: sample now rather than a second later
	}
}

func (p *pinger) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (c *Conn) pingLoop() {
	p := &c.pinger
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		case <-p.wake:
		}
		p.mu.Lock()
		n := len(p.watches)
		p.mu.Unlock()
		var took time.Duration
		if n > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
			sent := time.Now()
			rtt, err := c.Ping(ctx)
			cancel()
			took = time.Since(sent)
			if err != nil {
				if c.Err() != nil {
					return
				}
			} else {
				now := time.Now()
				if s := p.srtt.Load(); s == 0 {
					p.srtt.Store(int64(rtt))
				} else {
					p.srtt.Store(s + (int64(rtt)-s)/4)
				}
				p.mu.Lock()
				ws := make([]*rttWatch, 0, len(p.watches))
				for w := range p.watches {
					ws = append(ws, w)
				}
				p.mu.Unlock()
				for _, w := range ws {
					w.sample(now, rtt)
				}
			}
		}
		t.Reset(flow.PingWait(time.Duration(time.Now().UnixNano()-p.active.Load()), time.Duration(p.srtt.Load()), took))
	}
}

// seedRTT gives a new tuner the round trip measured at Dial, before any
// stream's bytes could queue: its pings start once data flows, and a
// first sample taken behind a full queue would pass for the path's own
// round trip.
func (c *Conn) seedRTT(t *flow.WindowTuner) {
	if c.rtt > 0 {
		t.OnRTT(time.Now(), c.rtt)
	}
}

// AutoWindowConfig returns the tuner bounds for a subscription whose
// receive limits are limits, with the window allowed to grow to ceiling
// (lowered to the host's maximum from initialize).
func (c *Conn) AutoWindowConfig(limits flow.ReceiveLimits, floor, ceiling int64) flow.TunerConfig {
	if m := c.init.Capabilities.FlowControl.Maximums.WindowBytes; m > 0 {
		ceiling = min(ceiling, m)
	}
	floor = max(floor, limits.MaximumFrameBytes)
	return flow.TunerConfig{Floor: floor, Ceiling: max(ceiling, floor)}
}

// AutoWindow makes the subscription size its receive window from what it
// measures (flow.WindowTuner within cfg's bounds), announcing changes with
// channel/window. It does nothing when the host does not take
// channel/window. Call it once, before consuming.
func (s *Sub) AutoWindow(cfg flow.TunerConfig) {
	if !s.c.WindowUpdates() {
		return
	}
	s.mu.Lock()
	if s.tuner != nil || s.err != nil {
		s.mu.Unlock()
		return
	}
	s.tuner = flow.NewWindowTuner(cfg, s.recv.Limits().WindowBytes)
	s.c.seedRTT(s.tuner)
	s.mu.Unlock()
	w := &rttWatch{sample: func(now time.Time, rtt time.Duration) {
		s.mu.Lock()
		if s.tuner != nil {
			s.tuner.OnRTT(now, rtt)
		}
		s.mu.Unlock()
	}}
	s.unwatch = s.c.watchRTT(w)
}

// SetWindow sets the subscription's receive window to n and announces it
// with channel/window (the receiver takes it first, so the host's next
// bytes are welcome).
func (s *Sub) SetWindow(ctx context.Context, n int64) error {
	s.mu.Lock()
	s.recv.SetWindowBytes(n)
	n = s.recv.Limits().WindowBytes
	s.mu.Unlock()
	return s.c.SendRaw(ctx, flow.AppendWindow(nil, s.Channel, s.ID, n))
}

// WindowChanges returns how many channel/window the subscription sent.
func (s *Sub) WindowChanges() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.windowChanges
}

// onWindow takes the host's channel/window for client→host data (reader
// goroutine, under c.mu).
func (s *Sub) onWindow(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < s.win.Limits().MaximumFrameBytes {
		return // the host sends none such; ignore rather than stall
	}
	s.win.SetWindowBytes(n)
	select {
	case s.credit <- struct{}{}:
	default:
	}
}

// Window returns the subscription's current receive window.
func (s *Sub) Window() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recv.Limits().WindowBytes
}

// tuneLocked feeds n released bytes to the tuner (s.mu held) and returns
// the channel/window to send, or nil.
func (s *Sub) tuneLocked(n int64) []byte {
	if s.tuner == nil || n <= 0 {
		return nil
	}
	w, changed := s.c.tune(s.tuner, s.recv, n)
	if !changed {
		return nil
	}
	s.windowChanges++
	return flow.AppendWindow(nil, s.Channel, s.ID, w)
}

// tune feeds n released bytes to t and applies a changed window to r
// before anyone announces it, so that the host's next bytes are welcome;
// it tells the pinger the stream is busy.
func (c *Conn) tune(t *flow.WindowTuner, r *flow.Receiver, n int64) (window int64, changed bool) {
	now := time.Now()
	c.pinger.busy(now)
	t.NoteHeld(r.Held())
	if window, changed = t.OnRelease(now, n); changed {
		r.SetWindowBytes(window)
	}
	return window, changed
}

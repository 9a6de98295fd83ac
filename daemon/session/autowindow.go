package session

import (
	"context"
	"log/slog"
	"time"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/flow"
)

// The host's receive window for a TCP channel's tcp/input, sized to the
// path (PROTOCOL.md §6, "Changing a window"; docs/protocol-decisions.md,
// "Adaptive windows"). The client's upload would otherwise be capped at
// hostReceive.windowBytes per round trip: 256 KiB of window is 96 KiB of
// data, under 0.5 MB/s at 200 ms. The host measures the round trip with
// WebSocket pings (every client answers them by itself; the pong comes
// back behind whatever the client queued ahead of it, as its data does),
// and each tuned subscription's flow.WindowTuner turns the samples and the
// bytes the channel released into a window, announced with channel/window
// to a client that said it takes them (initialize's
// capabilities.windowUpdates).

// tuneCeiling is the most a tuned host receive window grows to: what a
// TCP channel retains for a resume in the other direction
// (tcpMaxRetainedBytes, 16 MiB of window by default: 6 MB of data,
// 100 Mbit/s at a 480 ms round trip), and never below the configured
// hostReceive window. What it adds beyond the configured window counts in
// the connection's budget (tune).
func (c *conn) tuneCeiling() int64 {
	return max(c.limits.HostReceive.WindowBytes, c.limits.TCPMaxRetainedBytes)
}

// hostTuneFloor is the least a tuned host receive window falls to.
const hostTuneFloor = 128 << 10

// startTuning gives s a tuner when its channel takes the client's bulk
// data (TCP) and the client takes channel/window.
func (c *conn) startTuning(s *subscription) {
	if !c.windowUpdates || s.ch.Type != "tcp" || c.grant.Role != auth.RoleControl || s.stream == nil {
		return
	}
	recv := s.stream.Receiver()
	// The floor: 128 KiB (4 ms of a 100 Mbit/s link), or the configured
	// window when it is smaller; the tuner starts from the configured one
	// and goes below it only on a path that queues.
	floor := max(min(c.limits.HostReceive.WindowBytes, recv.Limits().WindowBytes, hostTuneFloor), recv.Limits().MaximumFrameBytes)
	s.tuner = flow.NewWindowTuner(flow.TunerConfig{Floor: floor, Ceiling: c.tuneCeiling()}, recv.Limits().WindowBytes)
	if c.tuned == nil {
		c.tuned = map[*subscription]struct{}{}
	}
	c.tuned[s] = struct{}{}
	if c.tunedCount.Add(1) == 1 {
		select {
		case c.rttWake <- struct{}{}:
		default:
		}
	}
}

// untune forgets s's tuner (it ended).
func (c *conn) untune(s *subscription) {
	if s.tuner == nil {
		return
	}
	s.tuner = nil
	c.queued.Give(s.tunedExtra)
	s.tunedExtra = 0
	delete(c.tuned, s)
	c.tunedCount.Add(-1)
}

// tune feeds n bytes s's channel released to its tuner and announces a
// changed window.
func (c *conn) tune(s *subscription, n int64) {
	if s.tuner == nil || n <= 0 {
		return
	}
	now := time.Now()
	if prev := c.rttBusy.Swap(now.UnixNano()); time.Duration(now.UnixNano()-prev) >= flow.PingBusyFor {
		select {
		case c.rttWake <- struct{}{}:
		default:
		}
	}
	recv := s.stream.Receiver()
	s.tuner.NoteHeld(recv.Held())
	w, changed := s.tuner.OnRelease(now, n)
	if !changed {
		return
	}
	c.applyWindow(s, w)
}

// applyWindow makes w the host's receive window for s and announces it.
func (c *conn) applyWindow(s *subscription, w int64) {
	recv := s.stream.Receiver()
	// The receiver accepts up to the largest window it announced, so what
	// a window beyond that lets the client make the host hold (accepted,
	// not yet written to the target) is charged once, at its largest, in
	// the connection's budget, so in its token's (maxBufferedBytesPerToken)
	// and the daemon's: growth takes only what is left, and untune gives
	// it back.
	if grow := w - recv.MaxWindowBytes(); grow > 0 {
		if left := c.queued.Left(); left < grow {
			w -= grow - left
			grow = left
			s.tuner.Clamp(w)
			if w <= recv.Limits().WindowBytes {
				return // no room to grow
			}
		}
		c.queued.Take(grow)
		s.tunedExtra += grow
	}
	recv.SetWindowBytes(w) // before the client can use it
	c.sender.QueueWindow(s.stream)
	c.stats.windowChanges.Add(1)
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		srtt, smallest := s.tuner.RTT()
		c.log.Debug("tcp/input window tuned", "conn", c.id, "sub", s.id, "channel", s.ch.URI, "windowBytes", w, "srtt", srtt, "minRTT", smallest, "held", recv.Held())
	}
}

// onRTT hands a round trip to every tuned subscription. On a
// subscription's first, when the connection carries TCP streams only, its
// window opens at the round trip's guess (flow.OpeningWindow) as an ahpctl
// forward stream's receive window does at subscribe (ctl/client's
// AutoReceive): from hostReceive's 256 KiB, slow start took a second and a
// half of a 200 ms upload. Beside a terminal or telemetry it slow-starts,
// so that the client's bytes do not queue ahead of their frames.
func (c *conn) onRTT(now time.Time, d time.Duration) {
	onlyTCP := -1 // not looked at yet
	for s := range c.tuned {
		first := false
		if srtt, _ := s.tuner.RTT(); srtt == 0 {
			first = true
		}
		s.tuner.OnRTT(now, d)
		if !first {
			continue
		}
		if onlyTCP < 0 {
			onlyTCP = 1
			for _, o := range c.subs {
				if o.ch.Type != "tcp" {
					onlyTCP = 0
					break
				}
			}
		}
		if w := flow.OpeningWindow(d); onlyTCP == 1 && w > s.tuner.Window() {
			if w = s.tuner.Raise(w); w > s.stream.Receiver().Limits().WindowBytes {
				c.applyWindow(s, w)
			}
		}
	}
}

// rttLoop pings the client while a subscription is tuned and hands the
// round trips to the run loop. It ends with ctx (serve waits for it). A
// ping that gets no pong is the heartbeat's business (startPings): this
// one waits as long, and changes nothing.
func (c *conn) rttLoop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var srtt time.Duration
	for {
		var took time.Duration
		if c.tunedCount.Load() > 0 {
			pctx, cancel := context.WithTimeout(ctx, 3*c.srv.host.Limits().HeartbeatInterval)
			start := time.Now()
			err := c.ws.Ping(pctx)
			cancel()
			if err != nil {
				return // the connection is ending: the heartbeat says why
			}
			d := time.Since(start)
			took = d
			if srtt == 0 {
				srtt = d
			} else {
				srtt += (d - srtt) / 4
			}
			select {
			case c.rttSample <- d:
			default: // the run loop has one to take already
			}
		}
		t.Reset(flow.PingWait(time.Duration(time.Now().UnixNano()-c.rttBusy.Load()), srtt, took))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.rttWake:
		}
	}
}

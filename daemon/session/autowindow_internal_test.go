package session

import (
	"log/slog"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/flow"
)

// TestTunedWindowTakesTheBudget: the host's tuned receive window for a
// TCP channel grows only by what the connection's budget has left (so
// its token's and the daemon's), charged at its largest, announced with
// channel/window; ending the subscription gives it back.
func TestTunedWindowTakesTheBudget(t *testing.T) {
	sender, err := flow.NewSender(flow.SenderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{srv: newTestServer(config.Config{}, nil), sender: sender, check: time.NewTimer(time.Hour),
		rttWake: make(chan struct{}, 1), log: slog.New(slog.DiscardHandler)}
	defer c.check.Stop()
	const budget = 300 << 10
	c.queued = flow.NewBudget(budget)
	lim := flow.ReceiveLimits{WindowBytes: 256 << 10, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 64 << 10}
	st, err := sender.Open(flow.StreamConfig{Channel: "ahp-tcp:/x", SubscriptionID: "s1", Source: &outLenSource{}, Send: lim, Receive: lim})
	if err != nil {
		t.Fatal(err)
	}
	s := &subscription{id: "s1", stream: st, receive: lim,
		tuner: flow.NewWindowTuner(flow.TunerConfig{Floor: 128 << 10, Ceiling: 16 << 20}, lim.WindowBytes)}
	c.tuned = map[*subscription]struct{}{s: {}}
	c.tunedCount.Store(1)
	recv := st.Receiver()
	// Slow start on a quiet path: a fresh 50 ms round trip, then four
	// windows released in the next (≥) 50 ms, a few times (an epoch that
	// a loaded machine stretches past 200 ms counts as a pause, and the
	// next one carries on).
	c.tune(s, 1)
	for range 8 {
		c.onRTT(time.Now(), 50*time.Millisecond)
		time.Sleep(50 * time.Millisecond)
		c.tune(s, 4*recv.Limits().WindowBytes)
	}
	if got, want := recv.MaxWindowBytes(), lim.WindowBytes+budget; got != want {
		t.Fatalf("the window grew to %d, want the configured %d + the budget's %d", got, lim.WindowBytes, budget)
	}
	if s.tuner.Window() != recv.Limits().WindowBytes {
		t.Fatalf("the tuner holds %d, the receiver %d", s.tuner.Window(), recv.Limits().WindowBytes)
	}
	if c.queued.Used() != budget || s.tunedExtra != budget {
		t.Fatalf("budget used %d, charged %d, want %d", c.queued.Used(), s.tunedExtra, budget)
	}
	var window bool
	for {
		b, _ := sender.Next(nil)
		if b == nil {
			break
		}
		window = window || string(b) == string(flow.AppendWindow(nil, "ahp-tcp:/x", "s1", recv.Limits().WindowBytes))
		sender.Written(len(b))
	}
	if !window {
		t.Fatal("no channel/window announced the grown window")
	}
	c.untune(s)
	if c.queued.Used() != 0 {
		t.Fatalf("budget used %d after the subscription ended", c.queued.Used())
	}
}

// TestTunedWindowOpensOnAConnectionOfTCPOnly: on a connection of TCP
// streams only, the host's tcp/input window opens at the round trip's
// guess with its first sample (a forward's upload does not slow-start
// from 256 KiB); beside a terminal it stays put and slow-starts.
func TestTunedWindowOpensOnAConnectionOfTCPOnly(t *testing.T) {
	for _, beside := range []string{"", "terminal", "telemetry"} {
		sender, err := flow.NewSender(flow.SenderConfig{})
		if err != nil {
			t.Fatal(err)
		}
		c := &conn{srv: newTestServer(config.Config{}, nil), sender: sender, check: time.NewTimer(time.Hour),
			rttWake: make(chan struct{}, 1), log: slog.New(slog.DiscardHandler)}
		c.queued = flow.NewBudget(64 << 20)
		lim := flow.ReceiveLimits{WindowBytes: 256 << 10, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 64 << 10}
		st, err := sender.Open(flow.StreamConfig{Channel: "ahp-tcp:/x", SubscriptionID: "s1", Source: &outLenSource{}, Send: lim, Receive: lim})
		if err != nil {
			t.Fatal(err)
		}
		s := &subscription{id: "s1", stream: st, receive: lim, ch: &registry.Channel{URI: "ahp-tcp:/x", Type: "tcp"},
			tuner: flow.NewWindowTuner(flow.TunerConfig{Floor: 128 << 10, Ceiling: 16 << 20}, lim.WindowBytes)}
		c.subs = map[string]*subscription{"s1": s}
		if beside != "" {
			c.subs["s2"] = &subscription{id: "s2", ch: &registry.Channel{URI: "ahp-" + beside + ":/y", Type: beside}}
		}
		c.tuned = map[*subscription]struct{}{s: {}}
		c.tunedCount.Store(1)
		const rtt = 30 * time.Millisecond
		c.onRTT(time.Now(), rtt)
		got := st.Receiver().Limits().WindowBytes
		want := int64(rtt.Seconds() * (384 << 20))
		switch {
		case beside == "" && got != want:
			t.Errorf("TCP only: the window is %d after the first %v round trip, want %d", got, rtt, want)
		case beside != "" && got != lim.WindowBytes:
			t.Errorf("beside a %s: the window is %d after the first round trip, want it kept at %d", beside, got, lim.WindowBytes)
		}
		if s.tuner.Window() != got {
			t.Errorf("the tuner holds %d, the receiver %d", s.tuner.Window(), got)
		}
		// The second round trip opens nothing more.
		c.onRTT(time.Now(), 2*rtt)
		if again := st.Receiver().Limits().WindowBytes; again != got {
			t.Errorf("the second round trip changed the window %d → %d", got, again)
		}
		c.check.Stop()
		c.untune(s)
	}
}

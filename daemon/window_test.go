package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/linkemu"
)

// subWindow returns the host's send window for the subscription id of the
// daemon's only viewer connection, polling (a list may leave out a busy
// connection).
func subWindow(t *testing.T, h *harness, id string, want int64) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		vs := h.srv.ListViewers(ctx)
		cancel()
		for _, v := range vs {
			for _, s := range v.Subscriptions {
				if s.ID == id {
					got = s.Window
				}
			}
		}
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestChannelWindowAndPing: a client's channel/window changes the host's
// send window of that subscription (PROTOCOL.md §6) and more output flows
// at once; one outside [maximumFrameBytes, maximums.windowBytes] or
// without an integer resets only that subscription with protocol-error;
// one for an unknown subscription is dropped; ping answers {} to any
// role; initialize says windowUpdates.
func TestChannelWindowAndPing(t *testing.T) {
	h := start(t, false, nil)
	ch, ft := h.term("t")
	ctx := ctxT(t)
	c, res, err := client.Dial(ctx, h.url, client.Options{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !res.Capabilities.WindowUpdates {
		t.Fatal("initialize: capabilities.windowUpdates missing")
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	small := flow.ReceiveLimits{WindowBytes: 64 << 10, MaximumFrameBytes: 16 << 10, MaximumMessageBytes: 64 << 10}
	sub, err := c.Subscribe(ctx, ch.URI, &small)
	if err != nil {
		t.Fatal(err)
	}
	// The snapshot and channel/ready, released.
	for range 2 {
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = sub.Release(ctx, m)
	}
	// 512 KiB of output, none released: the host stops at the window.
	line := strings.Repeat("x", 1023) + "\n"
	for range 512 {
		ft.Emit(line)
	}
	received := func(until int64) int64 {
		var end int64
		for end < until {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			m, err := sub.Next(wctx)
			cancel()
			if err != nil {
				break
			}
			end = m.End.Position
		}
		return end
	}
	before := received(small.WindowBytes)
	if before > small.WindowBytes+small.MaximumMessageBytes {
		t.Fatalf("%d bytes arrived under a %d-byte window", before, small.WindowBytes)
	}
	if err := sub.SetWindow(ctx, 512<<10); err != nil {
		t.Fatal(err)
	}
	if w := subWindow(t, h, sub.ID, 512<<10); w != 512<<10 {
		t.Fatalf("the host's window is %d after channel/window 524288", w)
	}
	if after := received(small.WindowBytes + 256<<10); after < small.WindowBytes+256<<10 {
		t.Fatalf("only %d bytes arrived after the window grew to 512 KiB", after)
	}

	// Bad values reset only their subscription.
	for _, bad := range []string{
		`{"jsonrpc":"2.0","method":"channel/window","params":{"channel":"%s","subscriptionId":"%s","windowBytes":100}}`,
		`{"jsonrpc":"2.0","method":"channel/window","params":{"channel":"%s","subscriptionId":"%s","windowBytes":1099511627776}}`,
		`{"jsonrpc":"2.0","method":"channel/window","params":{"channel":"%s","subscriptionId":"%s","windowBytes":"big"}}`,
		`{"jsonrpc":"2.0","method":"channel/window","params":{"channel":"%s","subscriptionId":"%s"}}`,
	} {
		s, err := c.Subscribe(ctx, ch.URI, nil)
		if err != nil {
			t.Fatal(err)
		}
		msg := strings.Replace(strings.Replace(bad, "%s", ch.URI, 1), "%s", s.ID, 1)
		if err := c.SendRaw(ctx, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := s.Next(ctx); err != nil {
				var re *client.ResetError
				if !asReset(err, &re) || re.Code != flow.CodeProtocolError {
					t.Fatalf("%s: the subscription ended with %v, want channel/reset protocol-error", msg, err)
				}
				break
			}
		}
	}
	// An unknown subscription: dropped, the connection goes on.
	if err := c.SendRaw(ctx, flow.AppendWindow(nil, ch.URI, "s999", 1<<20)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("ping after a channel/window for no subscription: %v", err)
	}
	if sub.Err() != nil {
		t.Fatalf("the first subscription ended: %v", sub.Err())
	}

	// A view token pings too, and a ping as a notification gets nothing.
	view, _ := h.srv.Tokens().Mint(auth.Grant{Role: auth.RoleView})
	vc, _, err := client.Dial(ctx, h.url, client.Options{Token: view})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vc.Close() })
	if _, err := vc.Ping(ctx); err != nil {
		t.Fatalf("ping with a view token: %v", err)
	}
}

func asReset(err error, re **client.ResetError) bool {
	r, ok := err.(*client.ResetError)
	if ok {
		*re = r
	}
	return ok
}

// TestSubAutoWindowGrowsOnALongPath: a terminal subscription that tunes its
// window (client.Sub.AutoWindow, as ahpctl attach does) through an
// emulated 80 ms, 100 Mbit/s link grows it past what it asked for while
// output keeps it full, announcing each step with channel/window, and the
// host's send window follows.
func TestSubAutoWindowGrowsOnALongPath(t *testing.T) {
	h := start(t, false, nil)
	ch, ft := h.term("t")
	const rate = 100e6 / 8
	p := linkemu.Params{Delay: 40 * time.Millisecond, Rate: rate, Queue: int64(rate * 0.08)}
	link, err := linkemu.Start(strings.TrimPrefix(strings.TrimSuffix(h.url, "/v1/ws"), "ws://"), p, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	ctx := ctxT(t)
	c, _, err := client.Dial(ctx, "ws://"+link.Addr()+"/v1/ws", client.Options{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	lim := flow.ReceiveLimits{WindowBytes: 256 << 10, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 256 << 10}
	sub, err := c.Subscribe(ctx, ch.URI, &lim)
	if err != nil {
		t.Fatal(err)
	}
	// A queue target far above a loaded machine's scheduling noise: this
	// test is about the mechanism (the rules are asserted in fake time,
	// flow.TestWindowTunerFitsThePath).
	cfg := c.AutoWindowConfig(lim, lim.WindowBytes, 8<<20)
	cfg.QueueTarget = 30 * time.Millisecond
	sub.AutoWindow(cfg)
	line := strings.Repeat("y", 1023) + "\n"
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // output while the test reads: bounded by stop and by count
		defer close(done)
		for i := 0; i < 200_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ft.Emit(line)
			if i%64 == 63 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	deadline := time.Now().Add(15 * time.Second)
	for sub.WindowChanges() < 2 && time.Now().Before(deadline) {
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.Release(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	w := sub.Window()
	t.Logf("window %d → %d after %d channel/window", lim.WindowBytes, w, sub.WindowChanges())
	if sub.WindowChanges() < 2 || w <= lim.WindowBytes {
		t.Fatalf("the window is %d after %d channel/window: 256 KiB carries 3 MB/s at 80 ms on a 12.5 MB/s link", w, sub.WindowChanges())
	}
	if got := subWindow(t, h, sub.ID, w); got < lim.WindowBytes*2 {
		t.Fatalf("the host's send window is %d, the client's %d", got, w)
	}
}

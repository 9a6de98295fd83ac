package pty_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty"
)

// TestStalledViewersHoldNoMessageBuffer: viewers whose window is full
// and that never credit hold no message buffer (flow.Finisher), however
// many of them a terminal has: a thousand such subscriptions of one
// connection, served by a real flow.Sender from a flooding terminal, hold
// none between them once every window is full, where each held its last
// message's buffer before.
func TestStalledViewersHoldNoMessageBuffer(t *testing.T) {
	const n = 1000
	// A scrollback of 500 lines of 37 bytes: a snapshot is larger than a
	// window, so most windows fill in the middle of a snapshot, where a
	// viewer does not give up its buffer in its next Pull (which finds
	// the window full) either; the others fill with live output.
	term := start(t, pty.Config{Command: sh("exec yes 0123456789abcdefghijklmnopqrstuvwxyz"), Scrollback: 500})
	waitForOutput := time.Now().Add(30 * time.Second)
	for term.Stats().BytesRead < 4<<20 { // the emulator lags by at most 1 MiB
		if time.Now().After(waitForOutput) {
			t.Fatalf("the flood wrote %d bytes in 30 s", term.Stats().BytesRead)
		}
		time.Sleep(10 * time.Millisecond)
	}
	limits := flow.ReceiveLimits{WindowBytes: 16 << 10, MaximumFrameBytes: 4 << 10, MaximumMessageBytes: 16 << 10}
	sender, err := flow.NewSender(flow.SenderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// woken is what the terminal's goroutines tell the loop below, as a
	// connection's wake hook does.
	var woken struct {
		sync.Mutex
		ids []int
		in  []bool
	}
	woken.in = make([]bool, n)
	sig := make(chan struct{}, 1)
	vs := make([]*pty.Viewer, n)
	streams := make([]*flow.Stream, n)
	for i := range n {
		sub, err := term.Attach(flow.AttachRequest{
			Wake: func() {
				woken.Lock()
				if !woken.in[i] {
					woken.in[i] = true
					woken.ids = append(woken.ids, i)
				}
				woken.Unlock()
				select {
				case sig <- struct{}{}:
				default:
				}
			},
			Window: limits.WindowBytes,
			Role:   flow.RoleView,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sub.Close)
		vs[i] = sub.(*pty.Viewer)
		streams[i], err = sender.Open(flow.StreamConfig{
			Channel: "terminal", SubscriptionID: fmt.Sprint(i), Source: sub,
			Send: limits, Receive: limits,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sender.Close(streams[i]) })
	}
	full := func() int {
		k := 0
		for _, st := range streams {
			if !st.Window().MayStart() {
				k++
			}
		}
		return k
	}
	// The connection's loop: wake the streams the terminal woke, and hand
	// out every frame at once (the transport never holds any), never
	// crediting.
	var frame []byte
	deadline := time.After(60 * time.Second)
	for full() < n {
		select {
		case <-sig:
		case <-deadline:
			t.Fatalf("%d of %d windows full after 60 s", full(), n)
		}
		woken.Lock()
		ids := woken.ids
		woken.ids = nil
		for _, i := range ids {
			woken.in[i] = false
		}
		woken.Unlock()
		for _, i := range ids {
			sender.Wake(streams[i])
		}
		for {
			b, err := sender.Next(frame[:0])
			if err != nil {
				t.Fatal(err)
			}
			if b == nil {
				break
			}
			frame = b
			sender.Written(len(b))
		}
	}
	for i, v := range vs {
		if st := v.Stats(); st.BytesSent < limits.WindowBytes {
			t.Fatalf("viewer %d: %d bytes sent, window %d: the window is not full", i, st.BytesSent, limits.WindowBytes)
		}
	}
	// Each viewer's last message was 4 KiB (a quarter of its window): 4
	// MB of buffers between them, were they kept.
	if got := pty.MessageBuffers(vs); got > 64<<10 {
		t.Fatalf("%d viewers with a full window hold %d bytes of message buffers, want at most %d", n, got, 64<<10)
	}
}

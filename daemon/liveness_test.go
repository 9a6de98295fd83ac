package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/session"
)

// waitViewers waits until the daemon lists n viewer connections and
// returns the list. It polls: one list leaves out a connection whose run
// loop did not answer within viewerQueryTimeout (500 ms), which a loaded
// machine can cause.
func waitViewers(t *testing.T, h *harness, n int, within time.Duration) []session.ViewerInfo {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		vs := h.srv.ListViewers(ctx)
		cancel()
		if len(vs) == n {
			return vs
		}
		if time.Now().After(deadline) {
			t.Fatalf("viewers = %d after %v, want %d", len(vs), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func initialize(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	_ = ws.Write(ctxT(t), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"ahp/1","token":"`+adminToken+`","client":{"name":"t","version":"0"},"capabilities":{"flowControl":true}}}`))
	if got := readJSON(t, ws); !strings.Contains(got, `"result"`) {
		t.Fatalf("initialize: %s", got)
	}
}

// A peer that stops reading (so it answers no ping) and sends nothing is
// closed after three heartbeat intervals: not before (it was the
// heartbeat), and within closeWithin after.
func TestHeartbeatClosesSilentPeer(t *testing.T) {
	const interval = time.Second
	h := start(t, false, func(c *config.Config) { c.Limits.HeartbeatInterval = interval })
	dialed := time.Now() // the daemon's lastAlive is after this
	ws, _, err := h.raw(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	initialize(t, ws)
	// Not reading: pings go unanswered. Counted, not listed: ListViewers
	// may leave out a connection that is slow to answer.
	waitUntil(t, 3*interval+closeWithin, "silent peer closed", func() bool { return h.srv.ConnectionCount() == 0 })
	if open := time.Since(dialed); open < 3*interval {
		t.Fatalf("silent peer closed %v after it dialed, before three heartbeat intervals (%v)", open, 3*interval)
	}
}

// A peer that grants credit but never reads the socket: the daemon's
// transport queue stays bounded and the output-stall limit drops the
// connection; the terminal and other viewers are unaffected.
func TestOutputStallDropsConnection(t *testing.T) {
	h := start(t, false, func(c *config.Config) {
		c.Limits.MaxOutputStall = 300 * time.Millisecond
		c.Limits.HeartbeatInterval = time.Hour / 4
	})
	ch, ft := h.term("t")
	ws, _, err := h.raw(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	initialize(t, ws)
	_ = ws.Write(ctxT(t), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":2,"method":"subscribe","params":{"channel":"`+ch.URI+`","flowControl":{"receive":{"windowBytes":67108864,"maximumFrameBytes":1048576,"maximumMessageBytes":16777216}}}}`))
	readJSON(t, ws)
	_, good := h.subscribe(adminToken, ch.URI, nil)
	waitViewers(t, h, 2, closeWithin)
	chunk := strings.Repeat("x", 64<<10)
	// Bounded: at most 64 MiB, far more than the socket buffers hold.
	for i := 0; i < 1024; i++ {
		ft.Emit(chunk)
		if i%16 == 15 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			n := len(h.srv.ListViewers(ctx))
			cancel()
			if n == 1 {
				break
			}
		}
		// Keep the good viewer reading so it stays healthy.
		for good.sub.Queued() > 0 {
			if _, err := good.next(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitViewers(t, h, 1, closeWithin)
	ft.Emit("after")
	good.until(10*time.Second, func(o string) bool { return strings.Contains(o, "after") })
}

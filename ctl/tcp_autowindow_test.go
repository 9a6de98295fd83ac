package ctl_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/internal/linkemu"
)

// TestE2ETCPWindowsFitThePath: a TCP stream through an emulated link
// (80 ms round trip, 100 Mbit/s each way, a bottleneck queue of one
// bandwidth-delay product) tunes both windows to the path with
// channel/window (PROTOCOL.md §6): the host's receive window for the
// upload grows from its 256 KiB default — at which the upload would move
// 96 KiB of data per round trip — and the stream's own receive window
// for the echo coming back changes from the one it asked for. Every byte
// comes back once, in order. How fast is make bench-link's business; this
// test asserts the mechanism and the bytes.
func TestE2ETCPWindowsFitThePath(t *testing.T) {
	d, tok, host, port := echoDaemon(t)
	const rate = 100e6 / 8
	const rtt = 80 * time.Millisecond
	p := linkemu.Params{Delay: rtt / 2, Rate: rate, Queue: int64(rate * rtt.Seconds())}
	link, err := linkemu.Start(d.addr, p, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	conn, res, err := client.Dial(ctxT(t), "ws://"+link.Addr()+"/v1/ws", client.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if !res.Capabilities.WindowUpdates {
		t.Fatal("initialize: capabilities.windowUpdates is not true")
	}
	st, err := client.OpenTCP(ctxT(t), client.TCPOptions{Dial: func(context.Context) (*client.Conn, error) { return conn, nil }, Host: host, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Abort() })
	hostInitial, recvInitial := st.HostWindow(), st.ReceiveLimits().WindowBytes

	const size = 16 << 20
	data := make([]byte, size)
	_, _ = rand.Read(data)
	sent := sha256.Sum256(data)
	werr := make(chan error, 1)
	go func() {
		_, err := st.Write(data)
		if err == nil {
			err = st.CloseWrite()
		}
		werr <- err
	}()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(st, size))
	if err != nil || n != size {
		t.Fatalf("echo: %d of %d bytes: %v", n, size, err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if got := h.Sum(nil); string(got) != string(sent[:]) {
		t.Fatal("the echo differs from what was sent")
	}
	stats := st.Stats()
	t.Logf("host window %d → %d (%d changes); receive window %d → %d (%d changes)",
		hostInitial, st.HostWindow(), stats.HostWindowChanges, recvInitial, st.ReceiveLimits().WindowBytes, stats.WindowChanges)
	if stats.HostWindowChanges == 0 || st.HostWindow() <= hostInitial {
		t.Errorf("the host's receive window stayed at %d (%d channel/window): an 80 ms path needs more", st.HostWindow(), stats.HostWindowChanges)
	}
	if stats.WindowChanges == 0 {
		t.Errorf("the stream never changed its receive window from %d", recvInitial)
	}
}

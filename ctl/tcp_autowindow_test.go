package ctl_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/internal/linkemu"
)

// TestE2ETCPWindowsFitThePath: TCP streams through an emulated link (80
// ms round trip, 100 Mbit/s each way, a bottleneck queue of one
// bandwidth-delay product) tune their windows to the path with
// channel/window (PROTOCOL.md §6). A download that asked for 16 MiB (what
// the round trip at open gives it, three times the path's product) comes
// down to what the path carries once bytes queue (80 ms of queue, far above
// any scheduling noise); an upload's host window moves from its 256 KiB
// default within its bounds (on a quiet machine it grows to 1.3–1.7 MB).
// Every byte arrives once, in order. How fast is make
// bench-link's business; this test asserts the mechanism and the bytes.
func TestE2ETCPWindowsFitThePath(t *testing.T) {
	const size = 16 << 20
	data := make([]byte, size)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	// The source writes data and closes; the sink reads to EOF and
	// answers with the count and the hash of what it read.
	source := newTCPServer(t, func(c *net.TCPConn) {
		_, _ = c.Write(data)
		_ = c.CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	})
	sink := newTCPServer(t, func(c *net.TCPConn) {
		h := sha256.New()
		n, _ := io.Copy(h, c)
		var out [8]byte
		binary.BigEndian.PutUint64(out[:], uint64(n))
		_, _ = c.Write(append(out[:], h.Sum(nil)...))
		_ = c.CloseWrite()
	})
	d := startTCPDaemon(t, source.addr(), sink.addr())
	tok := strings.TrimSpace(d.mustCtl("token", "create", "--role", "control"))
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
	open := func(addr string) *client.TCPStream {
		host, ps, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(ps)
		st, err := client.OpenTCP(ctxT(t), client.TCPOptions{Dial: func(context.Context) (*client.Conn, error) { return conn, nil }, Host: host, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Abort() })
		return st
	}

	t.Run("download", func(t *testing.T) {
		st := open(source.addr())
		initial := st.ReceiveLimits().WindowBytes
		start := time.Now()
		h := sha256.New()
		n, err := io.Copy(h, st)
		if err != nil || n != size || !bytes.Equal(h.Sum(nil), sum[:]) {
			t.Fatalf("download: %d of %d bytes (%v), hash equal %v", n, size, err, bytes.Equal(h.Sum(nil), sum[:]))
		}
		final, changes := st.ReceiveLimits().WindowBytes, st.Stats().WindowChanges
		t.Logf("download: %.1f MB/s; receive window %d → %d (%d channel/window)", float64(size)/time.Since(start).Seconds()/1e6, initial, final, changes)
		// 100 Mbit/s × 80 ms is 1 MB of data, 2.7 MB of window (base64
		// in UTF-16 units): 16 MiB puts three products in the queue.
		if changes == 0 || final >= initial {
			t.Errorf("the receive window stayed at %d (%d channel/window) on a path that needs a sixth of it", final, changes)
		}
	})
	t.Run("upload", func(t *testing.T) {
		st := open(sink.addr())
		initial := st.HostWindow()
		start := time.Now()
		if _, err := st.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := st.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(st)
		if err != nil || len(back) != 8+sha256.Size {
			t.Fatalf("the sink's answer: %d bytes, %v", len(back), err)
		}
		if n := binary.BigEndian.Uint64(back); n != size || !bytes.Equal(back[8:], sum[:]) {
			t.Fatalf("the sink read %d of %d bytes, hash equal %v", n, size, bytes.Equal(back[8:], sum[:]))
		}
		final, changes := st.HostWindow(), st.Stats().HostWindowChanges
		t.Logf("upload: %.1f MB/s; the host's window %d → %d (%d channel/window)", float64(size)/time.Since(start).Seconds()/1e6, initial, final, changes)
		// Growth needs round trips within 4 ms of the smallest, which a
		// loaded machine's scheduling noise can deny for a whole run (the
		// tuner then holds, as it should): the rules are asserted in fake
		// time (flow.TestWindowTunerFitsThePath); here, that what the
		// host announced is within its bounds and the bytes are whole.
		if final < 128<<10 || final > 8<<20 {
			t.Errorf("the host's receive window is %d, outside [128 KiB, 8 MiB]", final)
		}
	})
}

// TestE2EForwardCompressAuto: forward offers permessage-deflate by itself
// when the daemon is 5 ms or more away (--compress=auto, the default): a
// tunnel that far is capped by its link, and base64 in JSON costs 1.35
// bytes on the wire per byte. On loopback it does not; --compress=never
// keeps it off; a bad value is bad usage. Bytes go through either way.
func TestE2EForwardCompressAuto(t *testing.T) {
	d, tok, host, port := echoDaemon(t)
	target := net.JoinHostPort(host, strconv.Itoa(port))
	p := linkemu.Params{Delay: 10 * time.Millisecond}
	link, err := linkemu.Start(d.addr, p, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	env := []string{"AHP_TOKEN=" + tok}
	compressing := regexp.MustCompile(`^forward: the daemon is (\S+) away: compressing`)
	echo := func(f *forwardProc) {
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		msg := bytes.Repeat([]byte("compressible text, "), 50_000)
		go func() { _, _ = c.Write(msg) }()
		back := make([]byte, len(msg))
		if _, err := io.ReadFull(c, back); err != nil || !bytes.Equal(back, msg) {
			t.Fatalf("echo through forward: %v", err)
		}
	}
	far := startForward(t, d, env, "--url", "http://"+link.Addr(), "127.0.0.1:0", target)
	if m := compressing.FindStringSubmatch(far.log()); m == nil {
		t.Fatalf("forward through a 20 ms link did not say it compresses:\n%s", far.log())
	}
	echo(far)
	near := startForward(t, d, env, "--url", "http://"+d.addr, "127.0.0.1:0", target)
	if strings.Contains(near.log(), "compressing") {
		t.Fatalf("forward on loopback compresses:\n%s", near.log())
	}
	echo(near)
	never := startForward(t, d, env, "--compress=never", "--url", "http://"+link.Addr(), "127.0.0.1:0", target)
	if strings.Contains(never.log(), "compressing") {
		t.Fatalf("--compress=never compresses:\n%s", never.log())
	}
	if _, stderr, code := d.ctl("forward", "--compress=sometimes", "127.0.0.1:0", target); code != 2 || !strings.Contains(stderr, "want auto, always or never") {
		t.Fatalf("--compress=sometimes: exit %d, %s", code, stderr)
	}
}

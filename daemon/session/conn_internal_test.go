package session

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/spare"
)

// TestFrameBufferPool: a connection keeps at most maxFreeBufs frame
// buffers, none above maxKeptBuf, and hands out the largest first, so a
// large frame does not regrow a small buffer while a large one idles.
func TestFrameBufferPool(t *testing.T) {
	var c conn
	for _, n := range []int{512, 64 << 10, 4 << 10, maxKeptBuf + 1, 1 << 20, 256, 16 << 10} {
		c.putBuf(make([]byte, 7, n))
	}
	var caps []int
	for range maxFreeBufs {
		b := c.getBuf()
		if len(b) != 0 {
			t.Fatalf("getBuf returned a buffer of length %d, want 0", len(b))
		}
		caps = append(caps, cap(b))
	}
	want := []int{1 << 20, 64 << 10, 16 << 10}
	for i := range want {
		if caps[i] != want[i] {
			t.Fatalf("buffers handed out with capacities %v, want %v", caps, want)
		}
	}
	// The list is empty now: a further getBuf takes from the shared pool
	// (frameBufs), which other tests' connections may have filled.
	for _, b := range c.free {
		if b != nil {
			t.Fatalf("the connection still keeps a buffer of capacity %d after handing out %d", cap(b), maxFreeBufs)
		}
	}
}

// TestIdleFrameBuffers: a connection gives its frame buffers up to the
// shared pool (frameBufs) when it goes idle, nothing being written and
// nothing waiting to be, and not before: while busy it keeps them. Once
// idle, a pass of its run loop with nothing to send (an inbound message
// handled) takes no buffer from the pool to give it back.
func TestIdleFrameBuffers(t *testing.T) {
	sender, err := flow.NewSender(flow.SenderConfig{TransportFrames: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{srv: newTestServer(config.Config{}, nil), sender: sender, out: make(chan []byte, 2), check: time.NewTimer(time.Hour)}
	defer c.check.Stop()
	buf := make([]byte, 0, 16<<10)
	c.putBuf(buf)
	// pass is what the run loop does before it waits.
	pass := func() {
		t.Helper()
		if err := c.pump(); err != nil {
			t.Fatal(err)
		}
		c.idleBufs()
	}
	written := func() {
		b := <-c.out
		c.sender.Written(len(b))
	}

	// Three responses: two are handed to the writer, one waits for room.
	for i := range 3 {
		if err := c.queue([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"result":{}}`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []struct {
		what string
		step func()
	}{
		{"two responses being written, one waiting", func() {}},
		{"one written, the waiting one handed out", written},
		{"two written, one being written", written},
	} {
		s.step()
		pass()
		if c.free[0] == nil || &c.free[0][:1][0] != &buf[:1][0] {
			t.Fatalf("%s: the connection gave up its frame buffer, want it kept while busy", s.what)
		}
	}
	written()
	pass()
	if c.free[0] != nil {
		t.Fatalf("idle: the connection holds a frame buffer of %d bytes, want none", cap(c.free[0]))
	}
	// The pool has buffers (ours, and more in case it dropped ours): a
	// pass with nothing to send must not take one.
	for range 4 {
		frameBufs.Put(make([]byte, 0, 4<<10))
	}
	if err := c.pump(); err != nil {
		t.Fatal(err)
	}
	if c.free[0] != nil {
		t.Fatalf("idle, nothing to send: pump took a frame buffer of %d bytes from the pool", cap(c.free[0]))
	}
}

// TestSharedBufferPoolBounds: each pool of memory the connections share
// (inbound messages, idle connections' frame buffers; internal/cork tests
// its own) never gives out a buffer above its bound, however large the
// buffers put in it, and gives back one within it. (A sync.Pool may drop what it is
// given, at random under the race detector, and other tests use the same
// pools: reuse is checked over a few tries.)
func TestSharedBufferPoolBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool *spare.Pool
		max  int
	}{
		{"inBufs", &inBufs, maxKeptInbound},
		{"frameBufs", &frameBufs, maxKeptBuf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			large, within := make([]byte, 0, tc.max+1), make([]byte, 0, tc.max)
			reused := false
			for range 100 {
				tc.pool.Put(large)
				tc.pool.Put(within)
				for b := tc.pool.Get(); b != nil; b = tc.pool.Get() {
					if cap(b) > tc.max {
						t.Fatalf("%s gave out a buffer of %d bytes, above its bound %d", tc.name, cap(b), tc.max)
					}
					if cap(b) == cap(within) && &b[:1][0] == &within[:1][0] {
						reused = true
					}
				}
				if reused {
					return
				}
			}
			t.Fatalf("%s never gave back a buffer of %d bytes (its bound) in 100 tries", tc.name, tc.max)
		})
	}
}

// writeCounter counts the writes to a socket.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

type writeCountListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l writeCountListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return writeCounter{c, l.writes}, nil
}

// unwrapOnly is a ResponseWriter wrapper that hides Hijack but unwraps.
type unwrapOnly struct{ http.ResponseWriter }

func (u unwrapOnly) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// TestWebSocketFrameOneWrite: a frame of the default maximum size leaves
// in one write to the socket, as the writer loop writes it (corked),
// through the connection's small write buffer (net/http's 4 KiB buffer
// split it in two, and woke the viewer twice); and the buffer a corked
// frame used is not the connection's own.
func TestWebSocketFrameOneWrite(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	frame := strings.Repeat("x", 48<<10) // 64 KiB of UTF-16 is at most 48 KiB of UTF-8
	before := make(chan int64, 1)
	done := make(chan struct{})
	srv := &http.Server{
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Behind a middleware's wrapper that only unwraps, as
			// http.ResponseController allows.
			ws, err := websocket.Accept(writeBufferHijacker{unwrapOnly{w}}, r, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer ws.CloseNow()
			sock := socketOf(r)
			if sock == nil {
				t.Error("no counting socket under the request")
				return
			}
			before <- writes.Load()
			sock.cork()
			err = ws.Write(r.Context(), websocket.MessageText, []byte(frame))
			if uerr := sock.uncork(); err == nil {
				err = uerr
			}
			if err != nil {
				t.Error(err)
			}
			if sock.Held() != 0 {
				t.Error("the socket kept the corked frame's buffer")
			}
			<-done
		}),
	}
	go srv.Serve(sndbufListener{writeCountListener{l, &writes}})
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := writes.Load() - <-before
	close(done)
	if string(b) != frame {
		t.Fatalf("got %d bytes, want the %d-byte frame", len(b), len(frame))
	}
	if n != 1 {
		t.Fatalf("the frame took %d writes to the socket, want 1", n)
	}
}

// outLenSource is a flow.Source of n messages of 2 KiB that records, at
// each Pull, how many items wait in out for the writer.
type outLenSource struct {
	out  chan []byte
	n    int
	seen []int
}

func (s *outLenSource) Pull(dataAllowed bool, _ int64) (flow.Message, bool) {
	if !dataAllowed || s.n == 0 {
		return flow.Message{}, false
	}
	s.n--
	s.seen = append(s.seen, len(s.out))
	return flow.Message{Text: `{"jsonrpc":"2.0","method":"x","params":{"d":"` + strings.Repeat("a", 2<<10) + `"}}`}, true
}

// TestPumpHandsOutTogether: what one pass of pump hands out reaches the
// writer together, after the pass: none of it is in out while the next
// item is being made. Sent one by one, the writer, on another P, took the
// first before the second was made and wrote each alone, a system call
// and a wake-up of the peer per frame.
func TestPumpHandsOutTogether(t *testing.T) {
	sender, err := flow.NewSender(flow.SenderConfig{TransportFrames: 2, TransportBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{srv: newTestServer(config.Config{}, nil), sender: sender, out: make(chan []byte, 4), check: time.NewTimer(time.Hour)}
	defer c.check.Stop()
	src := &outLenSource{out: c.out, n: 2}
	lim := flow.ReceiveLimits{WindowBytes: 1 << 20, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 64 << 10}
	st, err := sender.Open(flow.StreamConfig{Channel: "ahp-terminal:/t", SubscriptionID: "s1", Source: src, Send: lim, Receive: lim})
	if err != nil {
		t.Fatal(err)
	}
	sender.Wake(st)
	if err := c.pump(); err != nil {
		t.Fatal(err)
	}
	if len(src.seen) != 2 || len(c.out) != 2 {
		t.Fatalf("pump made %d messages and handed %d items to the writer, want 2 and 2", len(src.seen), len(c.out))
	}
	for i, n := range src.seen {
		if n != 0 {
			t.Fatalf("message %d was made with %d items already in out, want 0: items go to the writer after the pass", i+1, n)
		}
	}
}

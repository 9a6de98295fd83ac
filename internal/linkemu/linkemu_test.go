package linkemu_test

import (
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ahp-dev/ahpd/internal/linkemu"
)

// TestMain checks that no test leaves a goroutine behind: every Link a
// test starts is Closed, and Close waits for its goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a loopback listener whose handler runs once per connection;
// the test's cleanup closes it and its connections and waits for the
// handlers.
type server struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func newServer(t testing.TB, handle func(c *net.TCPConn)) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Go(func() { handle(c.(*net.TCPConn)) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *server) addr() string { return s.ln.Addr().String() }

func start(t testing.TB, target string, up, down linkemu.Params) *linkemu.Link {
	t.Helper()
	l, err := linkemu.Start(target, up, down)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t testing.TB, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func random(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	r.Read(b)
	return b
}

// TestBytesBothWays sends different data each way at once through links
// with delay, jitter, a rate and small queues, and compares digests.
func TestBytesBothWays(t *testing.T) {
	const n = 3 << 20
	upData, downData := random(1, n), random(2, n)
	for _, tc := range []struct {
		name string
		p    linkemu.Params
	}{
		{"plain", linkemu.Params{}},
		{"jitter", linkemu.Params{Delay: 2 * time.Millisecond, Jitter: 2 * time.Millisecond, Queue: 64 << 10, Seed: 7}},
		{"rate", linkemu.Params{Delay: time.Millisecond, Jitter: time.Millisecond, Rate: 64 << 20, Queue: 32 << 10}},
		{"tiny-queue", linkemu.Params{Queue: 100}},
		// 10 Gbit/s: the backlog of an idle bottleneck (rate × the zero
		// time's distance) overflowed int64 and the link moved nothing.
		{"10gbit", linkemu.Params{Rate: 1.25e9, Queue: 64 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan [32]byte, 1)
			srv := newServer(t, func(c *net.TCPConn) {
				var wg sync.WaitGroup
				wg.Go(func() {
					c.Write(downData)
					c.CloseWrite()
				})
				h := sha256.New()
				io.Copy(h, c)
				got <- [32]byte(h.Sum(nil))
				wg.Wait()
			})
			l := start(t, srv.addr(), tc.p, tc.p)
			c := dial(t, l.Addr())
			c.SetDeadline(time.Now().Add(60 * time.Second))
			var werr error
			var wg sync.WaitGroup
			wg.Go(func() {
				_, werr = c.Write(upData)
				c.CloseWrite()
			})
			h := sha256.New()
			if _, err := io.Copy(h, c); err != nil {
				t.Fatalf("reading the target's bytes: %v", err)
			}
			wg.Wait()
			if werr != nil {
				t.Fatalf("writing to the target: %v", werr)
			}
			if d, want := [32]byte(h.Sum(nil)), sha256.Sum256(downData); d != want {
				t.Errorf("down: sha256 %x, want %x", d, want)
			}
			if d, want := <-got, sha256.Sum256(upData); d != want {
				t.Errorf("up: sha256 %x, want %x", d, want)
			}
			if s := l.Stats(); s.Up.Bytes != n || s.Down.Bytes != n {
				t.Errorf("Stats: delivered %d up, %d down, want %d each", s.Up.Bytes, s.Down.Bytes, n)
			}
		})
	}
}

// echo copies what it reads back until EOF, then half-closes.
func echo(c *net.TCPConn) {
	io.Copy(c, c)
	c.CloseWrite()
}

// roundTrips measures n one-byte ping-pongs over c.
func roundTrips(t testing.TB, c net.Conn, n int) []time.Duration {
	t.Helper()
	rts := make([]time.Duration, n)
	b := []byte{0}
	for i := range rts {
		t0 := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		rts[i] = time.Since(t0)
	}
	return rts
}

// TestDelay checks that every round trip takes at least the two one-way
// delays; jitter moves it within its bounds.
func TestDelay(t *testing.T) {
	for _, tc := range []struct {
		name     string
		up, down linkemu.Params
	}{
		{"fixed", linkemu.Params{Delay: 15 * time.Millisecond}, linkemu.Params{Delay: 25 * time.Millisecond}},
		{"jitter", linkemu.Params{Delay: 20 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: 1},
			linkemu.Params{Delay: 20 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, echo)
			l := start(t, srv.addr(), tc.up, tc.down)
			c := dial(t, l.Addr())
			c.SetDeadline(time.Now().Add(30 * time.Second))
			rts := roundTrips(t, c, 20)
			lo := tc.up.Delay - tc.up.Jitter + tc.down.Delay - tc.down.Jitter
			hi := tc.up.Delay + tc.up.Jitter + tc.down.Delay + tc.down.Jitter
			slices.Sort(rts)
			if rts[0] < lo {
				t.Errorf("shortest round trip %v, want ≥ %v (all, sorted: %v)", rts[0], lo, rts)
			}
			// The machine may be loaded: a slow round trip says nothing
			// about the emulator unless they all are.
			if med := rts[len(rts)/2]; med > hi+50*time.Millisecond {
				t.Skipf("inconclusive: median round trip %v, over %v + 50 ms (a loaded machine?); sorted: %v", med, hi, rts)
			}
			if tc.up.Jitter > 0 && rts[0] == rts[len(rts)-1] {
				t.Errorf("jitter 10 ms: all round trips are %v", rts[0])
			}
		})
	}
}

// TestPipelined checks that a delay does not serialise the chunks: 16
// MiB through a 100 ms link at an unlimited rate take about one delay,
// not one per chunk.
func TestPipelined(t *testing.T) {
	const n = 16 << 20
	done := make(chan time.Time, 1)
	srv := newServer(t, func(c *net.TCPConn) {
		io.Copy(io.Discard, c)
		done <- time.Now()
	})
	p := linkemu.Params{Delay: 100 * time.Millisecond, Queue: 64 << 20}
	l := start(t, srv.addr(), p, linkemu.Params{})
	c := dial(t, l.Addr())
	t0 := time.Now()
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	took := (<-done).Sub(t0)
	if took < p.Delay {
		t.Errorf("16 MiB through a 100 ms link took %v, want ≥ 100 ms", took)
	}
	// One chunk per delay would be at least 64 chunks of 256 KiB × 100 ms.
	if took > 2*time.Second {
		t.Errorf("16 MiB through a 100 ms link took %v: chunks are not pipelined (one per delay would take ≥ 6.4 s)", took)
	}
}

// TestRate checks that N bytes at rate R take at least N/R, less one
// chunk (1 ms of the rate).
func TestRate(t *testing.T) {
	const (
		n    = 1 << 20
		rate = 4 << 20 // 0.25 s for n
	)
	done := make(chan time.Time, 1)
	srv := newServer(t, func(c *net.TCPConn) {
		io.Copy(io.Discard, c)
		done <- time.Now()
	})
	l := start(t, srv.addr(), linkemu.Params{Rate: rate, Queue: 64 << 10}, linkemu.Params{})
	c := dial(t, l.Addr())
	t0 := time.Now()
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	took := (<-done).Sub(t0)
	want := time.Duration(float64(n)/rate*float64(time.Second)) - time.Millisecond
	if took < want {
		t.Errorf("%d bytes at %d B/s took %v, want ≥ %v", n, rate, took, want)
	}
	if took > 10*want {
		t.Skipf("inconclusive: %d bytes at %d B/s took %v, over 10× %v (a loaded machine?)", n, rate, took, want)
	}
	t.Logf("%d bytes at %d B/s took %v (%.2f× N/R)", n, rate, took, took.Seconds()/(float64(n)/rate))
}

// TestQueueBound sends to a target that does not read: the link holds
// at most its queue (plus a chunk) and the sender is held back.
func TestQueueBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    linkemu.Params
	}{
		{"unlimited", linkemu.Params{Queue: 1 << 20}},
		{"rate", linkemu.Params{Rate: 32 << 20, Queue: 128 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			srv := newServer(t, func(c *net.TCPConn) {
				c.SetReadBuffer(16 << 10)
				<-release
			})
			defer close(release)
			l := start(t, srv.addr(), tc.p, linkemu.Params{})
			c := dial(t, l.Addr())
			const total = 256 << 20
			var written int
			var wg sync.WaitGroup
			wg.Go(func() {
				buf := make([]byte, 64<<10)
				for written < total {
					m, err := c.Write(buf)
					written += m
					if err != nil {
						return
					}
				}
			})
			chunk := int64(256 << 10) // the most the proxy reads at once
			if tc.p.Rate > 0 {
				chunk = min(chunk, max(tc.p.Rate/1000, 1460)) // 1 ms of the rate
			}
			deadline := time.Now().Add(20 * time.Second)
			for l.Stats().Up.Held < tc.p.Queue-chunk {
				if time.Now().After(deadline) {
					t.Fatalf("after 20 s the link holds %d bytes, want it to fill to about %d", l.Stats().Up.Held, tc.p.Queue)
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // the sender keeps pushing
			s := l.Stats()
			if s.Up.MaxHeld > tc.p.Queue+chunk {
				t.Errorf("the link held up to %d bytes, want ≤ Queue %d + a chunk %d", s.Up.MaxHeld, tc.p.Queue, chunk)
			}
			c.Close() // ends the writer
			wg.Wait()
			if written >= total {
				t.Errorf("the sender wrote all %d bytes to a target that reads nothing", written)
			}
			t.Logf("held %d (max %d), queue %d; the sender got %d bytes out", s.Up.Held, s.Up.MaxHeld, tc.p.Queue, written)
		})
	}
}

// TestHalfClose checks that each side's CloseWrite reaches the other,
// after the bytes before it.
func TestHalfClose(t *testing.T) {
	got := make(chan string, 1)
	srv := newServer(t, func(c *net.TCPConn) {
		b, _ := io.ReadAll(c) // until the client's CloseWrite
		got <- string(b)
		c.Write([]byte("bye"))
		c.CloseWrite()
		io.Copy(io.Discard, c)
	})
	p := linkemu.Params{Delay: 5 * time.Millisecond}
	l := start(t, srv.addr(), p, p)
	c := dial(t, l.Addr())
	c.SetDeadline(time.Now().Add(30 * time.Second))
	c.Write([]byte("hello"))
	c.CloseWrite()
	if s := <-got; s != "hello" {
		t.Errorf("the target read %q up to EOF, want hello", s)
	}
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "bye" {
		t.Errorf("the client read %q, %v up to EOF, want bye", b, err)
	}
}

// TestCloseEnds checks that a reset or close of one side closes the
// other.
func TestCloseEnds(t *testing.T) {
	t.Run("client-reset", func(t *testing.T) {
		ended := make(chan error, 1)
		srv := newServer(t, func(c *net.TCPConn) {
			_, err := io.Copy(io.Discard, c)
			ended <- err
		})
		l := start(t, srv.addr(), linkemu.Params{}, linkemu.Params{})
		c := dial(t, l.Addr())
		c.Write([]byte("x"))
		c.SetLinger(0)
		c.Close()
		select {
		case err := <-ended:
			t.Logf("the target's read ended: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("the client reset, and after 20 s the target still reads")
		}
	})
	t.Run("target-close", func(t *testing.T) {
		srv := newServer(t, func(c *net.TCPConn) { c.Close() })
		l := start(t, srv.addr(), linkemu.Params{}, linkemu.Params{})
		c := dial(t, l.Addr())
		c.SetDeadline(time.Now().Add(20 * time.Second))
		// The target's close reaches the client as EOF; the client's
		// writes then fail once the proxy has closed its end.
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("the client's read: %v, want EOF", err)
		}
		var err error
		for i := 0; i < 100 && err == nil; i++ {
			_, err = c.Write([]byte("x"))
			time.Sleep(10 * time.Millisecond)
		}
		if err == nil {
			t.Error("the target closed, and the client's writes still succeed after 1 s")
		}
	})
}

// TestCloseLeavesNoGoroutine closes a Link while its connections have
// bytes queued, delayed and blocked on a target that does not read.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	// Cleanups run last to first: release the handlers, close the
	// server, then look for goroutines.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	release := make(chan struct{})
	srv := newServer(t, func(c *net.TCPConn) { <-release })
	t.Cleanup(func() { close(release) })
	l, err := linkemu.Start(srv.addr(), linkemu.Params{Delay: time.Second, Queue: 64 << 10}, linkemu.Params{Rate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	conns := make([]net.Conn, 3)
	for i := range conns {
		c, err := net.Dial("tcp", l.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		wg.Go(func() { c.Write(make([]byte, 1<<20)) })
	}
	for l.Stats().Up.Held == 0 {
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() { l.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close has not returned after 20 s")
	}
	for _, c := range conns {
		// The proxy closed its end: reads see EOF or a reset, not a hang.
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Error("a client's connection is still open after Close")
		}
		c.Close()
	}
	wg.Wait()
	if s := l.Stats(); s.Up.Held != 0 || s.Down.Held != 0 {
		t.Errorf("after Close the link holds %d up, %d down, want 0", s.Up.Held, s.Down.Held)
	}
	if _, err := net.Dial("tcp", l.Addr()); err == nil {
		t.Error("the link accepts connections after Close")
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []linkemu.Params{{Delay: -1}, {Jitter: -1}, {Rate: -1}, {Queue: -1}} {
		if _, err := linkemu.Start("127.0.0.1:1", p, linkemu.Params{}); err == nil {
			t.Errorf("Start(%+v) = nil error, want one", p)
		}
	}
}

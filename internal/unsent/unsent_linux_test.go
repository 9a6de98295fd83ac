package unsent

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestLimitBoundsTheQueue: with the mark set, a writer to a peer that
// does not read stops after about the mark plus what the peer's receive
// buffer and the bytes in flight took, far below the megabytes an
// autotuned loopback socket otherwise queues; the mark reads back.
func TestLimitBoundsTheQueue(t *testing.T) {
	queued := func(mark int) int64 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		peer := <-accepted
		if peer == nil {
			t.Fatal("accept failed")
		}
		defer peer.Close()
		_ = peer.(*net.TCPConn).SetReadBuffer(64 << 10) // the peer reads nothing
		if mark > 0 {
			if !Limit(c, mark) {
				t.Fatal("Limit failed on a TCP socket")
			}
			if got, err := get(c.(*net.TCPConn)); err != nil || got != mark {
				t.Fatalf("TCP_NOTSENT_LOWAT reads %d (%v), want %d", got, err, mark)
			}
		}
		buf := make([]byte, 16<<10)
		var n int64
		// Bounded: at most 64 MiB, and a deadline ends the blocked write.
		_ = c.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
		for n < 64<<20 {
			k, err := c.Write(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(peer, 0))
		return n
	}
	with, without := queued(Bytes), queued(0)
	t.Logf("a writer to a peer that reads nothing queued %d KiB with the mark, %d KiB without", with>>10, without>>10)
	if with > 2<<20 {
		t.Errorf("%d KiB queued with a %d KiB mark", with>>10, Bytes>>10)
	}
	if with >= without {
		t.Errorf("the mark changed nothing: %d KiB with, %d without", with>>10, without>>10)
	}
	if Limit(&net.UnixConn{}, Bytes) {
		t.Error("Limit reported success on a socket that is not TCP")
	}
}

package rawio_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/internal/rawio"
)

// pair returns two ends of a loopback TCP connection, the first wrapped.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.FailNow()
	}
	w := rawio.NewConn(c)
	if _, ok := w.(*rawio.Conn); !ok {
		t.Fatalf("NewConn(%T) did not wrap it", c)
	}
	t.Cleanup(func() { w.Close(); s.Close() })
	return w, s
}

// TestConnCopiesBothWays: 8 MiB each way (far beyond the socket buffers,
// so writes are partial and wait for room) arrive intact, and the peer's
// close reads as io.EOF.
func TestConnCopiesBothWays(t *testing.T) {
	c, peer := pair(t)
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	errs := make(chan error, 2)
	go func() { _, err := c.Write(data); errs <- err }()
	go func() {
		got, err := io.ReadAll(io.LimitReader(peer, int64(len(data))))
		if err == nil && !bytes.Equal(got, data) {
			err = errors.New("peer read different bytes")
		}
		if err == nil {
			_, err = peer.Write(data)
		}
		if err == nil {
			err = peer.(*net.TCPConn).CloseWrite()
		}
		errs <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read through rawio: %v", err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes through rawio, not the %d written", len(got), len(data))
	}
}

// TestConnDeadlineAndClose: a read past its deadline fails with a timeout,
// and Close ends a read that waits.
func TestConnDeadlineAndClose(t *testing.T) {
	c, _ := pair(t)
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 10))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 10)); done <- err }()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read during Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a waiting read")
	}
}

// TestReadWriteNonBlocking: on a non-blocking pipe, Read and Write return
// EAGAIN instead of blocking.
func TestReadWriteNonBlocking(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	r, w := uintptr(fds[0]), uintptr(fds[1])
	if _, err := rawio.Read(r, make([]byte, 8)); err != syscall.EAGAIN {
		t.Fatalf("read of an empty pipe: %v, want EAGAIN", err)
	}
	if n, err := rawio.Write(w, []byte("hello")); n != 5 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	buf := make([]byte, 8)
	if n, err := rawio.Read(r, buf); n != 5 || err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read: %q, %v", buf[:n], err)
	}
	chunk := make([]byte, 64<<10)
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("a pipe took 64 MiB without filling up")
		}
		if _, err := rawio.Write(w, chunk); err == syscall.EAGAIN {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// TestNewConnLeavesOthers: connections that are not plain TCP or Unix
// sockets are returned unwrapped.
func TestNewConnLeavesOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if rawio.NewConn(a) != a {
		t.Fatal("NewConn wrapped a net.Pipe")
	}
}

// TestConnWritesDoNotInterleave: concurrent Writes larger than the socket
// buffer each arrive whole, as with net.Conn.
func TestConnWritesDoNotInterleave(t *testing.T) {
	c, peer := pair(t)
	// Small socket buffers and a slow reader: every 256 KiB write is
	// taken in many pieces, each after a wait for room, and a second
	// writer could slip in between two of them.
	if err := c.(*rawio.Conn).Conn.(*net.TCPConn).SetWriteBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	if err := peer.(*net.TCPConn).SetReadBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	const writers, writes, size = 4, 8, 256 << 10
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			block := bytes.Repeat([]byte{byte('a' + w)}, size)
			for range writes {
				if _, err := c.Write(block); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	got := make([]byte, writers*writes*size)
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for off := 0; off < len(got); off += size {
		if b := got[off : off+size]; bytes.Count(b, b[:1]) != size {
			t.Fatalf("the write at offset %d is mixed with another", off)
		}
	}
}

// TestWriteAllWaitsForRoom: WriteAll to a non-blocking pipe far larger
// than the pipe's buffer waits for the reader and delivers every byte.
func TestWriteAllWaitsForRoom(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "pipe-r"), os.NewFile(uintptr(fds[1]), "pipe-w") // pollable: non-blocking
	defer r.Close()
	defer w.Close()
	rc, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 13)
	}
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(io.LimitReader(r, int64(len(data)))); got <- b }()
	if err := rawio.WriteAll(rc, data); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("read %d bytes, not the %d written", len(b), len(data))
	}
}

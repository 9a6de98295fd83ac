// Package rawio reads and writes non-blocking descriptors (PTY masters,
// sockets) without telling the Go scheduler that a system call is under
// way.
//
// syscall.Read and its kin call entersyscall and exitsyscall so that a call
// that blocks releases its P to other goroutines. A call on a non-blocking
// descriptor does not wait for data or room, and there the bookkeeping
// costs more than it saves: while calls are in flight the runtime's monitor
// thread wakes every 20 µs, takes the P from any call that outlasts one of
// its ticks and hands it to another thread, and the caller then has to win
// it back. With one P (ahpd's default) on a virtual machine where a thread
// switch costs tens of microseconds, that was a fifth of the daemon's CPU
// time per keystroke. Waiting for readiness still goes through the
// runtime's poller (syscall.RawConn), so deadlines, Close and wake-ups work
// as before.
//
// The cost: a call keeps the P for its whole duration, kernel sleeps
// included. Non-blocking calls sleep only briefly: on sleeping locks
// (the socket lock, the tty's termios and output locks) and, for a PTY
// read that finds the line discipline empty, on the kernel worker that is
// moving data already written by the program into it (n_tty_read flushes
// that work before it returns EAGAIN; it is the data the next read gets).
// With syscall.Read the P would be handed over only when the monitor
// thread noticed, 20 µs to 10 ms later.
package rawio

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// Read reads from the non-blocking descriptor fd once.
func Read(fd uintptr, p []byte) (int, error) { return call(syscall.SYS_READ, fd, p) }

// Write writes to the non-blocking descriptor fd once.
func Write(fd uintptr, p []byte) (int, error) { return call(syscall.SYS_WRITE, fd, p) }

// call makes the read or write system call trap on p, again if a signal
// interrupted it.
func call(trap, fd uintptr, p []byte) (int, error) {
	for {
		n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// Conn is a net.Conn whose Read and Write use Read and Write on its
// descriptor. Everything else is the wrapped connection's.
type Conn struct {
	net.Conn
	rc syscall.RawConn
}

// NewConn wraps c, which must be a *net.TCPConn or *net.UnixConn (whose
// descriptors are non-blocking). Any other connection is returned as is.
func NewConn(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &Conn{Conn: c, rc: rc}
}

// Read implements net.Conn.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if cerr := c.rc.Read(func(fd uintptr) bool {
		n, err = Read(fd, p)
		return err != syscall.EAGAIN
	}); cerr != nil {
		return 0, c.opError("read", cerr)
	}
	if err != nil {
		return 0, c.opError("read", err)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Write implements net.Conn: it writes all of p, or fails. The whole
// write happens under the descriptor's write lock (one RawConn.Write), so
// concurrent writes do not interleave, as with net.Conn.
func (c *Conn) Write(p []byte) (int, error) {
	n, err := writeAll(c.rc, p)
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, nil
}

// WriteAll writes all of p to rc's non-blocking descriptor under one
// RawConn.Write, waiting for room through the runtime poller.
func WriteAll(rc syscall.RawConn, p []byte) error {
	_, err := writeAll(rc, p)
	return err
}

// WriteAllN is WriteAll that also returns how much of p it wrote before
// an error (a deadline set on the file, say).
func WriteAllN(rc syscall.RawConn, p []byte) (int, error) { return writeAll(rc, p) }

// writeAll is WriteAll that also returns how much it wrote.
func writeAll(rc syscall.RawConn, p []byte) (int, error) {
	written := 0
	var err error
	if cerr := rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			var n int
			n, err = Write(fd, p[written:])
			if err == syscall.EAGAIN {
				err = nil
				return false // wait until writable, then go on
			}
			if err != nil {
				return true
			}
			if n == 0 {
				err = io.ErrUnexpectedEOF
				return true
			}
			written += n
		}
		return true
	}); cerr != nil {
		return written, cerr
	}
	return written, err
}

func (c *Conn) opError(op string, err error) error {
	if _, ok := err.(*net.OpError); ok {
		return err
	}
	if e, ok := err.(syscall.Errno); ok {
		err = &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: e}
	}
	return err
}

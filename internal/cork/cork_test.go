package cork

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
)

// socket counts the writes it takes, and fails them once fail is set.
type socket struct {
	net.Conn // nil: only Write is used
	writes   atomic.Int64
	fail     error
}

func (s *socket) Write(p []byte) (int, error) {
	s.writes.Add(1)
	if s.fail != nil {
		return 0, s.fail
	}
	return len(p), nil
}

// TestCorkBound: what a Conn held goes out in one write on Uncork and is
// counted; between corks it keeps no memory of its own; uncorked, a write
// is a write; a failed write fails every later one.
func TestCorkBound(t *testing.T) {
	sock := &socket{}
	c := New(sock)
	var total int64
	for _, n := range []int{1 << 20, 4 << 10, MaxHeld} {
		c.Cork()
		for range n / 1024 {
			if _, err := c.Write(make([]byte, 1024)); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.Held(); got < n {
			t.Fatalf("corked, %d bytes written: holds %d", n, got)
		}
		if err := c.Uncork(); err != nil {
			t.Fatal(err)
		}
		total += int64(n)
		if got := sock.writes.Swap(0); got != 1 {
			t.Errorf("%d bytes corked: %d writes, want 1", n, got)
		}
		if got := c.Held(); got != 0 {
			t.Errorf("after %d bytes the Conn keeps %d bytes", n, got)
		}
		if got := c.Written(); got != total {
			t.Errorf("Written = %d, want %d", got, total)
		}
	}
	if _, err := c.Write([]byte("x")); err != nil || sock.writes.Load() != 1 {
		t.Errorf("uncorked, a write is %d writes (%v), want 1", sock.writes.Load(), err)
	}
	sock.fail = errors.New("broken pipe")
	if _, err := c.Write([]byte("y")); err == nil {
		t.Fatal("a failing write: no error")
	}
	sock.fail = nil
	c.Cork()
	if _, err := c.Write([]byte("z")); err == nil {
		t.Error("after a failed write, a corked write succeeded")
	}
	if err := c.Uncork(); err == nil {
		t.Error("after a failed write, Uncork reported no error")
	}
	var nilConn *Conn
	nilConn.Cork()
	if err := nilConn.Uncork(); err != nil {
		t.Errorf("Uncork of a nil Conn: %v", err)
	}
}

// TestHeldBufsBound: the shared pool never gives out a buffer above
// MaxHeld, however large the ones put in it, and gives back one within
// it. (A sync.Pool may drop what it is given, at random under the race
// detector: reuse is checked over a few tries.)
func TestHeldBufsBound(t *testing.T) {
	large, within := make([]byte, 0, MaxHeld+1), make([]byte, 0, MaxHeld)
	for range 100 {
		heldBufs.Put(large)
		heldBufs.Put(within)
		reused := false
		for b := heldBufs.Get(); b != nil; b = heldBufs.Get() {
			if cap(b) > MaxHeld {
				t.Fatalf("heldBufs gave out a buffer of %d bytes, above %d", cap(b), MaxHeld)
			}
			if cap(b) == cap(within) && &b[:1][0] == &within[:1][0] {
				reused = true
			}
		}
		if reused {
			return
		}
	}
	t.Fatalf("heldBufs never gave back a buffer of %d bytes (its bound) in 100 tries", MaxHeld)
}

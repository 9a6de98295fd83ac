package daemon

import "testing"

// TestFrameBufferPool: a connection keeps at most maxFreeBufs frame
// buffers, none above maxKeptBuf, and hands out the largest first, so a
// large frame does not regrow a small buffer while a large one idles.
func TestFrameBufferPool(t *testing.T) {
	var c conn
	for _, n := range []int{512, 64 << 10, 4 << 10, maxKeptBuf + 1, 1 << 20, 256, 16 << 10} {
		c.putBuf(make([]byte, 7, n))
	}
	var caps []int
	for range maxFreeBufs + 1 {
		b := c.getBuf()
		if len(b) != 0 {
			t.Fatalf("getBuf returned a buffer of length %d, want 0", len(b))
		}
		caps = append(caps, cap(b))
	}
	want := []int{1 << 20, 64 << 10, 16 << 10, 0}
	for i := range want {
		if caps[i] != want[i] {
			t.Fatalf("buffers handed out with capacities %v, want %v", caps, want)
		}
	}
}

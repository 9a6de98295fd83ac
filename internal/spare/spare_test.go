package spare

import "testing"

// TestListBound: however many buffers are offered, the list holds at most
// Count of them, none larger than MaxCap, and gives back what it holds
// emptied, newest first.
func TestListBound(t *testing.T) {
	l := List{Count: 3, MaxCap: 1 << 10}
	for i := range 10 {
		l.Put(make([]byte, 5, 100+i))
		l.Put(make([]byte, 0, 2<<10)) // too large: never kept
		l.Put(nil)
		if len(l.bufs) > l.Count || l.Bytes() > l.Count*l.MaxCap {
			t.Fatalf("after %d puts the list holds %d buffers, %d bytes; bound %d × %d", i+1, len(l.bufs), l.Bytes(), l.Count, l.MaxCap)
		}
	}
	if got := l.Bytes(); got != 100+101+102 {
		t.Fatalf("Bytes() = %d, want the first three buffers' %d", got, 100+101+102)
	}
	for _, want := range []int{102, 101, 100} {
		b := l.Get()
		if len(b) != 0 || cap(b) != want {
			t.Fatalf("Get() = len %d cap %d, want len 0 cap %d", len(b), cap(b), want)
		}
	}
	if b := l.Get(); b != nil {
		t.Fatalf("Get() on an empty list = cap %d, want nil", cap(b))
	}
}

// TestPoolBound: a Pool never gives back a buffer above MaxCap or of no
// capacity, whatever was put; one within it is given back emptied. (A
// sync.Pool may drop what it is given, and does so at random under the
// race detector, so reuse is checked over a few tries.)
func TestPoolBound(t *testing.T) {
	p := Pool{MaxCap: 1 << 10}
	for range 100 {
		p.Put(make([]byte, 3, 1<<10+1))
		p.Put(make([]byte, 0))
		p.Put(nil)
		if b := p.Get(); b != nil {
			t.Fatalf("Get() = cap %d after only buffers above MaxCap %d or empty ones were put, want nil", cap(b), p.MaxCap)
		}
	}
	reused := false
	for range 100 {
		b := make([]byte, 5, 1<<10)
		p.Put(b)
		got := p.Get()
		if got == nil {
			continue // dropped
		}
		if len(got) != 0 || &got[:1][0] != &b[0] {
			t.Fatalf("Get() = len %d cap %d, want the buffer put, emptied", len(got), cap(got))
		}
		reused = true
		break
	}
	if !reused {
		t.Fatal("a buffer within MaxCap was never given back in 100 tries")
	}
}

// TestPoolPutAllocates: putting and getting a buffer allocates nothing
// once the pool is warm (a sync.Pool of slices would allocate each
// slice's header on Put). AllocsPerRun counts whole allocations per run:
// the occasional one after a drop (at random under the race detector)
// stays below one.
func TestPoolPutAllocates(t *testing.T) {
	p := Pool{MaxCap: 1 << 10}
	buf := make([]byte, 0, 512)
	n := testing.AllocsPerRun(1000, func() {
		p.Put(buf)
		if b := p.Get(); b != nil {
			buf = b
		}
	})
	if n != 0 {
		t.Fatalf("Put then Get allocates %v times, want 0", n)
	}
}

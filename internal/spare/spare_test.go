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

package flow

// ring is a FIFO of T backed by a power-of-two circular slice that grows
// by doubling. Push and Pop are O(1) amortised; draining is linear. Its
// bound is the bound of whoever pushes into it: every user states and
// tests it.
type ring[T any] struct {
	buf  []T
	head int
	n    int
}

func (r *ring[T]) Len() int { return r.n }

func (r *ring[T]) Push(v T) {
	if r.n == len(r.buf) {
		size := 2 * len(r.buf)
		if size == 0 {
			size = 8
		}
		buf := make([]T, size)
		for i := 0; i < r.n; i++ {
			buf[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
		}
		r.buf, r.head = buf, 0
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// Peek returns the oldest element; the ring must not be empty.
func (r *ring[T]) Peek() T { return r.buf[r.head] }

// At returns the i-th oldest element.
func (r *ring[T]) At(i int) T { return r.buf[(r.head+i)&(len(r.buf)-1)] }

func (r *ring[T]) Pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v
}

// Cap returns the backing capacity (for bound tests).
func (r *ring[T]) Cap() int { return len(r.buf) }

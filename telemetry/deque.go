package telemetry

// deque is a FIFO of T backed by a power-of-two circular slice that grows
// by doubling and shrinks when mostly empty. Its bound is that of whoever
// pushes into it; each user states it.
type deque[T any] struct {
	buf  []T
	head int
	n    int
}

func (d *deque[T]) Len() int { return d.n }

func (d *deque[T]) Push(v T) {
	if d.n == len(d.buf) {
		d.resize(max(8, 2*len(d.buf)))
	}
	d.buf[(d.head+d.n)&(len(d.buf)-1)] = v
	d.n++
}

// PushFront puts v before the oldest element.
func (d *deque[T]) PushFront(v T) {
	if d.n == len(d.buf) {
		d.resize(max(8, 2*len(d.buf)))
	}
	d.head = (d.head - 1) & (len(d.buf) - 1)
	d.buf[d.head] = v
	d.n++
}

func (d *deque[T]) resize(size int) {
	buf := make([]T, size)
	for i := 0; i < d.n; i++ {
		buf[i] = d.buf[(d.head+i)&(len(d.buf)-1)]
	}
	d.buf, d.head = buf, 0
}

// Front returns the oldest element; the deque must not be empty.
func (d *deque[T]) Front() T { return d.buf[d.head] }

// Back returns the newest element; the deque must not be empty.
func (d *deque[T]) Back() T { return d.buf[(d.head+d.n-1)&(len(d.buf)-1)] }

// At returns the i-th oldest element.
func (d *deque[T]) At(i int) T { return d.buf[(d.head+i)&(len(d.buf)-1)] }

// Set replaces the i-th oldest element.
func (d *deque[T]) Set(i int, v T) { d.buf[(d.head+i)&(len(d.buf)-1)] = v }

// Ptr returns a pointer to the i-th oldest element, valid until the next
// Push.
func (d *deque[T]) Ptr(i int) *T { return &d.buf[(d.head+i)&(len(d.buf)-1)] }

func (d *deque[T]) PopFront() T {
	var zero T
	v := d.buf[d.head]
	d.buf[d.head] = zero
	d.head = (d.head + 1) & (len(d.buf) - 1)
	d.n--
	if len(d.buf) > 64 && d.n < len(d.buf)/8 {
		d.resize(len(d.buf) / 4)
	}
	return v
}

func (d *deque[T]) PopBack() T {
	var zero T
	i := (d.head + d.n - 1) & (len(d.buf) - 1)
	v := d.buf[i]
	d.buf[i] = zero
	d.n--
	return v
}

// RemoveAt removes the i-th oldest element, shifting the older ones.
// It costs O(i): callers remove near the front.
func (d *deque[T]) RemoveAt(i int) {
	for j := i; j > 0; j-- {
		d.Set(j, d.At(j-1))
	}
	d.PopFront()
}

// Clear empties the deque and lets go of its buffer.
func (d *deque[T]) Clear() { *d = deque[T]{} }

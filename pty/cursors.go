package pty

// The viewers' cursors, as the log's trim and the reader see them. With
// thousands of viewers on one terminal (one token may open that many
// subscriptions), nothing that runs per read, per pull or per Close may
// walk them all: a trim that did so cost O(n) per read and O(n²) to
// detach n viewers. Instead (all guarded by Terminal.mu):
//
//   - each item counts the live viewers whose cursor is in it
//     (item.cursors; Terminal.endCursors for cursors past the last item),
//     so the trim drops items from the front while nobody is in them and
//     a pull moves its count in O(1);
//   - a min-heap (Terminal.behind) orders live viewers by the stream
//     position past which they overflow (limit: pos + allowed), keyed
//     lazily: a pull only moves the cursor, and the key, which can only
//     be too small, is brought up to date when it reaches the top, that is
//     once the output has grown by the viewer's allowance since it was
//     keyed, not at each pull;
//   - a viewer past its limit but ahead of the emulator (it is judged on
//     output the emulator has applied) waits in a second min-heap
//     (Terminal.ahead), by position, until the emulator passes it;
//   - the viewers waiting for output are a list (Terminal.waiters), so
//     that a read wakes them without looking at the others.
//
// A trim then costs O(1) plus O(log n) per viewer that overflows or whose
// key is out of date, and a Close O(log n).

// cursorHeap is a min-heap of viewers by Viewer.hkey. A viewer is in at
// most one heap at a time (Viewer.heap).
type cursorHeap struct {
	vs []*Viewer
}

func (h *cursorHeap) top() *Viewer {
	if len(h.vs) == 0 {
		return nil
	}
	return h.vs[0]
}

func (h *cursorHeap) push(v *Viewer, key int64) {
	v.heap, v.hkey, v.hidx = h, key, len(h.vs)
	h.vs = append(h.vs, v)
	h.up(v.hidx)
}

func (h *cursorHeap) remove(v *Viewer) {
	i, last := v.hidx, len(h.vs)-1
	if i != last {
		h.swap(i, last)
	}
	h.vs[last] = nil
	h.vs = h.vs[:last]
	if i != last {
		h.fixAt(i)
	}
	v.heap, v.hidx = nil, -1
}

// fix sets v's key and restores the order.
func (h *cursorHeap) fix(v *Viewer, key int64) {
	v.hkey = key
	h.fixAt(v.hidx)
}

func (h *cursorHeap) fixAt(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *cursorHeap) swap(i, j int) {
	h.vs[i], h.vs[j] = h.vs[j], h.vs[i]
	h.vs[i].hidx, h.vs[j].hidx = i, j
}

func (h *cursorHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h.vs[p].hkey <= h.vs[i].hkey {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down moves element i down and reports whether it moved.
func (h *cursorHeap) down(i int) bool {
	start, n := i, len(h.vs)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h.vs[r].hkey < h.vs[c].hkey {
			c = r
		}
		if h.vs[c].hkey >= h.vs[i].hkey {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > start
}

// limit is the stream position past which the viewer is more than its
// allowance behind the newest output (t.mu held).
func (v *Viewer) limit() int64 { return v.pos + v.allowed() }

// cursorAt adds d to the count of live cursors at seq (t.mu held;
// firstSeq ≤ seq ≤ endSeq).
func (t *Terminal) cursorAt(seq uint64, d int32) {
	if seq == t.endSeq {
		t.endCursors += d
		return
	}
	t.items[seq-t.firstSeq].cursors += d
}

// trackLocked starts the bookkeeping of a viewer that became live (its
// snapshot started) and is not closed.
func (t *Terminal) trackLocked(v *Viewer) {
	t.cursorAt(v.seq, 1)
	t.behind.push(v, v.limit())
}

// untrackLocked ends the bookkeeping of a live viewer that overflows or
// leaves.
func (t *Terminal) untrackLocked(v *Viewer) {
	t.cursorAt(v.seq, -1)
	if v.heap != nil {
		v.heap.remove(v)
	}
}

// moveLocked moves a live viewer's cursor forward. Its key in behind is
// left as it is (too small, which trimLocked corrects when it matters),
// unless its grace ends: its limit then falls (see allowed).
func (t *Terminal) moveLocked(v *Viewer, seq uint64, off int, pos int64) {
	if seq != v.seq {
		t.cursorAt(v.seq, -1)
		t.cursorAt(seq, 1)
	}
	graceEnds := v.pos < v.graceEnd && pos >= v.graceEnd
	v.seq, v.off, v.pos = seq, off, pos
	if graceEnds && v.heap == &t.behind {
		t.behind.fix(v, v.limit())
	}
}

// waitOutputLocked puts a viewer on the list of those woken by the next
// output.
func (t *Terminal) waitOutputLocked(v *Viewer) {
	if v.widx < 0 {
		v.widx = len(t.waiters)
		t.waiters = append(t.waiters, v)
	}
}

// unwaitLocked takes a viewer off that list.
func (t *Terminal) unwaitLocked(v *Viewer) {
	i := v.widx
	if i < 0 {
		return
	}
	last := len(t.waiters) - 1
	if i != last {
		t.waiters[i] = t.waiters[last]
		t.waiters[i].widx = i
	}
	t.waiters[last] = nil
	t.waiters = t.waiters[:last]
	v.widx = -1
}

// wakeWaitersLocked empties the list of viewers waiting for output and
// returns wake extended with their hooks.
func (t *Terminal) wakeWaitersLocked(wake []func()) []func() {
	for _, v := range t.waiters {
		v.widx = -1
		v.waiting = false
		wake = append(wake, v.wake)
	}
	clear(t.waiters)
	t.waiters = t.waiters[:0]
	return wake
}

// overflowLocked marks a live viewer that fell more than its allowance
// behind: its queue is gone, it gets a snapshot when it next pulls
// (PROTOCOL.md §8). Its hook is appended to wake if it waits.
func (t *Terminal) overflowLocked(v *Viewer, wake []func()) []func() {
	t.untrackLocked(v)
	t.unwaitLocked(v)
	v.live = false
	v.lostAt = monoNow()
	v.dropped += t.endPos - v.pos // its whole queue
	if v.waiting {
		v.waiting = false
		wake = append(wake, v.wake)
	}
	return wake
}

// overflowsLocked finds the live viewers that overflow: more than their
// allowance behind the newest output, counting only output the emulator
// has applied, so that a viewer resuming from a snapshot (taken at the
// emulator's position) is not behind. Their hooks are appended to wake.
func (t *Terminal) overflowsLocked(wake []func()) []func() {
	// Viewers past their limit that were ahead of the emulator: judged
	// once it has passed them. One that moved since goes back to behind.
	for {
		v := t.ahead.top()
		if v == nil || v.hkey >= t.emuDonePos {
			break
		}
		if v.pos != v.hkey {
			t.ahead.remove(v)
			t.behind.push(v, v.limit())
			continue
		}
		wake = t.overflowLocked(v, wake)
	}
	for {
		v := t.behind.top()
		if v == nil || v.hkey >= t.endPos {
			break
		}
		if k := v.limit(); k != v.hkey {
			t.behind.fix(v, k) // it pulled since it was keyed
			continue
		}
		if v.pos < t.emuDonePos {
			wake = t.overflowLocked(v, wake)
			continue
		}
		t.behind.remove(v)
		t.ahead.push(v, v.pos)
	}
	return wake
}

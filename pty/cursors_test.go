package pty

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestCursorBookkeeping drives viewers on a terminal without a process
// (bareTerminal) through random reads, resizes, empty items, emulator
// progress, pulls of every size, resnapshots and closes, and checks after
// each step that the bookkeeping of cursors.go agrees with a walk over
// every viewer: each trim overflows exactly the live viewers more than
// their allowance behind output the emulator has applied (the rule the
// trim applied by walking them all), the log keeps no applied item before
// the first live cursor, the counts of cursors per item are right, and
// the heaps' keys are never above a viewer's limit or position.
func TestCursorBookkeeping(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testCursorBookkeeping(t, seed) })
	}
}

func testCursorBookkeeping(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	term := bareTerminal(Config{ViewerBacklog: 4 << 10})
	var vs []*Viewer
	defer func() {
		for _, v := range vs {
			v.Close()
		}
	}()
	attach := func() {
		v := term.AttachWindow(nil, int64(rng.IntN(3))*(4<<10))
		vs = append(vs, v)
	}
	// trim runs trimLocked as the reader and the emulator do, and checks
	// that it overflowed exactly the viewers the walk finds behind.
	trim := func(what string) {
		term.mu.Lock()
		want := map[*Viewer]bool{}
		for v := range term.viewers {
			if v.live && v.pos < min(term.emuDonePos, term.endPos-v.allowed()) {
				want[v] = true
			}
		}
		live := map[*Viewer]bool{}
		for v := range term.viewers {
			live[v] = v.live
		}
		wake := term.trimLocked(nil)
		for v := range term.viewers {
			if lost := live[v] && !v.live; lost != want[v] {
				term.mu.Unlock()
				t.Fatalf("%s: viewer at %d (limit %d, emulator at %d, end %d) lost its queue: %v, want %v",
					what, v.pos, v.limit(), term.emuDonePos, term.endPos, lost, want[v])
			}
		}
		if len(term.items) > 0 && term.items[0].seq < term.emuDoneSeq && term.items[0].cursors == 0 {
			term.mu.Unlock()
			t.Fatalf("%s: the log keeps item %d, applied and behind every live viewer", what, term.items[0].seq)
		}
		term.mu.Unlock()
		term.wakeAll(wake)
	}
	for step := range 3000 {
		what := fmt.Sprintf("step %d", step)
		switch r := rng.IntN(100); {
		case r < 5 && len(term.viewers) < 12:
			attach()
		case r < 30:
			var it *item
			switch k := rng.IntN(10); {
			case k == 0:
				it = &item{resize: true, rows: 24, cols: 80}
			case k == 1:
				it = &item{} // a query only
			default:
				it = &item{text: strings.Repeat("x", 1+rng.IntN(3000)), ascii: true}
			}
			term.mu.Lock()
			wake := term.appendLocked(it, nil)
			term.mu.Unlock()
			term.wakeAll(wake)
		case r < 45:
			term.emuMu.Lock()
			term.mu.Lock()
			done := term.emuDoneSeq + uint64(rng.IntN(int(term.endSeq-term.emuDoneSeq)+1))
			pos := term.endPos
			if done < term.endSeq {
				pos = term.items[done-term.firstSeq].start
			}
			term.emuDoneSeq, term.emuDonePos = done, pos
			term.emuApplied, term.emuPos = done, pos
			term.mu.Unlock()
			term.emuMu.Unlock()
			trim("emulator at " + fmt.Sprint(pos))
		case r < 90 && len(vs) > 0:
			v := vs[rng.IntN(len(vs))]
			term.mu.Lock()
			if !v.live && v.lostAt != 0 {
				// Its snapshot is due (snapDue).
				v.lostAt, v.lastSnap = monoNow()-int64(2*snapStale), time.Now().Add(-2*snapInterval)
			}
			term.mu.Unlock()
			for range 1 + rng.IntN(4) {
				v.Pull(rng.IntN(8) != 0, int64(1+rng.IntN(4))*(4<<10))
			}
		case r < 93 && len(vs) > 0:
			i := rng.IntN(len(vs))
			vs[i].Close()
			term.mu.Lock()
			kept := len(term.viewers) == 0 && len(term.items) > 0 && term.items[0].seq < term.emuDoneSeq
			term.mu.Unlock()
			if kept {
				t.Fatalf("%s: the log keeps applied output after every viewer left", what)
			}
			vs = append(vs[:i], vs[i+1:]...)
		default:
			trim(what)
		}
		checkCursors(t, term, what)
	}
}

// checkCursors checks the bookkeeping of cursors.go against a walk over
// every viewer.
func checkCursors(t *testing.T, term *Terminal, what string) {
	t.Helper()
	term.mu.Lock()
	defer term.mu.Unlock()
	counts := map[uint64]int32{}
	inHeaps := 0
	for v := range term.viewers {
		if v.closed {
			t.Fatalf("%s: a closed viewer is attached", what)
		}
		if !v.live {
			if v.heap != nil {
				t.Fatalf("%s: a viewer that is not live is in a heap", what)
			}
			continue
		}
		if v.seq < term.firstSeq || v.seq > term.endSeq {
			t.Fatalf("%s: live cursor at item %d, log holds %d..%d", what, v.seq, term.firstSeq, term.endSeq)
		}
		counts[v.seq]++
		switch v.heap {
		case &term.behind:
			if v.hkey > v.limit() {
				t.Fatalf("%s: key %d in behind, above the viewer's limit %d", what, v.hkey, v.limit())
			}
		case &term.ahead:
			if v.hkey > v.pos {
				t.Fatalf("%s: key %d in ahead, above the viewer's position %d", what, v.hkey, v.pos)
			}
		default:
			t.Fatalf("%s: a live viewer is in no heap", what)
		}
		inHeaps++
	}
	for _, h := range []*cursorHeap{&term.behind, &term.ahead} {
		for i, v := range h.vs {
			if v.hidx != i || v.heap != h {
				t.Fatalf("%s: heap index %d holds a viewer that says %d", what, i, v.hidx)
			}
			if p := (i - 1) / 2; i > 0 && h.vs[p].hkey > v.hkey {
				t.Fatalf("%s: heap out of order at %d", what, i)
			}
		}
	}
	if n := len(term.behind.vs) + len(term.ahead.vs); n != inHeaps {
		t.Fatalf("%s: %d viewers in the heaps, %d live", what, n, inHeaps)
	}
	if term.endCursors != counts[term.endSeq] {
		t.Fatalf("%s: %d cursors counted at the end, %d there", what, term.endCursors, counts[term.endSeq])
	}
	for _, it := range term.items {
		if it.cursors != counts[it.seq] {
			t.Fatalf("%s: item %d counts %d cursors, %d there", what, it.seq, it.cursors, counts[it.seq])
		}
	}
	for i, v := range term.waiters {
		if v.widx != i || !v.waiting {
			t.Fatalf("%s: waiter %d says %d (waiting %v)", what, i, v.widx, v.waiting)
		}
	}
}

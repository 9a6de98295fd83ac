package pty

import (
	"fmt"
	"strings"
	"testing"
)

// bareTerminal is a Terminal without a process or goroutines: the tests
// and benchmarks of the viewers' bookkeeping append output and advance
// the emulator's position themselves (benchRead).
func bareTerminal(cfg Config) *Terminal { return newTerminal(cfg.withDefaults()) }

// benchRead does what the reader and the emulator do with one piece of
// output: the reader appends it and wakes the viewers waiting for it, the
// emulator applies it (here: only its position moves) and trims the log.
func (t *Terminal) benchRead(text string) {
	t.mu.Lock()
	wake := t.appendLocked(&item{text: text, ascii: true}, nil)
	t.mu.Unlock()
	t.wakeAll(wake)
	t.mu.Lock()
	t.emuDoneSeq, t.emuDonePos = t.endSeq, t.endPos
	wake = t.trimLocked(nil)
	t.mu.Unlock()
	t.wakeAll(wake)
}

// benchCatchUp moves v's cursor to the end of the log, as a Pull that
// took everything would.
func (t *Terminal) benchCatchUp(v *Viewer) {
	t.mu.Lock()
	if v.live && !v.closed {
		t.moveLocked(v, t.endSeq, 0, t.endPos)
	}
	t.mu.Unlock()
}

// benchViewers attaches n viewers to a bare terminal, takes their
// snapshots and spreads their cursors over the last n pieces of output
// (viewer i is n−i pieces behind), as n viewers that each pull once per
// n reads are.
func benchViewers(tb testing.TB, n int, piece string) (*Terminal, []*Viewer) {
	t := bareTerminal(Config{})
	vs := make([]*Viewer, n)
	for i := range vs {
		v := t.AttachWindow(nil, 64<<10)
		for {
			m, ok := v.Pull(true, 64<<10)
			if !ok {
				tb.Fatal("no channel/ready")
			}
			if m.Text == readyMsg {
				break
			}
		}
		vs[i] = v
	}
	for _, v := range vs {
		t.benchRead(piece)
		t.benchCatchUp(v)
	}
	return t, vs
}

// BenchmarkViewers measures the viewers' bookkeeping on a terminal with
// 1, 100 and 10,000 viewers attached, none of which overflows: "read" is
// one piece of output appended, applied and trimmed while one viewer (in
// turn) catches up, so the log holds n pieces; "close" is the cost of
// detaching each of n viewers (close-ns/viewer), every one of them live.
func BenchmarkViewers(b *testing.B) {
	piece := strings.Repeat("a", 64)
	for _, n := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("read/viewers=%d", n), func(b *testing.B) {
			t, vs := benchViewers(b, n, piece)
			i := 0
			for b.Loop() {
				t.benchRead(piece)
				t.benchCatchUp(vs[i])
				if i++; i == n {
					i = 0
				}
			}
			if st := t.Stats(); st.Viewers != n || st.Retained > int64(n*len(piece)) {
				b.Fatalf("stats %+v: want %d viewers and at most %d bytes retained", st, n, n*len(piece))
			}
			for _, v := range vs {
				if v.Stats().BytesDropped != 0 {
					b.Fatal("a viewer overflowed")
				}
			}
		})
		b.Run(fmt.Sprintf("close/viewers=%d", n), func(b *testing.B) {
			// Each op closes the viewers of m terminals of n viewers, set
			// up outside the timer: at least 1,000 closes per StopTimer
			// and StartTimer (each reads the memory statistics, which
			// costs more than a close), or `make bench` spends minutes
			// in them.
			m := max(1, 1000/n)
			for b.Loop() {
				b.StopTimer()
				ts := make([]*Terminal, m)
				vss := make([][]*Viewer, m)
				for j := range ts {
					ts[j], vss[j] = benchViewers(b, n, piece)
				}
				b.StartTimer()
				for _, vs := range vss {
					for _, v := range vs {
						v.Close()
					}
				}
				b.StopTimer()
				for _, t := range ts {
					if st := t.Stats(); st.Viewers != 0 || st.Retained != 0 {
						b.Fatalf("stats %+v after every viewer left", st)
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*m*n), "close-ns/viewer")
		})
	}
}

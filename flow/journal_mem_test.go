package flow

import (
	"slices"
	"testing"
	"unsafe"
)

// TestJournalReusesOwnedMemoryWhole: a bulk stream whose messages are
// built in Journal.Buffer (as the TCP channel's are) is served from
// released messages' memory once warm: no new memory per message. Before,
// a released text was kept with its length as its capacity, so once the
// messages grew by a byte every buffer kept was too small, was never
// taken, and kept the list full: every message after that was new
// memory (seen in a forward download's profile).
func TestJournalReusesOwnedMemoryWhole(t *testing.T) {
	j := NewJournal()
	var id, pos int64
	send := func(n int) {
		b := j.Buffer(n)
		b = b[:n] // the message's text
		b[0], b[n-1] = '{', '}'
		id++
		start := pos
		pos += int64(2 * n)
		j.append(id, start, pos, Message{Text: unsafe.String(unsafe.SliceData(b), n), Owned: true})
	}
	// Whole reads and small messages, released at once: the journal
	// keeps as much of their memory as it may.
	for range 11 {
		send(22098)
	}
	for range 60 {
		send(160)
	}
	j.release(pos)
	// Then each message is a byte longer (its offset gained a digit),
	// with small ones between, each released after the next is sent.
	allocs := testing.AllocsPerRun(200, func() {
		send(22112)
		send(159)
		j.release(j.entries.At(j.entries.Len() - 2).end)
	})
	if allocs > 0.05 {
		t.Fatalf("%.2f allocations per pair of messages of a warm bulk stream, want none", allocs)
	}
	if j.freeBytes > journalFreeBytes || len(j.free) > journalFreeCount {
		t.Fatalf("the journal keeps %d bytes in %d buffers of released memory, bound %d and %d", j.freeBytes, len(j.free), journalFreeBytes, journalFreeCount)
	}
}

func TestRoundBuffer(t *testing.T) {
	for _, n := range []int{0, 1, 64, 65, 100, 1000, 4096, 4097, 30 << 10, 87<<10 + 123, 1 << 20, 1<<20 + 1} {
		r := roundBuffer(n)
		if r < n || r > n+n/8+1 {
			t.Errorf("roundBuffer(%d) = %d, want within [n, n + n/8]", n, r)
		}
	}
}

// TestJournalRecycleEvictsOnlyToFit: a released buffer takes the place of
// smaller ones only when evicting them makes room; else the list stays as
// it was (not smaller ones gone and the new one dropped too). And Buffer
// takes the smallest buffer that fits, keeping large ones for bulk data.
func TestJournalRecycleEvictsOnlyToFit(t *testing.T) {
	const K = 1 << 10
	list := func(caps ...int) *Journal {
		j := NewJournal()
		for _, c := range slices.Sorted(slices.Values(caps)) { // free is kept sorted
			j.free = append(j.free, make([]byte, 0, c))
			j.freeBytes += c
		}
		return j
	}
	caps := func(j *Journal) []int {
		var out []int
		for _, b := range j.free {
			out = append(out, cap(b))
		}
		slices.Sort(out)
		return out
	}
	text := func(n int) string { b := make([]byte, n); return unsafe.String(unsafe.SliceData(b), n) }

	j := list(10*K, 100*K, 100*K) // 210 KiB: 60 KiB more does not fit, nor after the 10 KiB goes
	j.recycle(text(60*K), 60*K)
	if got, want := caps(j), []int{10 * K, 100 * K, 100 * K}; !slices.Equal(got, want) {
		t.Fatalf("after recycling 60 KiB into %v: %v, want it unchanged", want, got)
	}
	j = list(10*K, 20*K, 100*K, 100*K) // 230 KiB: evicting the 10 makes room for 30
	j.recycle(text(30*K), 30*K)
	if got, want := caps(j), []int{20 * K, 30 * K, 100 * K, 100 * K}; !slices.Equal(got, want) {
		t.Fatalf("after recycling 30 KiB: %v, want %v", got, want)
	}
	if j.freeBytes != 250*K {
		t.Fatalf("freeBytes %d, want %d", j.freeBytes, 250*K)
	}
	j = list(200*K, 1*K, 50*K)
	if b := j.Buffer(60); cap(b) != 1*K {
		t.Fatalf("Buffer(60) took a buffer of %d bytes, want the 1 KiB one", cap(b))
	}
	if b := j.Buffer(40 * K); cap(b) != 50*K {
		t.Fatalf("Buffer(40 KiB) took a buffer of %d bytes, want the 50 KiB one", cap(b))
	}
}

// TestJournalCountsInBudget: the memory a journal holds (retained texts
// and the released memory it keeps) is what its budget counts, through
// appends, releases and Buffer, and Discard gives all of it back — a
// channel retained after its connection dropped is counted in a budget
// that outlives the connection.
func TestJournalCountsInBudget(t *testing.T) {
	root := NewBudget(1 << 30)
	b := root.Child(64 << 20)
	j := NewJournal()
	j.SetBudget(b)
	var id, pos int64
	check := func(when string) {
		t.Helper()
		if got, want := b.Used(), j.Memory(); got != want {
			t.Fatalf("%s: budget counts %d, journal holds %d", when, got, want)
		}
		if root.Used() != b.Used() {
			t.Fatalf("%s: parent counts %d, child %d", when, root.Used(), b.Used())
		}
	}
	for i := range 200 {
		n := 1000 + 97*i
		text := string(make([]byte, n))
		id++
		start := pos
		pos += int64(2 * n)
		if i%3 == 0 {
			buf := j.Buffer(n)[:n]
			j.append(id, start, pos, Message{Text: unsafe.String(unsafe.SliceData(buf), n), Owned: true})
		} else {
			j.append(id, start, pos, Message{Text: text})
		}
		check("append")
		if i%5 == 4 {
			j.release(pos - int64(2*n)) // all but the newest
			check("release")
		}
	}
	if j.Memory() == 0 {
		t.Fatal("the journal holds nothing: the test proves nothing")
	}
	j.Discard()
	check("discard")
	if b.Used() != 0 || j.Memory() != 0 {
		t.Fatalf("after Discard: budget %d, journal %d, want 0", b.Used(), j.Memory())
	}
	// SetBudget moves the count from one budget to the other.
	id++
	j.append(id, pos, pos+2000, Message{Text: string(make([]byte, 1000))})
	other := NewBudget(1 << 20)
	j.SetBudget(other)
	if b.Used() != 0 || other.Used() != j.Memory() {
		t.Fatalf("after SetBudget: old %d, new %d, journal %d", b.Used(), other.Used(), j.Memory())
	}
}

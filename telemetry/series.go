package telemetry

import (
	"hash/maphash"
	"slices"
	"strings"
	"time"
)

// series is one series a channel admitted (a name and its labels,
// PROTOCOL.md §8): a node of its seriesIndex.
type series struct {
	name    string
	labels  []Label // the channel's own copy (the strings are shared)
	hash    uint64
	id      uint64    // series are numbered in the order they first appeared
	lastSeq uint64    // the seq of the batch with its newest sample; 0 until published
	lastAt  time.Time // when a sample of it was last admitted
	// Its newest sample as encoded in that batch and its UTF-16 size; kept
	// for CoalesceLatest only. json is a part of the batch's text (in)
	// until the index copies it out (see pinned).
	json string
	size int64
	in   *batch

	prev, next *series // the index's list, by lastSeq
	chain      *series // the next series with the same hash
}

// seriesIndex holds the series a channel admitted: at most
// Config.MaxSeries, found by hash, and listed by the seq of their newest
// sample, oldest first. A series that had no sample for Config.SeriesIdle
// is forgotten from the front of the list; a behind viewer's coalescing
// walks back from its end over just the series its span updated
// (Sub.coalesceSpan).
//
// Under CoalesceLatest a series' newest sample is a part of its batch's
// text, which it keeps from the garbage collector: no copy per sample.
// The texts so kept are bounded by maxPinned: beyond it, the samples of
// the series listed first (the least recently updated, which are what
// keeps old batches) are copied out, so that the index holds at most
// maxPinned bytes of texts plus its samples' own size. Guarded by
// Channel.mu.
type seriesIndex struct {
	byHash map[uint64]*series
	list   series // sentinel: list.next is the oldest, list.prev the newest
	n      int
	nextID uint64
	// The texts kept by the series' samples: pinned bytes of them, and
	// the first series whose sample may be in one; none before it is.
	pinned  int64
	firstIn *series
}

// maxPinned bounds the bytes of batch texts the series' newest samples
// keep (seriesIndex).
const maxPinned = 4 << 20

func (x *seriesIndex) init() {
	x.byHash = map[uint64]*series{}
	x.list.prev, x.list.next = &x.list, &x.list
	x.firstIn = &x.list
}

// hashSeries hashes s's series with h; a collision costs a comparison.
func hashSeries(h *maphash.Hash, s *Sample) uint64 {
	h.Reset()
	h.WriteString(s.Name)
	for _, l := range s.Labels {
		h.WriteByte(0)
		h.WriteString(l.Name)
		h.WriteByte(0)
		h.WriteString(l.Value)
	}
	return h.Sum64()
}

// is reports whether s (normalized: labels sorted) is of series e.
func (e *series) is(s *Sample) bool {
	return e.name == s.Name && slices.Equal(e.labels, s.Labels)
}

// find returns s's series, or nil.
func (x *seriesIndex) find(h uint64, s *Sample) *series {
	for e := x.byHash[h]; e != nil; e = e.chain {
		if e.is(s) {
			return e
		}
	}
	return nil
}

// add takes in s's series, which find did not find. It is listed first
// (lastSeq 0) until touch moves it to the end.
func (x *seriesIndex) add(h uint64, s *Sample, now time.Time) *series {
	x.nextID++
	e := &series{name: s.Name, labels: slices.Clone(s.Labels), hash: h, id: x.nextID, lastAt: now}
	e.chain = x.byHash[h]
	x.byHash[h] = e
	e.prev, e.next = &x.list, x.list.next
	e.prev.next, e.next.prev = e, e
	x.n++
	return e
}

// touch records that batch b carries e's newest sample: e moves to the
// end of the list, whose seqs therefore never decrease. Under
// CoalesceLatest, json is that sample, a part of b's text, and size its
// UTF-16 size.
func (x *seriesIndex) touch(e *series, b *batch, json string, size int64) {
	e.lastSeq = b.seq
	if x.list.prev != e {
		x.unlink(e)
		e.prev, e.next = x.list.prev, &x.list
		e.prev.next, e.next.prev = e, e
	}
	if json == "" {
		return
	}
	x.release(e)
	e.json, e.size, e.in = json, size, b
	if b.pins == 0 {
		x.pinned += int64(len(b.text))
	}
	b.pins++
	if x.firstIn == &x.list {
		x.firstIn = e
	}
	// Copy out the samples that keep the oldest texts. Each series is
	// copied once per sample: O(1) amortised.
	for x.pinned > maxPinned && x.firstIn != &x.list {
		f := x.firstIn
		if f.in != nil {
			json := strings.Clone(f.json)
			x.release(f)
			f.json = json
		}
		x.firstIn = f.next
	}
}

// unlink takes e off the list.
func (x *seriesIndex) unlink(e *series) {
	if x.firstIn == e {
		x.firstIn = e.next
	}
	e.prev.next, e.next.prev = e.next, e.prev
}

// release lets go of the batch text e's sample is in.
func (x *seriesIndex) release(e *series) {
	if b := e.in; b != nil {
		if b.pins--; b.pins == 0 {
			x.pinned -= int64(len(b.text))
		}
		e.in = nil
	}
}

// expire forgets the series at the front of the list that had no sample
// admitted since before; it stops at the first that did (a series
// admitted but not yet published is fresh, so it is never forgotten
// before touch). Each series is forgotten once: O(1) amortised per
// series added.
func (x *seriesIndex) expire(before time.Time) {
	for e := x.list.next; e != &x.list && e.lastAt.Before(before); e = x.list.next {
		x.unlink(e)
		x.release(e)
		e.prev, e.next = nil, nil
		if head := x.byHash[e.hash]; head == e {
			if e.chain == nil {
				delete(x.byHash, e.hash)
			} else {
				x.byHash[e.hash] = e.chain
			}
		} else {
			for head.chain != e {
				head = head.chain
			}
			head.chain = e.chain
		}
		x.n--
	}
}

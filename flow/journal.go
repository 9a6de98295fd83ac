package flow

import (
	"fmt"
	"unsafe"
)

// Journal retains the logical messages of one resumable subscription
// direction (TCP, PROTOCOL.md §8) that were started but not yet released
// by credit, with their stable message ids and cumulative positions. It
// outlives connections: after a drop, Resume reconciles the peer's
// accepted/released positions and yields the messages to replay with the
// same ids.
//
// Bound: a message starts only while outstanding < window, so the journal
// retains less than WindowBytes + MaximumMessageBytes UTF-16 bytes of the
// limits in force (RetainedBytes), plus at most journalFreeBytes of
// released texts' memory kept to copy the next messages into.
//
// A Journal is not safe for concurrent use; it belongs to whoever owns the
// channel's current subscription.
type Journal struct {
	entries  ring[journalEntry]
	last     Position // last appended message
	released Position // last message released by credit
	// free holds the memory of released texts for the next appends
	// (at most journalFreeBytes of capacity): a bulk stream copies each
	// message into memory it used before instead of allocating anew.
	free      [][]byte
	freeBytes int
}

// journalFreeBytes bounds the capacity a Journal keeps in free.
const journalFreeBytes = 256 << 10

type journalEntry struct {
	id, start, end int64
	msg            Message
}

// NewJournal returns an empty journal at position {0, 0}.
func NewJournal() *Journal { return &Journal{} }

// Last returns the id and end position of the newest message.
func (j *Journal) Last() Position { return j.last }

// Released returns the newest position released by credit.
func (j *Journal) Released() Position { return j.released }

// RetainedBytes returns the UTF-16 bytes of retained messages.
func (j *Journal) RetainedBytes() int64 { return j.last.Position - j.released.Position }

// Len returns the number of retained messages.
func (j *Journal) Len() int { return j.entries.Len() }

// append retains m, with a copy of its text: a Source may reuse a text's
// memory once the Sender pulls the next message (Source).
func (j *Journal) append(id, start, end int64, m Message) {
	if !m.Owned {
		m.Text = j.clone(m.Text)
	}
	m.Size = end - start
	j.entries.Push(journalEntry{id, start, end, m})
	j.last = Position{id, end}
}

// release drops the messages that end at or before consumed, which the
// caller has validated as a boundary.
func (j *Journal) release(consumed int64) {
	for j.entries.Len() > 0 && j.entries.Peek().end <= consumed {
		e := j.entries.Pop()
		j.released = Position{e.id, e.end}
		j.recycle(e.msg.Text)
	}
}

// clone copies text into memory of a released message when one is big
// enough, or into new memory.
func (j *Journal) clone(text string) string {
	b := append(j.Buffer(len(text)), text...)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Buffer returns empty memory for at least n bytes: a released
// message's when one is big enough, else new. A Source that builds a
// message's text in it and sends it Owned spares the journal a copy.
// Like the rest of the Journal, it belongs to the owner of the channel's
// current subscription.
func (j *Journal) Buffer(n int) []byte {
	for i := len(j.free) - 1; i >= 0; i-- {
		b := j.free[i]
		if cap(b) < n {
			continue
		}
		j.free = append(j.free[:i], j.free[i+1:]...)
		j.freeBytes -= cap(b)
		return b[:0]
	}
	return make([]byte, 0, n)
}

// recycle keeps a released text's memory for clone, within
// journalFreeBytes. Nothing reads a released text: the Sender replays
// only retained messages, and a message is released only after it was
// sent whole.
func (j *Journal) recycle(text string) {
	if len(text) == 0 || j.freeBytes+len(text) > journalFreeBytes {
		return
	}
	j.free = append(j.free, unsafe.Slice(unsafe.StringData(text), len(text)))
	j.freeBytes += len(text)
}

// boundary reports whether p names the end of a retained message, or the
// released position itself.
func (j *Journal) boundary(p Position) bool {
	if p == j.released {
		return true
	}
	for i := 0; i < j.entries.Len(); i++ {
		e := j.entries.At(i)
		if e.end == p.Position {
			return e.id == p.MessageID
		}
		if e.end > p.Position {
			return false
		}
	}
	return false
}

// ResumePoint is the result of reconciling a peer's positions with a
// journal: where the resumed subscription's counters start and which
// messages it replays first.
type ResumePoint struct {
	Accepted Position // what the peer has
	Released Position // what the peer has released (now also the journal's)
}

// Resume checks the peer's accepted and released positions against the
// journal: released ≤ accepted ≤ the newest message, released not older
// than what credit already released, both on message boundaries with
// matching ids. On success the journal releases up to released. On failure
// it returns an error wrapping ErrResume and is unchanged.
func (j *Journal) Resume(accepted, released Position) (ResumePoint, error) {
	switch {
	case released.Position > accepted.Position || released.MessageID > accepted.MessageID:
		return ResumePoint{}, fmt.Errorf("%w: released %v beyond accepted %v", ErrResume, released, accepted)
	case accepted.Position > j.last.Position || accepted.MessageID > j.last.MessageID:
		return ResumePoint{}, fmt.Errorf("%w: accepted %v beyond last sent %v", ErrResume, accepted, j.last)
	case released.Position < j.released.Position:
		return ResumePoint{}, fmt.Errorf("%w: released %v older than credited %v", ErrResume, released, j.released)
	case !j.boundary(accepted):
		return ResumePoint{}, fmt.Errorf("%w: accepted %v is not a message boundary", ErrResume, accepted)
	case !j.boundary(released):
		return ResumePoint{}, fmt.Errorf("%w: released %v is not a message boundary", ErrResume, released)
	}
	j.release(released.Position)
	return ResumePoint{Accepted: accepted, Released: released}, nil
}

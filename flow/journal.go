package flow

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
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
	// (at most journalFreeBytes of capacity and journalFreeCount
	// buffers), sorted by capacity: a bulk stream builds each message in
	// memory it used before instead of allocating anew.
	free      [][]byte
	freeBytes int
	// lent is the memory Buffer handed out last: an Owned message built
	// in it is recycled with its whole capacity.
	lent []byte
	// entryMem is the memory of the retained texts; counted is what
	// budget holds for the journal (entryMem + freeBytes when synced).
	entryMem int64
	budget   *Budget
	counted  int64
}

// journalFreeBytes bounds the capacity a Journal keeps in free, and
// journalFreeCount the number of buffers.
const (
	journalFreeBytes = 256 << 10
	journalFreeCount = 16
)

type journalEntry struct {
	id, start, end int64
	msg            Message
	mem            int // capacity of the text's memory, when the journal gave it (else 0)
}

// NewJournal returns an empty journal at position {0, 0}.
func NewJournal() *Journal { return &Journal{} }

// Last returns the id and end position of the newest message.
func (j *Journal) Last() Position { return j.last }

// Released returns the newest position released by credit.
func (j *Journal) Released() Position { return j.released }

// RetainedBytes returns the UTF-16 bytes of retained messages.
func (j *Journal) RetainedBytes() int64 { return j.last.Position - j.released.Position }

// SetBudget counts the journal's memory (Memory) in b from now on, and
// in no budget it counted in before: a channel whose journal outlives its
// connections counts it in a budget that outlives them too (a token's,
// the daemon's). The journal's owner checks b's room before it produces
// more (a lossless kind waits: it stops reading). nil counts it nowhere.
func (j *Journal) SetBudget(b *Budget) {
	if j.budget != nil && j.counted > 0 {
		j.budget.Give(j.counted)
	}
	j.budget, j.counted = b, 0
	j.sync()
}

// Memory returns the bytes the journal holds: its retained texts and the
// released memory it keeps for the next ones.
func (j *Journal) Memory() int64 { return j.entryMem + int64(j.freeBytes) }

// Discard drops every retained message and kept buffer and gives their
// memory back to the budget: the channel ended, nothing will resume it.
func (j *Journal) Discard() {
	for j.entries.Len() > 0 {
		j.entries.Pop()
	}
	clear(j.free)
	j.free, j.freeBytes, j.entryMem, j.lent = nil, 0, 0, nil
	j.sync()
}

// sync brings the budget's count in line with Memory.
func (j *Journal) sync() {
	if j.budget == nil {
		return
	}
	switch d := j.Memory() - j.counted; {
	case d > 0:
		j.budget.Take(d)
	case d < 0:
		j.budget.Give(-d)
	}
	j.counted = j.Memory()
}

// Len returns the number of retained messages.
func (j *Journal) Len() int { return j.entries.Len() }

// append retains m, with a copy of its text: a Source may reuse a text's
// memory once the Sender pulls the next message (Source).
func (j *Journal) append(id, start, end int64, m Message) {
	mem := 0
	if !m.Owned {
		var b []byte
		m.Text, b = j.clone(m.Text)
		mem = cap(b)
	} else if cap(j.lent) > 0 && unsafe.StringData(m.Text) == unsafe.SliceData(j.lent) {
		mem = cap(j.lent)
	}
	j.lent = nil
	m.Size = end - start
	mem = max(mem, len(m.Text))
	j.entries.Push(journalEntry{id, start, end, m, mem})
	j.entryMem += int64(mem)
	j.last = Position{id, end}
	j.sync()
}

// release drops the messages that end at or before consumed, which the
// caller has validated as a boundary.
func (j *Journal) release(consumed int64) {
	for j.entries.Len() > 0 && j.entries.Peek().end <= consumed {
		e := j.entries.Pop()
		j.released = Position{e.id, e.end}
		j.entryMem -= int64(e.mem)
		j.recycle(e.msg.Text, e.mem)
	}
	j.sync()
}

// clone copies text into memory of a released message when one is big
// enough, or into new memory, and returns the copy and its memory.
func (j *Journal) clone(text string) (string, []byte) {
	b := append(j.Buffer(len(text)), text...)
	j.lent = nil
	return unsafe.String(unsafe.SliceData(b), len(b)), b
}

// Buffer returns empty memory for at least n bytes: a released
// message's when one is big enough, else new. A Source that builds a
// message's text in it and sends it Owned spares the journal a copy, and
// its memory is recycled whole once the message is released (when it is
// the next message the journal retains). Like the rest of the Journal,
// it belongs to the owner of the channel's current subscription.
func (j *Journal) Buffer(n int) []byte {
	// free is sorted by capacity: the first that fits is the smallest,
	// and large ones stay for bulk data.
	i, _ := slices.BinarySearchFunc(j.free, n, byCap)
	if i == len(j.free) {
		j.lent = make([]byte, 0, roundBuffer(n))
		return j.lent
	}
	b := j.free[i]
	j.free = slices.Delete(j.free, i, i+1)
	j.freeBytes -= cap(b)
	j.lent = b[:0]
	j.sync()
	return j.lent
}

func byCap(b []byte, n int) int { return cmp.Compare(cap(b), n) }

// roundBuffer rounds a new buffer's size up by at most an eighth (to a
// multiple of an eighth of the power of two at or below n), so that the
// messages of a bulk stream, whose sizes vary with the socket's reads,
// fit in the memory of those released before them.
func roundBuffer(n int) int {
	if n <= 64 {
		return n
	}
	step := 1 << (bits.Len(uint(n)) - 4)
	return (n + step - 1) &^ (step - 1)
}

// recycle keeps a released text's memory (of capacity mem, when the
// journal gave it) for Buffer, within journalFreeBytes. Nothing reads a
// released text: the Sender replays only retained messages, and a
// message is released only after it was sent whole.
//
// At most journalFreeCount buffers are kept: when the list is full, the
// smallest gives way to a larger one, so that small messages (an echo's)
// do not fill it with memory a bulk stream's next message cannot use.
func (j *Journal) recycle(text string, mem int) {
	mem = max(mem, len(text))
	if len(text) == 0 || mem > journalFreeBytes {
		return
	}
	// Evict the smallest buffers, all smaller than this one, until it
	// fits; if they cannot make room, the list stays as it is.
	k, bytes := 0, j.freeBytes
	full := func() bool { return len(j.free)-k >= journalFreeCount || bytes+mem > journalFreeBytes }
	for full() && k < len(j.free) && cap(j.free[k]) < mem {
		bytes -= cap(j.free[k])
		k++
	}
	if full() {
		return
	}
	j.free = slices.Delete(j.free, 0, k)
	i, _ := slices.BinarySearchFunc(j.free, mem, byCap)
	j.free = slices.Insert(j.free, i, unsafe.Slice(unsafe.StringData(text), mem)[:0])
	j.freeBytes = bytes + mem
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

// JournalRecord is one retained message of a Journal as Records gives it
// and RestoreJournal takes it: an upgrade in place carries a TCP channel's
// journal to the binary it re-executes (docs/upgrade.md).
type JournalRecord struct {
	ID, Start, End     int64 // the message id and its positions
	Class              Class
	Text               string
	PlainFrom, PlainTo int // Message.PlainFrom and PlainTo
}

// Records returns the retained messages, oldest first; their texts are
// copies.
func (j *Journal) Records() []JournalRecord {
	recs := make([]JournalRecord, 0, j.entries.Len())
	for i := 0; i < j.entries.Len(); i++ {
		e := j.entries.At(i)
		recs = append(recs, JournalRecord{ID: e.id, Start: e.start, End: e.end, Class: e.msg.Class,
			Text: string([]byte(e.msg.Text)), PlainFrom: e.msg.PlainFrom, PlainTo: e.msg.PlainTo})
	}
	return recs
}

// RestoreJournal returns a journal whose released position is released
// and which retains recs, as Records gave them. It checks what a Sender
// relies on: ids follow each other from released's, each message starts
// where the one before it ended and is as long as its text in UTF-16
// bytes, the class is known and the plain span lies in the text and holds
// only what a JSON string holds as itself. An error wraps ErrResume.
func RestoreJournal(released Position, recs []JournalRecord) (*Journal, error) {
	if released.MessageID < 0 || released.Position < 0 || released.MessageID > MaxSafeInteger || released.Position > MaxSafeInteger {
		return nil, fmt.Errorf("%w: journal: released %v", ErrResume, released)
	}
	j := &Journal{released: released, last: released}
	for i, r := range recs {
		switch {
		case r.ID != j.last.MessageID+1:
			return nil, fmt.Errorf("%w: journal: message %d has id %d after %d", ErrResume, i, r.ID, j.last.MessageID)
		case r.Start != j.last.Position:
			return nil, fmt.Errorf("%w: journal: message %d starts at %d, the one before it ended at %d", ErrResume, i, r.Start, j.last.Position)
		case r.Text == "" || r.End-r.Start != UTF16Len(r.Text) || r.End > MaxSafeInteger:
			return nil, fmt.Errorf("%w: journal: message %d spans %d–%d for a text of %d UTF-16 bytes", ErrResume, i, r.Start, r.End, UTF16Len(r.Text))
		case r.Class != Data && r.Class != Lifecycle:
			return nil, fmt.Errorf("%w: journal: message %d has class %d", ErrResume, i, r.Class)
		case r.PlainFrom < 0 || r.PlainFrom > r.PlainTo || r.PlainTo > len(r.Text) || !plainSpan(r.Text[r.PlainFrom:r.PlainTo]):
			return nil, fmt.Errorf("%w: journal: message %d has the plain span %d–%d", ErrResume, i, r.PlainFrom, r.PlainTo)
		}
		m := Message{Text: r.Text, Class: r.Class, Size: r.End - r.Start, PlainFrom: r.PlainFrom, PlainTo: r.PlainTo}
		j.entries.Push(journalEntry{r.ID, r.Start, r.End, m, len(r.Text)})
		j.entryMem += int64(len(r.Text))
		j.last = Position{r.ID, r.End}
	}
	return j, nil
}

// plainSpan reports whether s holds only printable ASCII other than '"'
// and '\\' (Message.PlainFrom).
func plainSpan(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

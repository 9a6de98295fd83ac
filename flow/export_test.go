package flow

// Internals exposed to the black-box tests in package flow_test.

// LedgerLen returns the number of uncredited message boundaries.
func LedgerLen(w *SendWindow) int { return w.ledgerLen() }

// LedgerCap returns the backing capacity of the boundary ring.
func LedgerCap(w *SendWindow) int { return w.bounds.Cap() }

// ReceiverBufCap returns the capacity of the reassembly buffer.
func ReceiverBufCap(r *Receiver) int { return cap(r.buf) }

// ReceiverReceived returns the payload bytes received, partial message
// included.
func ReceiverReceived(r *Receiver) int64 { return r.received }

// Inflight returns the items and bytes handed to the transport and not yet
// written.
func Inflight(s *Sender) (int, int64) { return s.inflightFrames, s.inflightBytes }

// CreditQueueLen returns the number of queued credits.
func CreditQueueLen(s *Sender) int { return s.credits.Len() }

// RingLen returns the number of ready streams in the scheduler ring.
func RingLen(s *Sender) int {
	if s.head == nil {
		return 0
	}
	n := 1
	for st := s.head.next; st != s.head; st = st.next {
		n++
	}
	return n
}

// Deficit returns st's deficit-round-robin counter.
func Deficit(st *Stream) int64 { return st.deficit }

// JournalCap returns the backing capacity of the journal's ring.
func JournalCap(j *Journal) int { return j.entries.Cap() }

// JournalFree returns the capacity a Journal keeps of released texts, and
// its bound.
func JournalFree(j *Journal) (int, int) { return j.freeBytes, journalFreeBytes }

// JournalFreeCount returns the number of buffers a Journal keeps of
// released texts, and its bound.
func JournalFreeCount(j *Journal) (int, int) { return len(j.free), journalFreeCount }

// JournalText returns the text of the i-th retained message.
func JournalText(j *Journal, i int) string { return j.entries.At(i).msg.Text }

// NextIn is Fragmenter.Next with the frame also capped at room UTF-16
// bytes (the Sender's transport room), raised to the smallest frame that
// makes progress.
func (f *Fragmenter) NextIn(dst []byte, room int64) ([]byte, int64, bool) {
	return f.next(dst, max(room, f.minFrame()))
}

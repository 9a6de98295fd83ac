package telemetry

import (
	"encoding/json"
	"math"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ahp-dev/ahpd/flow"
)

var _ flow.Subscriber = (*Sub)(nil)

// entry is one item of a viewer's queue: a batch to send, or (b nil) a
// range of seqs dropped from it, [from, to] with count samples, to be sent
// as one telemetry/dropped.
type entry struct {
	b        *batch
	from, to uint64
	count    int64
}

func (e entry) first() uint64 {
	if e.b != nil {
		return e.b.seq
	}
	return e.from
}

// Sub is one viewer of a telemetry channel. Its queue holds the batches
// not yet pulled, in seq order, and in place of those its policy dropped,
// ranges to report; the seqs it covers are contiguous, from the first the
// viewer got (history or live) to the newest. Batches are shared with the
// channel and the other viewers; only coalesced ones are its own.
//
// Bounds: at most QueueBatches batches and QueueBytes bytes of them, and
// no more ranges than batches plus two (adjacent ranges merge, so ranges
// are separated by batches, except once across the start of live ones).
type Sub struct {
	c      *Channel
	wakeFn func()
	budget *flow.Budget // the connection's queue budget (AttachRequest.Queue), or nil

	// Guarded by c.mu.
	q          deque[entry]
	qBatches   int
	qBytes     int64
	readyAfter uint64 // the first live seq: channel/ready comes before it
	readySent  bool
	initial    string
	waiting    bool // Pull found nothing: wake on news
	closed     bool
	loss       Loss
	charged    int64 // the bytes of qBytes taken from budget (see syncBudget)

	// The pulling goroutine's.
	buf  []byte
	sent atomic.Int64
}

// Loss counts what a viewer's policy dropped.
type Loss struct {
	Samples int64 // samples lost (the sum of the counts reported)
	Seqs    int64 // seqs reported in telemetry/dropped ranges
	Bytes   int64 // bytes of the batches dropped
	Ranges  int64 // telemetry/dropped messages pulled
}

func (s *Sub) wake() {
	if s.wakeFn != nil {
		s.wakeFn()
	}
}

// full reports whether a batch of size bytes does not fit the viewer's
// queue or the connection's queue budget; c.mu is held.
func (s *Sub) full(size int64) bool {
	cfg := &s.c.cfg
	return s.qBatches+1 > cfg.QueueBatches || s.qBytes+size > cfg.QueueBytes || s.budgetRoom() < size
}

// budgetRoom is what the connection's queue budget has left for this
// viewer, counting what it dropped since the last syncBudget; c.mu is
// held.
func (s *Sub) budgetRoom() int64 {
	if s.budget == nil {
		return math.MaxInt64
	}
	return s.budget.Left() + s.charged - s.qBytes
}

// syncBudget brings what the viewer has taken from the connection's
// queue budget in line with its queued bytes: it takes what it queued
// since and gives back what it sent or dropped; c.mu is held.
func (s *Sub) syncBudget() {
	if s.budget == nil {
		return
	}
	switch d := s.qBytes - s.charged; {
	case d > 0:
		s.budget.Take(d)
	case d < 0:
		s.budget.Give(-d)
	}
	s.charged = s.qBytes
}

// push queues b under the channel's policy and reports whether the viewer
// should be woken; c.mu is held.
func (s *Sub) push(b *batch) bool {
	if s.closed {
		return false
	}
	switch {
	case !s.full(b.size):
		s.q.Push(entry{b: b})
		s.qBatches++
		s.qBytes += b.size
	case s.c.cfg.Policy == DropNewest:
		s.dropNew(b)
	case s.c.cfg.Policy == CoalesceLatest && s.readySent:
		s.coalesce(b)
	default: // DropOldest, and CoalesceLatest during the initial replay
		for s.full(b.size) && s.qBatches > 0 {
			s.dropOldest()
		}
		if s.full(b.size) {
			// The connection's other viewers hold its queue budget: this
			// one has nothing left to drop but the new batch.
			s.dropNew(b)
			break
		}
		s.q.Push(entry{b: b})
		s.qBatches++
		s.qBytes += b.size
	}
	s.syncBudget()
	w := s.waiting
	s.waiting = false
	return w
}

// mergeable reports whether range b directly follows range a and may be
// reported with it: not across the start of live batches while
// channel/ready is still to come.
func (s *Sub) mergeable(a, b entry) bool {
	if a.to+1 != b.from {
		return false
	}
	return s.readySent || a.to >= s.readyAfter || b.from < s.readyAfter
}

// dropOldest drops the oldest queued batch; c.mu is held.
func (s *Sub) dropOldest() {
	for i := 0; i < s.q.Len(); i++ {
		if s.q.At(i).b != nil {
			s.dropAt(i)
			return
		}
	}
}

// dropAt replaces the batch at i with a dropped range, merged with its
// neighbours; c.mu is held.
func (s *Sub) dropAt(i int) {
	b := s.q.At(i).b
	s.qBatches--
	s.qBytes -= b.size
	s.lost(b, 1)
	d := entry{from: b.seq, to: b.seq, count: b.n}
	s.q.Set(i, d)
	if i+1 < s.q.Len() {
		if nx := s.q.At(i + 1); nx.b == nil && s.mergeable(d, nx) {
			d.to, d.count = nx.to, d.count+nx.count
			s.q.Set(i+1, d)
			s.q.RemoveAt(i)
		}
	}
	if i > 0 {
		if pv := s.q.At(i - 1); pv.b == nil && s.mergeable(pv, d) {
			pv.to, pv.count = d.to, pv.count+d.count
			s.q.Set(i, pv)
			s.q.RemoveAt(i - 1)
		}
	}
}

func (s *Sub) lost(b *batch, seqs int64) {
	s.loss.Samples += b.n
	s.c.dropped += b.n
	s.loss.Seqs += seqs
	s.loss.Bytes += b.size
}

// dropNew reports b dropped after what is queued (DropNewest); c.mu is
// held.
func (s *Sub) dropNew(b *batch) {
	s.lost(b, 1)
	d := entry{from: b.seq, to: b.seq, count: b.n}
	if s.q.Len() > 0 {
		if t := s.q.Back(); t.b == nil && s.mergeable(t, d) {
			t.to, t.count = d.to, t.count+d.count
			s.q.Set(s.q.Len()-1, t)
			return
		}
	}
	s.q.Push(d)
}

// coalesce merges everything queued and b into the newest sample of each
// series (CoalesceLatest). The span of seqs they covered, [from, b.seq],
// is reported as: the survivors, encoded into as few batches as they need,
// which take the span's newest seqs, and one dropped range before them
// for the other seqs, whose count is every sample of the span that did not
// survive (ranges already queued included). Then, so that coalescing is
// not repeated at every batch when there are many series, the oldest
// batches are dropped until the queue is at most half full. c.mu is held.
func (s *Sub) coalesce(b *batch) {
	cfg := &s.c.cfg
	from := b.seq
	if s.q.Len() > 0 {
		from = s.q.Front().first()
	}
	latest := map[string]int{} // series → index in kept
	var kept []Sample
	var prevLost, prevSeqs, total, bytes int64
	add := func(bt *batch) {
		total += bt.n
		bytes += bt.size
		for _, sm := range bt.samples {
			k := seriesKey(&sm)
			if i, ok := latest[k]; ok {
				kept[i] = sm
			} else {
				latest[k] = len(kept)
				kept = append(kept, sm)
			}
		}
	}
	for i := 0; i < s.q.Len(); i++ {
		if e := s.q.At(i); e.b != nil {
			add(e.b)
		} else {
			prevLost += e.count
			prevSeqs += int64(e.to - e.from + 1)
		}
	}
	add(b)

	// Encode the survivors.
	maxBody := cfg.MaxBatchBytes - batchOverhead
	type chunk struct {
		body    []byte
		samples []Sample
	}
	var chunks []chunk
	for len(kept) > 0 {
		var body []byte
		var size int64
		n := 0
		for n < len(kept) && n < cfg.MaxBatchSamples {
			start := len(body)
			if n > 0 {
				body = append(body, ',')
			}
			body = kept[n].AppendJSON(body)
			sz := flow.UTF16Len(unsafe.String(unsafe.SliceData(body[start:]), len(body)-start))
			if n > 0 && size+sz > maxBody {
				body = body[:start]
				break
			}
			size += sz
			n++
		}
		chunks = append(chunks, chunk{body, kept[:n:n]})
		kept = kept[n:]
	}
	span := int64(b.seq-from) + 1
	if int64(len(chunks)) > span { // cannot happen with real batches; keep the newest
		chunks = chunks[int64(len(chunks))-span:]
	}
	var delivered int64
	for _, ch := range chunks {
		delivered += int64(len(ch.samples))
	}
	k := int64(len(chunks))
	s.loss.Samples += total - delivered
	s.c.dropped += total - delivered
	s.loss.Seqs += span - k - prevSeqs
	s.q.Clear()
	s.qBatches, s.qBytes = 0, 0
	if span > k {
		s.q.Push(entry{from: from, to: b.seq - uint64(k), count: prevLost + total - delivered})
	}
	now := time.Now()
	for i, ch := range chunks {
		nb := makeBatch(b.seq-uint64(k)+1+uint64(i), ch.body, int64(len(ch.samples)), now, ch.samples)
		s.q.Push(entry{b: nb})
		s.qBatches++
		s.qBytes += nb.size
	}
	s.loss.Bytes += max(0, bytes-s.qBytes)
	for s.qBatches > cfg.QueueBatches/2 || s.qBytes > cfg.QueueBytes/2 || (s.budgetRoom() < 0 && s.qBatches > 0) {
		s.dropOldest()
	}
}

// Ready reports the viewer ready at once: it starts with the history
// replay, or live.
func (s *Sub) Ready() (flow.AttachResult, bool, error) {
	return flow.AttachResult{Initial: s.initial}, true, nil
}

// Pull hands out, in seq order, the queued batches as telemetry/samples
// and the dropped ranges as telemetry/dropped, with channel/ready after the
// replay. What it returns has left the queue: the policy never drops it.
// A batch larger than a receiver's maximumMessageBytes below
// flow.MinPullSize (which cannot be split: its seq is the channel's) is
// reported dropped instead.
func (s *Sub) Pull(dataAllowed bool, maxMessageBytes int64) (flow.Message, bool) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	defer s.syncBudget()
	if s.closed || c.closed || !dataAllowed {
		s.waiting = true
		return flow.Message{}, false
	}
	for {
		if !s.readySent && (s.q.Len() == 0 || s.q.Front().first() >= s.readyAfter) {
			s.readySent = true
			return s.sentMsg(flow.Message{Text: readyMsg, Class: flow.Data, Size: 2 * int64(len(readyMsg))})
		}
		if s.q.Len() == 0 {
			s.waiting = true
			return flow.Message{}, false
		}
		e := s.q.Front()
		if e.b == nil {
			s.q.PopFront()
			s.loss.Ranges++
			t := append(s.buf[:0], droppedPrefix...)
			t = strconv.AppendUint(t, e.from, 10)
			t = append(t, `,"toSeq":`...)
			t = strconv.AppendUint(t, e.to, 10)
			t = append(t, `,"count":`...)
			t = strconv.AppendInt(t, e.count, 10)
			t = append(t, `}}`...)
			s.buf = t
			return s.sentMsg(flow.Message{Text: unsafe.String(unsafe.SliceData(t), len(t)), Class: flow.Data, Size: 2 * int64(len(t))})
		}
		if e.b.size > maxMessageBytes && maxMessageBytes < flow.MinPullSize {
			s.dropAt(0)
			continue
		}
		s.q.PopFront()
		s.qBatches--
		s.qBytes -= e.b.size
		return s.sentMsg(flow.Message{Text: e.b.text, Class: flow.Data, Size: e.b.size})
	}
}

func (s *Sub) sentMsg(m flow.Message) (flow.Message, bool) {
	s.sent.Add(m.Size)
	return m, true
}

// Deliver refuses client messages: a telemetry channel takes none.
func (s *Sub) Deliver(method string, _ json.RawMessage, _ func()) error {
	return &flow.Reset{Code: flow.CodeProtocolError, Message: "a telemetry channel takes no client messages, got " + strconv.Quote(method)}
}

// Request answers no kind requests.
func (s *Sub) Request(method string, _ json.RawMessage) (any, error) {
	return nil, &flow.Error{Code: flow.ErrCodeMethodNotFound, Message: "method not found on a telemetry channel: " + strconv.Quote(method)}
}

// End is channel-closed once the channel is closed.
func (s *Sub) End() *flow.Reset {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return &flow.Reset{Code: flow.CodeChannelClosed, Message: "the telemetry channel was closed"}
	}
	return nil
}

// Stats returns the viewer's counters: Queued is the bytes of its queued
// batches, BytesDropped those of the batches its policy dropped.
func (s *Sub) Stats() flow.SubscriberStats {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return flow.SubscriberStats{BytesSent: s.sent.Load(), BytesDropped: s.loss.Bytes, Queued: s.qBytes}
}

// Loss returns what the viewer's policy dropped so far.
func (s *Sub) Loss() Loss {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.loss
}

// Close detaches the viewer; idempotent.
func (s *Sub) Close() {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	delete(c.subs, s)
	s.q.Clear()
	s.qBatches, s.qBytes = 0, 0
	s.syncBudget()
}
